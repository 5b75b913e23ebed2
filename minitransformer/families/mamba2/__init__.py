"""Mamba-2: the pure state-space model (transformers' Mamba2ForCausalLM, its pure-PyTorch `torch_forward` path):
every block a Mamba-2 mixer (in_proj, a depthwise causal conv, the SSD scan in chunks for a prompt and the
recurrent step in decode, the D skip, the gated RMSNorm, out_proj) after an RMSNorm. The mixer (families/parts/
mamba2.py, its scan parts/ssd.py) is also Nemotron-H's (families/nemotron_h/)."""
