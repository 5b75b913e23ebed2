"""Falcon-H1: transformers' FalconH1ForCausalLM, a Mamba-2 mixer and attention side by side in every layer."""
