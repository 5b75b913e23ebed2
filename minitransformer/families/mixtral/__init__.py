"""The Mixtral family: a Mistral block whose MLP is a mixture of experts (transformers' MixtralForCausalLM)."""
