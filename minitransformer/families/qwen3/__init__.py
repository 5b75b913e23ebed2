"""The Qwen3 family: transformers' Qwen3ForCausalLM, a Llama block with an RMSNorm on each head's q and k."""
