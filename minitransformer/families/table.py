"""The one table of families: every question the rest of the code asks of a family is answered here.

A config names its family (`config.family`), a config.json its model_type; each leads to the family's
`Architecture` record (architecture.py), or to a UserError that lists what is supported. Nothing outside
this table compares a family's name (a test holds that).
"""

from __future__ import annotations

from ..errors import UserError
from .architecture import Architecture
from .bamba.family import ARCHITECTURE as BAMBA
from .cohere2.family import ARCHITECTURE as COHERE2
from .config import ModelConfig, shape_defaults
from .deepseek_v3.family import ARCHITECTURE as DEEPSEEK_V3
from .deepseek_v4.family import ARCHITECTURE as DEEPSEEK_V4
from .deepseek_v32.family import ARCHITECTURE as DEEPSEEK_V32
from .ernie4_5.family import ARCHITECTURE as ERNIE4_5
from .ernie4_5_moe.family import ARCHITECTURE as ERNIE4_5_MOE
from .exaone4.family import ARCHITECTURE as EXAONE4
from .falcon_h1.family import ARCHITECTURE as FALCON_H1
from .falcon_mamba.family import ARCHITECTURE as FALCON_MAMBA
from .gemma.family import ARCHITECTURE as GEMMA
from .gemma4.family import ARCHITECTURE as GEMMA4
from .glm4.family import ARCHITECTURE as GLM4
from .glm4_moe.family import ARCHITECTURE as GLM4_MOE
from .glm4_moe_lite.family import ARCHITECTURE as GLM4_MOE_LITE
from .glm_moe_dsa.family import ARCHITECTURE as GLM_MOE_DSA
from .gpt2.family import ARCHITECTURE as GPT2
from .gpt_oss.family import ARCHITECTURE as GPT_OSS
from .granitemoehybrid.family import ARCHITECTURE as GRANITEMOEHYBRID
from .jamba.family import ARCHITECTURE as JAMBA
from .keys import ConfigJson
from .kimi_linear.family import ARCHITECTURE as KIMI_LINEAR
from .lfm2.family import ARCHITECTURE as LFM2
from .lfm2_moe.family import ARCHITECTURE as LFM2_MOE
from .llama.family import ARCHITECTURE as LLAMA
from .llama4_text.family import ARCHITECTURE as LLAMA4_TEXT
from .mamba.family import ARCHITECTURE as MAMBA
from .mamba2.family import ARCHITECTURE as MAMBA2
from .minimax.family import ARCHITECTURE as MINIMAX
from .minimax_m2.family import ARCHITECTURE as MINIMAX_M2
from .mixtral.family import ARCHITECTURE as MIXTRAL
from .nemotron_h.family import ARCHITECTURE as NEMOTRON_H
from .neox.family import ARCHITECTURE as NEOX
from .olmo2.family import ARCHITECTURE as OLMO2
from .olmo3.family import ARCHITECTURE as OLMO3
from .phi3.family import ARCHITECTURE as PHI3
from .qwen3.family import ARCHITECTURE as QWEN3
from .qwen3_next.family import ARCHITECTURE as QWEN3_NEXT
from .qwen3moe.family import ARCHITECTURE as QWEN3_MOE
from .qwen35.family import ARCHITECTURE as QWEN3_5
from .seed_oss.family import ARCHITECTURE as SEED_OSS
from .smollm3.family import ARCHITECTURE as SMOLLM3

ARCHITECTURES: dict[str, Architecture] = {}
PRESETS: dict[str, ModelConfig] = {}  # every family's presets, by name


def register(architecture: Architecture) -> Architecture:
    """Add a family to the table (the built-in ones below; a test adds a made-up one and takes it off again)."""
    taken = [t for t in architecture.model_types if any(t in a.model_types for a in ARCHITECTURES.values())]
    if architecture.name in ARCHITECTURES or taken:
        raise ValueError(
            f"family {architecture.name!r} (model types {', '.join(architecture.model_types)}) is already in the table"
        )
    ARCHITECTURES[architecture.name] = architecture
    PRESETS.update(architecture.presets)
    return architecture


def unregister(name: str) -> None:
    architecture = ARCHITECTURES.pop(name)
    for preset in architecture.presets:
        PRESETS.pop(preset, None)


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
    for architecture in ARCHITECTURES.values():
        if model_type in architecture.model_types:
            read = ConfigJson(hf)
            return architecture.config.from_hf_dict(read, name=name), shape_defaults(read)
    raise UserError(f"config model_type={model_type!r} is not supported (supported: {', '.join(model_types())})")


for _family in (
    GPT2,
    LLAMA,
    QWEN3,
    GEMMA,
    OLMO2,
    OLMO3,
    SMOLLM3,
    GLM4,
    ERNIE4_5,
    COHERE2,
    SEED_OSS,
    EXAONE4,
    NEOX,
    PHI3,
    MIXTRAL,
    QWEN3_MOE,
    ERNIE4_5_MOE,
    GPT_OSS,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    DEEPSEEK_V4,
    QWEN3_5,
    MAMBA2,
    NEMOTRON_H,
    LFM2,
    LFM2_MOE,
    QWEN3_NEXT,
    MINIMAX_M2,
    GLM4_MOE,
    GLM4_MOE_LITE,
    GLM_MOE_DSA,
    BAMBA,
    GRANITEMOEHYBRID,
    FALCON_H1,
    MAMBA,
    FALCON_MAMBA,
    JAMBA,
    LLAMA4_TEXT,
    KIMI_LINEAR,
    GEMMA4,
    MINIMAX,
):
    register(_family)

# Every config.json key that sets a model's shapes in some family (each family's declaration says which of its keys do).
SHAPE_KEYS = frozenset().union(*(architecture.config.shape_keys() for architecture in ARCHITECTURES.values()))
