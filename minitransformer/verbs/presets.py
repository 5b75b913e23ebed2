"""The presets of every family, as `config` shows them: a line each, and the config.json transformers reads for one
(each family's config writes it back: config.to_hf_dict())."""

from __future__ import annotations

import json

from ..errors import UserError
from ..families.table import PRESETS, architecture_of
from ..text import human


def preset_lines() -> list[str]:
    """Every preset, a line each, its name first: its family and model_type, layers, width, parameters."""
    rows = []
    for name, config in PRESETS.items():
        formulas = architecture_of(config).formulas  # the closed forms: a 397B model's 90,000 tensors are not listed
        total = formulas.parameters(config)
        active = formulas.active_parameters(config)
        also = f", {human(active)} active" if active != total else ""
        rows.append(
            (
                name,
                f"{architecture_of(config).name} ({config.to_hf_dict()['model_type']})",
                f"{config.n_layer} layers, d_model {config.n_embd:,}, {human(total)} parameters{also}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(2)]
    return [f"{name:<{widths[0]}}  {family:<{widths[1]}}  {shape}" for name, family, shape in rows]


def preset_config_json(name: str) -> str:
    """The config.json (as transformers reads it) of a preset, refused by name if there is no such preset."""
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; `minitransformer config --list` lists them")
    return json.dumps(PRESETS[name].to_hf_dict(), indent=2) + "\n"
