"""The Qwen3-MoE family: transformers' Qwen3MoeForCausalLM, Qwen3's attention (q and k RMS-normalised per head) with
a mixture of experts in place of the MLP, beside dense MLP layers where the config says so."""
