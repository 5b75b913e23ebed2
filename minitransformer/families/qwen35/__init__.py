"""The Qwen3.5 family: transformers' Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM, Gated DeltaNet (linear attention)
layers beside gated full-attention layers, with a SwiGLU MLP or a mixture of experts and a shared expert."""
