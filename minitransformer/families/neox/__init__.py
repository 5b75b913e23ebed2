"""The GPT-NeoX family: GPT-NeoX-20B and Pythia (GPTNeoXForCausalLM)."""
