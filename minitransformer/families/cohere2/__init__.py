"""Cohere2 (transformers' Cohere2ForCausalLM, Command R7B): a parallel block, windows, NoPE global layers, a logit scale."""
