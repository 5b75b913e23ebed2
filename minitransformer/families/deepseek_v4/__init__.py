"""The DeepSeek-V4 family (DeepSeek-V4-Pro, -Flash): compressed sparse and heavily compressed attention beside a
sliding window, one key-value head with K = V, hyper-connections of the residual stream, hash-routed first layers
(transformers' DeepseekV4ForCausalLM)."""
