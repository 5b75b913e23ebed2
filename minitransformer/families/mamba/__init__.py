"""Mamba (Mamba-1): the selective state-space model (transformers' MambaForCausalLM, its pure-PyTorch path): every
block a Mamba-1 mixer (in_proj to x and z, a depthwise causal conv, x_proj to dt, B and C, dt_proj, the selective
scan over a state [I, N] per layer, the D skip, the gate, out_proj) after an RMSNorm. The mixer (families/parts/
mamba1.py) is also Falcon-Mamba's (families/falcon_mamba/)."""
