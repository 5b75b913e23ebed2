"""Counting from shapes alone, where the README's API finds it: `from minitransformer.count import count_passes`.

The verbs live in verbs/count.py; this module only names them at the top of the package, as the public API.
"""

from .verbs.count import Count, Pass, count_generation, count_passes, decode_at, sweep_per_token

__all__ = ["Count", "Pass", "count_generation", "count_passes", "decode_at", "sweep_per_token"]
