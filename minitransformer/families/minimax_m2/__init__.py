"""The MiniMax-M2 family: transformers' MiniMaxM2ForCausalLM, Mixtral's block with sigmoid-routed experts."""
