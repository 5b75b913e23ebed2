"""The Seed-OSS family: transformers' SeedOssForCausalLM, the Llama block with its own switches for each bias."""
