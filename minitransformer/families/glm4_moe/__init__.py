"""The GLM-4.5 family: transformers' Glm4MoeForCausalLM, grouped-query attention beside DeepSeek-V3's experts."""
