"""ERNIE 4.5 (transformers' Ernie4_5ForCausalLM): the Llama block, rotary on neighbouring pairs, one bias switch."""
