"""Bamba: transformers' BambaForCausalLM, Mamba-2 or attention layers, each with a SwiGLU MLP."""
