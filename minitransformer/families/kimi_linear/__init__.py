"""Kimi Linear (transformers' KimiLinearForCausalLM): Kimi Delta Attention beside NoPE latent attention."""
