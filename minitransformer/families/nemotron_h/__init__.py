"""Nemotron-H: transformers' NemotronHForCausalLM, each layer one of four kinds as its config's pattern says: a Mamba-2
mixer (families/parts/mamba2.py), grouped-query attention without positions, a squared-ReLU MLP, or a mixture of
squared-ReLU experts with a shared expert (DeepSeek-V3's router)."""
