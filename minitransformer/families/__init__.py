"""The model families: one forward pass per family, one named stage per line."""
