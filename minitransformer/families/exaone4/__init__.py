"""The EXAONE 4 family: transformers' Exaone4ForCausalLM, OLMo 2's block with Qwen3's q/k norms, windows and NoPE."""
