"""The Qwen3-Next family: transformers' Qwen3NextForCausalLM, Qwen3.5-MoE's layers with fused in-projections and dense layers."""
