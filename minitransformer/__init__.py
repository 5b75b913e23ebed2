"""minitransformer: transformers in NumPy with every matrix multiply counted.

    import minitransformer
    model = minitransformer.load_model("gpt2")          # or a directory, or "demo"
    out = model.generate("The capital of France is", max_new_tokens=5)
    out.text, out.ledger.totals.macs

The package in layers, each importing only those below it (tests/engine/test_engine_rules.py holds it):
cli -> views -> verbs -> models -> families -> engine (errors.py, version.py and text.py at the bottom).
Beside this file, count.py, html_report.py and roofline.py name the API's counting, pages and rooflines where
docs/api.md finds them.
"""

from . import count, html_report, roofline  # html_report gives a ledger, a generation and a count their Jupyter view
from .errors import UserError
from .families.gpt2.config import GPT2Config
from .models.model import Model
from .models.registry import load_model
from .models.tokenizer import load_tokenizer
from .verbs import generate as _generate  # noqa: F401 - its import sets what model.generate(...) runs
from .verbs.drift import drift
from .version import __version__

__all__ = [
    "GPT2Config",
    "Model",
    "UserError",
    "__version__",
    "count",
    "drift",
    "html_report",
    "load_model",
    "load_tokenizer",
    "roofline",
]
