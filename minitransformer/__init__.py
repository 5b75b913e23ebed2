"""minitransformer: transformers in NumPy with every matrix multiply counted.

    import minitransformer
    model = minitransformer.load_model("gpt2")          # or a directory, or "demo"
    out = model.generate("The capital of France is", max_new_tokens=5)
    out.text, out.ledger.totals.macs

The package in layers, each importing only those below it (tests/test_engine_rules.py holds it):
cli -> views -> verbs -> models -> families -> engine (errors.py, version.py and text.py at the bottom).
"""

import sys

from .errors import UserError
from .families.gpt2.config import GPT2Config
from .models.model import Model
from .models.registry import load_model
from .models.tokenizer import load_tokenizer
from .verbs import count
from .verbs import generate as _generate  # noqa: F401 - its import sets what model.generate(...) runs
from .version import __version__
from .views import html_report

# The module paths docs/api.md names (`from minitransformer.count import count_passes`,
# `from minitransformer.html_report import generation_page`) stay where users found them. Importing
# html_report also gives a ledger, a generation and a count their inline view in Jupyter (_repr_html_).
sys.modules[f"{__name__}.count"] = count
sys.modules[f"{__name__}.html_report"] = html_report

__all__ = ["GPT2Config", "Model", "UserError", "__version__", "load_model", "load_tokenizer"]
