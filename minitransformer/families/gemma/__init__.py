"""The Gemma family: Gemma 2 (Gemma2ForCausalLM) and Gemma 3's text model (Gemma3ForCausalLM), as the Llama block's
difference."""
