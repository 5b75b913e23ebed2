"""The one table of families: every question the rest of the code asks of a family is answered here.

A config names its family (`config.family`), a config.json its model_type; each leads to the family's
`Architecture` record (architecture.py), or to a UserError that lists what is supported. Nothing outside
this table compares a family's name (a test holds that).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TypeVar

from ..errors import UserError
from .architecture import Architecture
from .config import ModelConfig, shape_defaults
from .keys import ConfigJson

# The built-in families, in the table's order (its lists and messages name them in it): each the package here whose
# family.py holds its ARCHITECTURE. A family's modules are imported when the table is first asked for something it
# holds: a name it has not yet loads the next family until one answers; a list of them all loads them all. So a
# command that runs GPT-2 loads GPT-2's family alone, one that runs a Llama two: `count --preset gpt2` took 0.37 s
# from the shell where it took 0.64 with every family imported with the package (the median of 10 in turn, Zen 4).
BUILT_IN = (
    "gpt2", "llama", "qwen3", "gemma", "olmo2", "olmo3", "smollm3", "glm4", "ernie4_5", "cohere2", "seed_oss",
    "exaone4", "neox", "phi3", "mixtral", "qwen3moe", "ernie4_5_moe", "gpt_oss", "deepseek_v3", "deepseek_v32",
    "deepseek_v4", "qwen35", "mamba2", "nemotron_h", "lfm2", "lfm2_moe", "qwen3_next", "minimax_m2", "glm4_moe",
    "glm4_moe_lite", "glm_moe_dsa", "bamba", "granitemoehybrid", "falcon_h1", "mamba", "falcon_mamba", "jamba",
    "llama4_text", "kimi_linear", "gemma4", "minimax",
)  # fmt: skip
_unloaded = list(BUILT_IN)
_loading = threading.RLock()  # one thread loads a family at a time (a product's workers never ask the table)

V = TypeVar("V")


class _Table(Mapping[str, V]):
    """A dict of the table (families by name, presets by name) that loads the built-in families as it is read."""

    def __init__(self) -> None:
        self.held: dict[str, V] = {}

    def __getitem__(self, name: str) -> V:
        while name not in self.held and _load_next():
            pass
        return self.held[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __reversed__(self) -> Iterator[str]:
        _load_all()
        return reversed(self.held)

    def __len__(self) -> int:
        return len(self.keys())

    # the dict's own views once every family is loaded (reversible, as a dict's)
    def keys(self) -> KeysView[str]:
        _load_all()
        return self.held.keys()

    def values(self) -> ValuesView[V]:
        _load_all()
        return self.held.values()

    def items(self) -> ItemsView[str, V]:
        _load_all()
        return self.held.items()

    def __repr__(self) -> str:
        return repr(dict(self.items()))


ARCHITECTURES: _Table[Architecture] = _Table()
PRESETS: _Table[ModelConfig] = _Table()  # every family's presets, by name


def _load_next() -> bool:
    """Import the next built-in family and add it to the table; False when none is left."""
    with _loading:
        if not _unloaded:
            return False
        package = _unloaded[0]
        _add(importlib.import_module(f"{__package__}.{package}.family").ARCHITECTURE)
        _unloaded.remove(package)
        return True


def _load_all() -> None:
    while _load_next():
        pass


def _first(holds: Callable[[Architecture], bool]) -> Architecture | None:
    """The first family in the table's order that `holds`, loading the built-in ones only as far as that one."""
    while True:
        found = next((a for a in list(ARCHITECTURES.held.values()) if holds(a)), None)
        if found is not None or not _load_next():
            return found


def register(architecture: Architecture) -> Architecture:
    """Add a family to the table after the built-in ones (a test adds a made-up one and takes it off again)."""
    _load_all()
    return _add(architecture)


def _add(architecture: Architecture) -> Architecture:
    families = ARCHITECTURES.held
    taken = [t for t in architecture.model_types if any(t in a.model_types for a in families.values())]
    if architecture.name in families or taken:
        raise ValueError(
            f"family {architecture.name!r} (model types {', '.join(architecture.model_types)}) is already in the table"
        )
    families[architecture.name] = architecture
    PRESETS.held.update(architecture.presets)
    return architecture


def unregister(name: str) -> None:
    architecture = ARCHITECTURES.held.pop(name)
    for preset in architecture.presets:
        PRESETS.held.pop(preset, None)


def architecture_of(config) -> Architecture:
    """The family of a config (or of a config's JSON dict, as a ledger keeps it)."""
    name = config["family"] if isinstance(config, dict) else config.family
    if name not in ARCHITECTURES:
        raise UserError(f"no family {name!r} in the table (families: {', '.join(ARCHITECTURES)})")
    return ARCHITECTURES[name]


def model_types() -> list[str]:
    return [t for a in ARCHITECTURES.values() for t in a.model_types]


def config_from_hf_dict(hf: dict, name: str) -> ModelConfig:
    """The config of whichever family `model_type` names (GPT-2 when it is absent, as in old checkpoints)."""
    return read_config(hf, name)[0]


def read_config(hf: dict, name: str) -> tuple[ModelConfig, dict]:
    """The config of whichever family `model_type` names, and the keys that change its shapes which the file left
    out and the family took transformers' default for, with each default (families/config.py's shape_defaults)."""
    model_type = hf.get("model_type", "gpt2")
    named = hf.get("architectures")
    if "model_type" not in hf and isinstance(named, list) and named and not any("GPT2" in str(a) for a in named):
        raise UserError(  # an old GPT-2 file names no model type; another model's does not read as GPT-2
            f"config.json has no model_type, and its architectures ({', '.join(map(str, named))}) are not GPT-2's: "
            f'add the model type (e.g. "model_type": "llama"), as transformers\' AutoConfig needs it'
        )
    architecture = _first(lambda a: model_type in a.model_types)
    if architecture is not None:
        read = ConfigJson(hf)
        return architecture.config.from_hf_dict(read, name=name), shape_defaults(read)
    raise UserError(f"config model_type={model_type!r} is not supported (supported: {', '.join(model_types())})")
