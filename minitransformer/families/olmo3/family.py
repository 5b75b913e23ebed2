"""OLMo 3 (transformers' Olmo3ForCausalLM): OLMo 2's post-norm block, a sliding window on the layers layer_types names
(three in four by default), and a rope for each kind of layer (published: YaRN on the full layers, the default rope on
the sliding ones)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import FULL, SLIDING, check_windows
from ..gemma.config import periodic
from ..keys import WINDOW, key, layer_kinds
from ..llama.config import preset
from ..llama.reference import llama_like, note
from ..olmo2.config import Olmo2Config
from ..olmo2.family import OLMO2
from ..parts.family import composed
from ..rotary import YARN_ROPE_TYPES, Rope, RopePerLayerType, local_rope, rope_scaling

EVERY_FOURTH_FULL = lambda hf, values: periodic(values["n_layer"], 4)  # noqa: E731 - Olmo3Config's rule


@dataclass(frozen=True)
class Olmo3Config(Olmo2Config):
    """OLMo 2's block; the layers layer_types names sliding_attention see the last sliding_window positions, every
    fourth layer full where the file names none; rope_theta and rope_scaling are the full layers' rope, local_rope_theta
    and local_rope_scaling the sliding layers' (Olmo3Config reads an older file's rope_theta and rope_scaling into the
    full layers' alone: the sliding ones keep the default rope at 500,000)."""

    sliding_window: int | None = key("sliding_window", 4096, WINDOW)
    rope_theta: float = 500000.0
    model_type: str = "olmo3"
    layer_types: tuple[str, ...] = key("layer_types", None, layer_kinds(FULL, SLIDING), rule=EVERY_FOURTH_FULL)
    local_rope_theta: float | None = 500000.0
    local_rope_scaling: tuple[tuple[str, object], ...] | None = None

    what = "an OLMo 3 model"
    classes = {"olmo3": "Olmo3ForCausalLM"}
    groups = (RopePerLayerType(500000.0, 500000.0, kinds=YARN_ROPE_TYPES),)

    def validate(self) -> None:
        check_windows(self)
        super().validate()

    def rope(self, layer: int = 0) -> Rope | None:
        return local_rope(self, layer) or super().rope(layer)


# Olmo-3-7B (allenai/Olmo-3-1025-7B and its post-trained variants): the head of its config.json as an MLX copy of
# allenai/Olmo-3-7B-RLZero-Code keeps it (32 layers of 32 heads, one key/value head each, 4096 wide, MLP 11,008, three
# sliding layers to a full one, 65,536 positions, eos 100257), its tail as tiny-random/olmo-3, a shrunk copy, keeps it
# (vocabulary 100,278, untied, rms_norm_eps 1e-6, window 4,096, rope_theta 500,000 and YaRN x8 over 8,192 positions
# with attention_factor 1.2079441541679836, on the full layers). Olmo-3-32B (allenai/Olmo-3-1125-32B): width, MLP and
# eos from its copies' config.json (dphnAI/32B-fp8, bracket-labs/kaze-small), depth and heads from OLMo-core's
# olmo3_32B (64 layers, 40 heads, 8 key/value heads); its vocabulary, window, context and rope assumed the 7B's.
YARN = rope_scaling(8192, rope_type="yarn", factor=8.0, attention_factor=1.2079441541679836, beta_fast=32, beta_slow=1)
OLMO3 = dict(norm_eps=1e-6, rope_scaling=YARN, eos_token_id=100257)
PRESETS = {
    "olmo-3-7b": preset(Olmo3Config, "olmo-3-7b", 32, 32, 32, 4096, 11008, 100278, 65536, **OLMO3),
    "olmo-3-32b": preset(
        Olmo3Config, "olmo-3-32b", 64, 40, 8, 5120, 27648, 100278, 65536, **OLMO3, bos_token_id=100257
    ),
}
REFERENCE = llama_like(note("OLMo 3"), 4)  # q and k norms beside two
ARCHITECTURE = composed("olmo3", OLMO2, reference=REFERENCE, config=Olmo3Config, presets=PRESETS, label="OLMo 3")
