"""The GLM-5 family: transformers' GlmMoeDsaForCausalLM, DeepSeek-V3.2 with shared top-k."""
