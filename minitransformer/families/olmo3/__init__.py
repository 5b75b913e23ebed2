"""The OLMo 3 family: transformers' Olmo3ForCausalLM, OLMo 2's block with sliding windows and a rope per layer type."""
