"""A model's config.json, read into the config of the family its model_type names (families/table.py)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UserError, note
from ..families.config import ModelConfig, read_config_json
from ..families.table import read_config
from ..text import short_path

# The defaults already said in this process, by config.json and key: a command that loads a model twice (validate's
# float64 reference) says each once.
_SAID: set[tuple[str, str]] = set()


def load_config(path: Path, name: str | None = None) -> ModelConfig:
    """A config.json of any supported family. Where the file leaves out a key that changes the model's shapes and its
    family takes transformers' default for it, a note on stderr says which and what was taken, a line each."""
    hf = read_config_json(path)
    try:
        config, defaults = read_config(hf, name=name or Path(path).parent.name)
    except TypeError as err:
        raise UserError(f"{path}: {err}") from None
    where = str(Path(path).resolve())
    for key, value in defaults.items():
        if (where, key) not in _SAID:
            _SAID.add((where, key))
            note(
                f"minitransformer: note: {short_path(str(path))} has no {key}: transformers' default for "
                f"{hf.get('model_type', 'gpt2')}, {json.dumps(value)}, taken (it sets the model's shapes)"
            )
    return config
