"""The DeepSeek-V3.2 family: DeepSeek-V3 with DeepSeek Sparse Attention, a lightning indexer choosing each query's
index_topk keys (transformers' DeepseekV32ForCausalLM)."""
