"""The Phi-3 family: Phi-3 and Phi-3.5 (transformers' Phi3ForCausalLM, Phi3Config), as its difference from Llama."""
