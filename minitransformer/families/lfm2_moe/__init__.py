"""The LFM2-MoE family: transformers' Lfm2MoeForCausalLM, LFM2's layers with a mixture of experts after dense first layers."""
