"""The gpt-oss family: transformers' GptOssForCausalLM, attention sinks, alternating windows and a mixture of experts
with biases and a clamped SwiGLU, over YaRN rotary positions."""
