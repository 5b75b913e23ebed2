"""The DeepSeek-V3 family: multi-head latent attention (MLA) and a mixture of 256 routed experts, 8 a token chosen by
sigmoid scores in groups, beside a shared expert every token reads, after dense first layers (transformers'
DeepseekV3ForCausalLM)."""
