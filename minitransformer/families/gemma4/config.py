"""Gemma 4's text model's config (transformers' Gemma4TextConfig, model_type gemma4_text; Gemma4ForCausalLM): each field
under its config.json key with transformers' defaults, and the presets of the published models, from each model's
config.json."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ...engine.kvcache import KeysValues
from ...errors import UserError
from ..config import FULL, SLIDING, check_windows, slides
from ..keys import (
    ACTIVATION,
    COUNT,
    FLAG,
    LAYER_COUNT,
    POSITIVE_NUMBER,
    SIZE,
    TOKENS,
    WINDOW,
    Key,
    Refusal,
    key,
    layer_kinds,
    take,
)
from ..llama.config import LlamaConfig, preset
from ..rotary import Rope, RopePerLayerType, local_rope

GEMMA4 = "gemma4_text"
SHARED = "_shared"  # the kinds of layer that read an earlier layer's keys and values: sliding_attention_shared, ...
SHARED_LAYERS = Key("num_kv_shared_layers", 0, COUNT)
LAYER_TYPES = Key("layer_types", None, layer_kinds(FULL, SLIDING).or_null())
KINDS = layer_kinds(FULL, SLIDING, FULL + SHARED, SLIDING + SHARED)
PROPORTIONAL = (("partial_rotary_factor", 0.25), ("rope_theta", 1_000_000.0), ("rope_type", "proportional"))


def kinds(hf: dict, values: dict) -> list[str]:
    """Each layer's kind: the file's layer_types (or Gemma4TextConfig's: five sliding to one full), the last layer full
    as transformers forces it, and the last num_kv_shared_layers of them marked as reading an earlier layer's keys and
    values."""
    n, shared = values["n_layer"], SHARED_LAYERS.get(hf)
    attention = list(LAYER_TYPES.get(hf) or [SLIDING if (i + 1) % 6 else FULL for i in range(n)])[:n]
    if len(attention) < n:
        raise UserError(f"config layer_types must name {n} layers (num_hidden_layers), not {len(attention)}")
    attention[-1] = FULL  # Gemma4TextConfig: "Last layer must use `full_attention`"
    if shared > n:
        raise UserError(f"config num_kv_shared_layers={shared} exceeds num_hidden_layers={n}")
    return [kind + (SHARED if i >= n - shared else "") for i, kind in enumerate(attention)]


def overrides(hf: dict, values: dict) -> dict | None:
    """The full layers' sizes as transformers 5.24 writes them (per_layer_config: {layer: {"head_dim": ...,
    "num_key_value_heads": ...}} for each full layer, in place of global_head_dim and num_global_key_value_heads;
    an override equal to the layers' own size is left out, and so is a layer left none: {} where the full layers'
    heads are the sliding ones'), None where the file has none; refused where it sizes other layers or other keys,
    the full layers unlike, or their key and value heads where attention_k_eq_v is false (transformers writes them
    only where it is true)."""
    given = hf.get("per_layer_config")
    if given is None:
        return None
    full = {i for i, kind in enumerate(kinds(hf, values)) if base(kind) == FULL}
    entries = list(given.values()) if isinstance(given, dict) else [None]
    first = entries[0] if entries else {}
    if (
        (isinstance(given, dict) and given and {_layer(key) for key in given} != full)
        or any(not isinstance(e, dict) or not set(e) <= {"head_dim", "num_key_value_heads"} for e in entries)
        or any(e != first for e in entries)
        or ("num_key_value_heads" in (first or {}) and not hf.get("attention_k_eq_v", False))
    ):
        raise UserError(
            "config per_layer_config is supported only as transformers writes Gemma 4's: the same head_dim (and, "
            "where attention_k_eq_v, num_key_value_heads) for every full_attention layer, or none"
        )
    return dict(first or {})


def _layer(key) -> int | None:
    """A per_layer_config key's layer: transformers writes "04" (the layer's number, padded), Python's dict 4."""
    try:
        return int(key)
    except (TypeError, ValueError):
        return None


def global_head_dim(hf: dict, values: dict) -> int:
    """global_head_dim (the published files' key), or the full layers' head_dim in per_layer_config, where the file
    has one: there the sliding layers' head_dim unless it says another (transformers then reads no global_head_dim)."""
    given = overrides(hf, values)
    if given is not None:
        return given.get("head_dim", values["head_dim"] or values["n_embd"] // values["n_head"])
    if "global_head_dim" not in hf:
        take(hf, "global_head_dim", 512, shape=True)
    return hf.get("global_head_dim", 512)


def global_kv_heads(hf: dict, values: dict) -> int | None:
    """num_global_key_value_heads (the published files' key; read where attention_k_eq_v), or the full layers'
    num_key_value_heads in per_layer_config, where the file has one (None there without it: num_key_value_heads)."""
    given = overrides(hf, values)
    return hf.get("num_global_key_value_heads") if given is None else given.get("num_key_value_heads")


def if_moe(json: str):
    """A key of the experts, read where enable_moe_block says the layers have them (None where not: transformers reads
    it then not at all); refused where they have them and the file leaves it out (transformers fails on it)."""

    def read(hf: dict, values: dict) -> int | None:
        if not values["moe"]:
            return None
        if hf.get(json) is None:
            raise UserError(f"config enable_moe_block is true but {json} is missing")
        return hf[json]

    return read


def written(c: Gemma4TextConfig) -> dict:
    return {"layer_types": [base(kind) for kind in c.layer_types], "num_kv_shared_layers": c.n_shared}


def base(kind: str) -> str:
    """A kind of layer without its sharing: the attention it computes."""
    return kind.removesuffix(SHARED)


@dataclass(frozen=True)
class Gemma4TextConfig(LlamaConfig):
    """A Gemma 4 text decoder. Against Gemma 3: the full layers' heads are wider (global_head_dim) and, where
    attention_k_eq_v, fewer (num_global_key_value_heads), their values the keys' projection (no W_v); q, k and v are
    RMS-normed per head (v without gains), the scores not scaled; the full layers turn a share of each head
    (proportional RoPE); the last num_kv_shared_layers layers read the keys and values of the last earlier layer of
    their kind (and, where use_double_wide_mlp, have an MLP twice as wide); every layer adds a per-layer input (a
    table of hidden_size_per_layer_input numbers per layer and token, with a projection of the embedding) and ends
    scaled by its layer_scalar."""

    n_layer: int = key("num_hidden_layers", 30, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 8, SIZE)
    n_embd: int = key("hidden_size", 2304, SIZE)
    n_inner: int = key("intermediate_size", 9216, SIZE)
    vocab_size: int = key("vocab_size", 262_144, SIZE)
    n_kv_head: int = key("num_key_value_heads", 4, SIZE)
    head_dim: int | None = key("head_dim", 256, SIZE)
    global_head_dim: int = key("global_head_dim", 512, SIZE, read=global_head_dim)
    n_global_kv_head: int | None = key("num_global_key_value_heads", None, SIZE.or_null(), read=global_kv_heads)
    k_eq_v: bool = key("attention_k_eq_v", False, FLAG)
    n_positions: int = key("max_position_embeddings", 131_072, SIZE)
    hidden_act: str = key("hidden_activation", "gelu_pytorch_tanh", ACTIVATION)
    qkv_bias: bool = key("attention_bias", False, FLAG)
    o_bias: bool = key("attention_bias", False, FLAG)
    sliding_window: int | None = key("sliding_window", 512, WINDOW)
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 2, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    final_logit_softcapping: float | None = key("final_logit_softcapping", None, POSITIVE_NUMBER.or_null())
    per_layer_width: int | None = key("hidden_size_per_layer_input", 256, COUNT.or_null())  # 0 or null: none
    per_layer_vocab: int = key("vocab_size_per_layer_input", 262_144, SIZE)
    double_wide_mlp: bool = key("use_double_wide_mlp", False, FLAG)
    # the 26B-A4B's experts beside the dense MLP in every layer
    moe: bool = key("enable_moe_block", False, FLAG)
    n_experts: int | None = key("num_experts", None, SIZE.or_null(), read=if_moe("num_experts"))
    top_k: int | None = key("top_k_experts", None, SIZE.or_null(), read=if_moe("top_k_experts"))
    moe_width: int | None = key("moe_intermediate_size", None, SIZE.or_null(), read=if_moe("moe_intermediate_size"))
    layer_types: tuple[str, ...] = key(
        "layer_types", None, KINDS, read=kinds, rule=kinds, reads=(SHARED_LAYERS, LAYER_TYPES), write=written
    )
    local_rope_theta: float | None = 10_000.0  # the sliding layers' rotary base
    local_rope_scaling: tuple[tuple[str, object], ...] | None = None
    rope_theta: float = 1_000_000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = (
        ("partial_rotary_factor", 0.25),
        ("rope_type", "proportional"),
    )
    # the layers the per-layer inputs are made for, where not n_layer: a model cut to its first layers (prefix:
    # count's twin) still makes the whole model's, as its one product is the whole model's
    ple_layers: int = 0
    model_type: str = GEMMA4

    family = "gemma4"
    what = "a Gemma 4 model"
    classes = {GEMMA4: "Gemma4ForCausalLM"}
    multimodal = {"gemma4": GEMMA4}  # Gemma4ForConditionalGeneration: read as its text model
    groups = (RopePerLayerType(1_000_000.0, 10_000.0, kinds=("default", "proportional"), full_default=PROPORTIONAL),)
    # "vision": an image's tokens attend to each other both ways, text causally; the published 26B-A4B and 31B set
    # it, and a text-only run (transformers' too: create_masks_for_generate without mm_token_type_ids) is causal
    refusals = (
        Refusal(
            "use_bidirectional_attention",
            "(attention to later tokens) is not supported",
            refused=lambda value, hf: value not in (None, False, "vision"),
        ),
    )
    dict_last = ("d_head", "d_ff", "layer_types", "kv_sources")

    def validate(self) -> None:
        check_windows(self)
        super().validate()
        if self.moe and (self.n_experts is None or self.top_k is None or self.moe_width is None):
            raise UserError(
                "config enable_moe_block is true: num_experts, top_k_experts and moe_intermediate_size needed"
            )
        if self.moe and self.top_k > self.n_experts:  # type: ignore[operator]
            raise UserError(f"config top_k_experts={self.top_k} exceeds num_experts={self.n_experts}")
        if self.per_layer_width and self.per_layer_vocab < self.vocab_size:  # transformers fails on a token past it
            raise UserError(
                f"config vocab_size_per_layer_input={self.per_layer_vocab} is below vocab_size={self.vocab_size}: "
                "the per-layer inputs have no row for the tokens past it"
            )
        if self.global_head_dim % 2:
            raise UserError(f"config global_head_dim={self.global_head_dim} is odd; rotary embeddings rotate pairs")
        for i, kind in enumerate(self.layer_types):
            if kind.endswith(SHARED) and self.kv_source(i) is None:
                raise UserError(
                    f"config num_kv_shared_layers={self.n_shared} leaves no earlier {base(kind)} layer whose keys "
                    f"and values layer {i} could read"
                )

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """Fe, an expert's width (moe_intermediate_size), beside the dense MLP's F."""
        return super().symbol_sizes | ({"Fe": self.moe_width} if self.moe_width else {})

    @property
    def n_shared(self) -> int:
        """The layers that read an earlier layer's keys and values (num_kv_shared_layers)."""
        return sum(kind.endswith(SHARED) for kind in self.layer_types)

    def kv_source(self, layer: int) -> int | None:
        """The layer whose keys and values `layer` attends to where it computes none (the last earlier layer of its
        kind that computes its own, as transformers' kv_sharing_modes picks it); None where it computes its own."""
        kind = self.layer_types[layer]
        if not kind.endswith(SHARED):
            return None
        own = [i for i in range(layer) if self.layer_types[i] == base(kind)]
        return own[-1] if own else None

    def prefix(self, n_layer: int) -> Gemma4TextConfig:
        return replace(super().prefix(n_layer), ple_layers=self.per_layer_layers)

    @property
    def per_layer_layers(self) -> int:
        """The layers of the per-layer inputs' table and projection: the whole model's."""
        return self.ple_layers or self.n_layer

    @property
    def kv_sources(self) -> list[int | None]:
        """Each layer's kv_source: whose keys and values it attends to (None: its own)."""
        return [self.kv_source(i) for i in range(self.n_layer)]

    def at_layer(self, layer: int) -> Gemma4TextConfig:
        """The config as layer `layer` sees it: its heads' width and key/value heads (a full layer's global ones), its
        MLP's width (doubled on a shared layer where use_double_wide_mlp)."""
        return _at_layer(self, self.layer_types[layer])

    def layer_cache(self, layer: int) -> KeysValues:
        c = self.at_layer(layer)
        return KeysValues(c.n_kv_head, c.d_head, window=self.layer_window(layer), reads=self.kv_source(layer))

    def rope(self, layer: int = 0) -> Rope | None:
        """The sliding layers at their own base over the head (local_rope_theta), the full ones at the config's rope
        over their own, wider heads (global_head_dim: proportional, a share of it turned)."""
        if slides(self.layer_types[layer]):
            return local_rope(self, layer)
        return Rope(self.global_head_dim, self.rope_theta, self.rope_scaling, self.n_positions)

    @property
    def checkpoint_kind(self) -> str:
        if self.model_type == "gemma4":
            return "gemma4 model (read as its text model, Gemma4ForCausalLM: model.layers...)"
        return f"{self.model_type} model"


@lru_cache(maxsize=256)
def _at_layer(config: Gemma4TextConfig, kind: str) -> Gemma4TextConfig:
    sizes: dict[str, Any] = {}
    if not slides(kind):
        sizes["head_dim"] = config.global_head_dim
        if config.k_eq_v and config.n_global_kv_head is not None:
            sizes["n_kv_head"] = config.n_global_kv_head
    if kind.endswith(SHARED) and config.double_wide_mlp:
        sizes["n_inner"] = 2 * config.n_inner
    return replace(config, **sizes) if sizes else config


def pattern(n_layer: int, period: int, shared: int) -> tuple[str, ...]:
    """Layer kinds: every period-th layer full, the others sliding, the last `shared` reading earlier ones'."""
    kinds = [SLIDING if (i + 1) % period else FULL for i in range(n_layer)]
    return tuple(kind + (SHARED if i >= n_layer - shared else "") for i, kind in enumerate(kinds))


# The published models' text_config (google/gemma-4-<name>, April 2026), as GitHub copies of their config.json give it
# (the Hub is out of reach): each one's layers, heads, key/value heads, width, MLP width, vocabulary (262,144 in all,
# the per-layer table's too), context, window, the full layers' heads (512 wide in all) and what else it sets. Every
# one has the rope transformers writes by default (sliding layers at 10,000; full layers proportional, a quarter of
# their pairs at 1,000,000), the final soft-cap of 30, tied embeddings.
# E2B: a Rust loader's test_parse_gemma4_e2b_config (the whole config.json): 35 layers, 4 sliding then 1 full, the
#   last 20 sharing keys and values, their MLP twice as wide (use_double_wide_mlp), one key/value head.
# E4B: a Go TestParseTextConfigE4B and NVIDIA-NeMo/Megatron-Bridge's test of its gemma4_e4b recipe ("mirrors
#   google/gemma-4-E4B-it"): 42 layers, 5 sliding then 1 full, the last 18 sharing, per-layer inputs of 256.
# 26B-A4B: a Swift test's config "trimmed from mlx-community/gemma-4-26b-a4b-it-4bit" (keys verbatim) and a model
#   card's config.json: 30 layers, 5 to 1, a window of 1,024, K = V with 2 key/value heads on the full layers (8 on the
#   sliding ones), 8 of 128 experts of 704 beside a dense MLP of 2,112 in every layer, no sharing, no per-layer inputs.
# 31B: a 31B adapter's fixture ("text_config values as observed 2026-04-20"): 60 layers, 5 to 1, a window of 1,024,
#   K = V on the full layers with 4 key/value heads there (16 on the sliding ones), no sharing, no per-layer inputs.
GEMMA_4: dict[str, Any] = {"final_logit_softcapping": 30.0, "global_head_dim": 512, "per_layer_vocab": 262_144}
K_EQ_V = {"k_eq_v": True, "per_layer_width": 0}
A4B = K_EQ_V | {"n_global_kv_head": 2, "moe": True, "n_experts": 128, "top_k": 8, "moe_width": 704}


def gemma4(name: str, L: int, H: int, Hkv: int, D: int, F: int, P: int, W: int, period: int, shared: int, more: dict):
    kinds = pattern(L, period, shared)
    return preset(
        Gemma4TextConfig, name, L, H, Hkv, D, F, 262_144, P, sliding_window=W, layer_types=kinds, **GEMMA_4 | more
    )


PRESETS: dict[str, Gemma4TextConfig] = {
    row[0]: gemma4(*row)
    for row in (
        ("gemma-4-e2b", 35, 8, 1, 1536, 6144, 131_072, 512, 5, 20, {"double_wide_mlp": True}),
        ("gemma-4-e4b", 42, 8, 2, 2560, 10240, 131_072, 512, 6, 18, {}),
        ("gemma-4-26b-a4b", 30, 16, 8, 2816, 2112, 262_144, 1024, 6, 0, A4B),
        ("gemma-4-31b", 60, 32, 16, 5376, 21504, 262_144, 1024, 6, 0, K_EQ_V | {"n_global_kv_head": 4}),
    )
}
