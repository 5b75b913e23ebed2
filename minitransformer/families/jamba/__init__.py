"""Jamba (transformers' JambaForCausalLM): Mamba-1 mixers with attention one layer in eight, experts every other layer."""
