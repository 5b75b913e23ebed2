"""The DeepSeek-V3.2 family: DeepSeek-V3 (latent attention, routed and shared experts) with DeepSeek Sparse Attention,
a lightning indexer that scores every earlier key and lets each query attend to the index_topk it ranks highest
(transformers' DeepseekV32ForCausalLM)."""
