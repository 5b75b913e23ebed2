"""A model's config.json, read into the config of the family its model_type names (families/table.py).

`DTYPES` are what a forward pass computes in.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from ..families.config import ModelConfig, read_config_json
from ..families.table import config_from_hf_dict

# What a forward pass computes in: float32 (the default), or float64, the reference that tells how far a
# float32 pass is from the exact answer (load_model(..., dtype="float64"); --dtype on generate, trace, validate).
DTYPES = ("float32", "float64")


def load_config(path: Path, name: str | None = None) -> ModelConfig:
    """A config.json of any supported family."""
    hf = read_config_json(path)
    try:
        return config_from_hf_dict(hf, name=name or Path(path).parent.name)
    except TypeError as err:
        raise UserError(f"{path}: {err}") from None
