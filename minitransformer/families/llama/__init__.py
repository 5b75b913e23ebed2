"""The Llama family: Llama 2 and 3, Mistral, Qwen2 (LlamaForCausalLM and its copies)."""
