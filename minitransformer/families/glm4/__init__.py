"""GLM-4-0414 (transformers' Glm4ForCausalLM): the Llama family's parts in four norms a block, interleaved rotary."""
