"""ERNIE 4.5's mixture of experts (transformers' Ernie4_5_MoeForCausalLM): ERNIE 4.5's attention, routed and shared experts."""
