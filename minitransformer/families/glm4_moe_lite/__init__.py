"""The GLM-4.7-Flash family: transformers' Glm4MoeLiteForCausalLM, DeepSeek-V3's latent attention and experts."""
