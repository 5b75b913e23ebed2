"""Llama 4's text model: transformers' Llama4ForCausalLM, chunked attention beside NoPE global layers, experts."""
