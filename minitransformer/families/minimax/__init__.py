"""The MiniMax family: MiniMax-Text-01 and MiniMax-M1 (transformers' MiniMaxForCausalLM): lightning attention."""
