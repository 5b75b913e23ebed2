"""The engine: the tape (the one counting door), the ledger, the stages, the arithmetic that is not a dot product,
shape-only stand-ins, the KV cache and the watchers. It knows no family, no file and no view."""
