"""The Gemma 4 family: Gemma 4's text model (Gemma4ForCausalLM, model_type gemma4_text), as Gemma 3's difference."""
