"""The SmolLM3 family: transformers' SmolLM3ForCausalLM, a Llama block with no rotary positions in every fourth layer."""
