"""Falcon-Mamba: Mamba-1 with weightless RMSNorms on dt, B and C inside the mixer (families/falcon_mamba/family.py)."""
