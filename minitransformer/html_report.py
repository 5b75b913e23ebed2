"""The HTML report, where the README's API finds it: `from minitransformer.html_report import generation_page`.

The view lives in views/html_report.py; this module only names its pages and fragments at the top of the package.
"""

from .views.html_report import (
    count_data,
    count_fragment,
    fragment,
    generation_data,
    generation_fragment,
    generation_page,
    ledger_data,
    ledger_fragment,
    page,
)

__all__ = [
    "count_data",
    "count_fragment",
    "fragment",
    "generation_data",
    "generation_fragment",
    "generation_page",
    "ledger_data",
    "ledger_fragment",
    "page",
]
