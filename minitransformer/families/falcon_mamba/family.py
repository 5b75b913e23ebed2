"""Falcon-Mamba (transformers' FalconMambaForCausalLM) as its difference from Mamba: the same layers, and in each
mixer RMSNorms without weights on dt, B and C after x_proj (their epsilon mixer_rms_eps), which
families/parts/mamba1.py computes where the config's bcdt_norm_eps is a number. Its config and preset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..keys import POSITIVE_NUMBER, key
from ..mamba import reference
from ..mamba.config import MambaConfig
from ..mamba.family import MAMBA, MambaFormulas
from ..mamba2.family import scan_family


@dataclass(frozen=True)
class FalconMambaConfig(MambaConfig):
    """Mamba's config (FalconMambaConfig's defaults are MambaConfig's) and mixer_rms_eps, the epsilon of the norms of
    dt, B and C."""

    mixer_rms_eps: float = key("mixer_rms_eps", 1e-6, POSITIVE_NUMBER, dict_key="mixer_rms_eps")
    model_type: str = "falcon_mamba"

    what = "a Falcon-Mamba"
    classes = {"falcon_mamba": "FalconMambaForCausalLM"}
    checkpoint_kind = "Falcon-Mamba model"

    @property
    def bcdt_norm_eps(self) -> float | None:
        return self.mixer_rms_eps


class FalconMambaFormulas(MambaFormulas):
    words = ("Falcon-Mamba",)


# tiiuae/falcon-mamba-7b's config.json (as danielgonzagat/penin-monorepo keeps it, SYSTEM/opt/llm_base/
# falcon-mamba-7b/config.json, transformers_version 4.43.0.dev0): 64 layers, hidden 4096, intermediate_size 8192 (its
# expand 16 is not what the weights have: transformers reads intermediate_size first), state 16, conv kernel 4,
# time_step_rank 256, vocabulary 65,024, no biases but the conv's, layer_norm_epsilon 1e-5, untied, bos 0, eos 11,
# pad 11; no mixer_rms_eps key (FalconMambaConfig's default, 1e-6).
SEVEN_B: dict[str, Any] = dict(n_layer=64, n_embd=4096, vocab_size=65024, expand=16, d_inner=8192, dt_rank=256)
UNTIED: dict[str, Any] = dict(tie_word_embeddings=False, eos_token_id=11, pad_token_id=11)
PRESETS = {"falcon-mamba-7b": FalconMambaConfig(**SEVEN_B, **UNTIED, name="falcon-mamba-7b")}
ARCHITECTURE = scan_family(
    "falcon_mamba", MAMBA, FalconMambaFormulas, reference, FalconMambaConfig, PRESETS, "Falcon-Mamba"
)
