"""Granite 4.0-H: transformers' GraniteMoeHybridForCausalLM, Bamba's layers with Granite's experts and multipliers."""
