"""minitransformer: GPT-2 in NumPy with every matrix multiply counted.

    import minitransformer
    model = minitransformer.load_model("gpt2")          # or a directory, or "demo"
    out = model.generate("The capital of France is", max_new_tokens=5)
    out.text, out.ledger.totals.macs
"""

from .config import GPT2Config
from .errors import UserError
from .model import Model, load_model
from .tokenizer import load_tokenizer

__all__ = ["GPT2Config", "Model", "UserError", "load_model", "load_tokenizer"]
__version__ = "0.1.0"
