"""A model and where it comes from: its config, its weights, its tokenizer, the hub, which model a name means."""
