"""The OLMo 2 family: transformers' Olmo2ForCausalLM, a Llama block whose norms follow attention and the MLP."""
