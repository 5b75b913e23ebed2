"""The LFM2 family: transformers' Lfm2ForCausalLM, double-gated short convolutions beside grouped-query attention."""
