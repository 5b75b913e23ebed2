"""The GLM-5 family: transformers' GlmMoeDsaForCausalLM, DeepSeek-V3.2 with interleaved indexer rotary and shared top-k."""
