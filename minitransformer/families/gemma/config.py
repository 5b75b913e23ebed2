"""The Gemma family's config (Gemma 2, Gemma 3's text model), read from a Hugging Face config.json with transformers'
defaults, and the presets of the published models, from each model's config.json."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...errors import UserError
from .. import rotary
from ..config import (
    FULL,
    SLIDING,
    check_dtype,
    check_model_type,
    check_positive,
    flag,
    rope_dict,
    token_ids,
)
from ..llama.config import CAUSAL_LM_CLASSES, LlamaConfig
from ..rotary import Rope

GEMMA_MODEL_TYPES = ("gemma2", "gemma3_text", "gemma3")

# transformers' defaults (configuration_gemma2.py, configuration_gemma3.py) for what a config.json may leave out:
# the official Gemma 3 configs leave out most of their text model's shapes.
_DEFAULTS: dict[str, dict] = {
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192,
               "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                    "max_position_embeddings": 131072, "final_logit_softcapping": None,
                    "attn_logit_softcapping": None},
}  # fmt: skip


@dataclass(frozen=True)
class GemmaConfig(LlamaConfig):
    """A Gemma 2 or Gemma 3 text decoder (model_type says which).

    Against the Llama block: the embeddings are multiplied by sqrt(D); every RMSNorm scales by (1 + w); a block has
    four norms (before and after attention, before and after the MLP, each output normed before its residual add);
    the scores are scaled by query_pre_attn_scalar^-1/2 and (Gemma 2) soft-capped, c tanh(S / c), before the mask;
    layers alternate a sliding window and full attention (`attention_types`); the logits may be soft-capped.
    Gemma 3 adds an RMSNorm on each head of q and k before RoPE, and a rotary base of its own on the sliding layers
    (local_rope_theta), the rope scaling being the full layers' only.
    """

    hidden_act: str = "gelu_pytorch_tanh"  # transformers' hidden_activation
    query_pre_attn_scalar: float = 256
    attn_logit_softcapping: float | None = None
    final_logit_softcapping: float | None = None
    attention_types: tuple[str, ...] = ()  # each layer's: "sliding_attention" or "full_attention"
    qk_norm: bool = False  # Gemma 3: RMSNorm(1 + w) on each head of q and k
    local_rope_theta: float | None = None  # Gemma 3: the sliding layers' rotary base (None: the same rotary as all)
    local_rope_scaling: tuple[tuple[str, object], ...] | None = None
    model_type: str = "gemma2"
    name: str = field(default="gemma2", compare=False)

    family = "gemma"
    json_keys = LlamaConfig.json_keys | {"hidden_act": "hidden_activation", "attention_types": "layer_types",
                                         "local_rope_theta": "rope_local_base_freq"}  # fmt: skip

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.attention_types) != self.n_layer or not set(self.attention_types) <= {SLIDING, FULL}:
            raise UserError(
                f"config layer_types must name {self.n_layer} layers, each {SLIDING!r} or {FULL!r}, not "
                f"{list(self.attention_types)!r}"
            )
        if SLIDING in self.attention_types and self.sliding_window is None:
            raise UserError("config sliding_window=null, but layer_types has sliding_attention layers")
        if SLIDING not in self.attention_types:  # no layer uses the window: the model has none (reports say so)
            object.__setattr__(self, "sliding_window", None)
        for key in ("query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "local_rope_theta"):
            if getattr(self, key) is not None:
                self.require_positive_number(key)
        if self.local_rope_scaling is not None:
            rotary.check(dict(self.local_rope_scaling))

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.attention_types

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if self.attention_types[layer] == SLIDING else None

    def prefix(self, n_layer: int) -> GemmaConfig:
        return replace(self, n_layer=n_layer, attention_types=self.attention_types[:n_layer])

    def rope(self, layer: int = 0) -> Rope:
        """Gemma 3's sliding layers turn at a base of their own (local_rope_theta), the rope scaling being the full
        layers' only; every other layer at the config's rope."""
        if self.local_rope_theta is None or self.attention_types[layer] != SLIDING:
            return super().rope(layer)
        return Rope(self.d_head, self.local_rope_theta, self.local_rope_scaling, self.n_positions)

    @property
    def checkpoint_kind(self) -> str:
        if self.model_type == "gemma3":
            return "gemma3 model (read as its text model, Gemma3ForCausalLM: model.layers...)"
        return f"{self.model_type} model"

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["layer_types"] = list(d.pop("attention_types"))  # transformers' name, which reports read
        d["local_rope_scaling"] = None if self.local_rope_scaling is None else dict(self.local_rope_scaling)
        return d

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads: Gemma2Config's or Gemma3TextConfig's keys. A gemma3 (multimodal)
        checkpoint's is its text model's, as transformers' Gemma3ForCausalLM reads it (what is counted here)."""
        text = "gemma3_text" if self.model_type == "gemma3" else self.model_type
        hf = super().to_hf_dict()
        hf.pop("hidden_act")
        hf |= {
            "architectures": [CAUSAL_LM_CLASSES[text]],
            "model_type": text,
            "hidden_activation": self.hidden_act,
            "head_dim": self.d_head,
            "query_pre_attn_scalar": self.query_pre_attn_scalar,
            "final_logit_softcapping": self.final_logit_softcapping,
            "sliding_window": self.sliding_window,
            "layer_types": list(self.attention_types),
            "attention_bias": self.qkv_bias,
        }
        if text == "gemma2":
            hf["attn_logit_softcapping"] = self.attn_logit_softcapping
        else:  # Gemma 3: a rope for each layer type, the sliding layers' of their own base
            local = self.local_rope_theta if self.local_rope_theta is not None else self.rope_theta
            local_scaling = self.local_rope_scaling if self.local_rope_theta is not None else self.rope_scaling
            hf["rope_parameters"] = {FULL: hf["rope_parameters"], SLIDING: rope_dict(local, local_scaling)}
        return hf

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "gemma2") -> GemmaConfig:
        """Read a transformers Gemma2Config or Gemma3TextConfig dict (or a Gemma3Config's text_config)."""
        model_type = check_model_type(hf, GEMMA_MODEL_TYPES, f"a Gemma model ({', '.join(GEMMA_MODEL_TYPES)})")
        if model_type == "gemma3":  # Gemma3ForConditionalGeneration: its text model
            text = hf.get("text_config") or {}
            if not isinstance(text, dict):
                raise UserError(f"config text_config must be an object, not {text!r}")
            return replace(cls.from_hf_dict(text | {"model_type": "gemma3_text"}, name), model_type="gemma3")
        defaults = _DEFAULTS[model_type]

        def get(key: str):
            return hf.get(key, defaults[key])

        check_dtype(hf)
        if hf.get("use_bidirectional_attention"):
            raise UserError("config use_bidirectional_attention=true (attention to later tokens) is not supported")
        n_layer = get("num_hidden_layers")
        kinds = hf.get("layer_types")
        if kinds is None:  # transformers' rule: Gemma 2 alternates, Gemma 3 has one full layer in `pattern`
            pattern = 2 if model_type == "gemma2" else hf.get("sliding_window_pattern", 6)
            check_positive("sliding_window_pattern", pattern)
            kinds = _alternating(n_layer, pattern)
        if not isinstance(kinds, (list, tuple)):
            raise UserError(f"config layer_types must be a list, not {kinds!r}")
        full, local = (rotary.read(hf), None) if model_type == "gemma2" else _rope_per_layer_type(hf)
        theta = full.pop("rope_theta")
        for rope in (full, local or {}):
            rotary.refuse_partial({}, rope)
        activation = hf.get("hidden_activation", "gelu_pytorch_tanh")
        if activation is None:
            raise UserError("config hidden_activation=null: a Gemma model names its MLP's activation")
        bias = flag(hf, "attention_bias")
        return cls(
            n_layer=n_layer,
            n_head=get("num_attention_heads"),
            n_embd=get("hidden_size"),
            n_inner=get("intermediate_size"),
            vocab_size=get("vocab_size"),
            n_kv_head=get("num_key_value_heads"),
            head_dim=get("head_dim"),
            n_positions=get("max_position_embeddings"),
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            hidden_act=activation,
            rope_theta=theta,
            rope_scaling=rotary.scaling(full),
            qkv_bias=bias,
            o_bias=bias,
            sliding_window=hf.get("sliding_window", 4096),
            tie_word_embeddings=hf.get("tie_word_embeddings", True),
            bos_token_id=hf.get("bos_token_id", 2),
            eos_token_id=token_ids(hf.get("eos_token_id", 1)),
            query_pre_attn_scalar=hf.get("query_pre_attn_scalar", 256),
            # transformers' Gemma 3 attention never passes attn_logit_softcapping on: it is read as it is, unused
            attn_logit_softcapping=get("attn_logit_softcapping") if model_type == "gemma2" else None,
            final_logit_softcapping=get("final_logit_softcapping"),
            attention_types=tuple(kinds),
            qk_norm=model_type == "gemma3_text",
            local_rope_theta=None if local is None else local.pop("rope_theta"),
            local_rope_scaling=None if local is None else rotary.scaling(local),
            model_type=model_type,
            name=name,
        )


def _rope_per_layer_type(hf: dict) -> tuple[dict, dict]:
    """The full and the sliding layers' rope (each with its rope_theta), as Gemma3TextConfig reads them: transformers
    5's `rope_parameters` per layer type, or the older rope_theta, rope_local_base_freq and rope_scaling (which
    scales the full layers only)."""
    given = hf.get("rope_parameters")
    if given is not None and (not isinstance(given, dict) or not set(given) <= {FULL, SLIDING}):
        raise UserError(
            f"config rope_parameters must hold {FULL!r} and {SLIDING!r} (Gemma 3's rope per layer type), not {given!r}"
        )
    ropes = {kind: dict((given or {}).get(kind) or {"rope_type": "default"}) for kind in (FULL, SLIDING)}
    scaling = hf.get("rope_scaling")
    if scaling is not None:
        if not isinstance(scaling, dict):
            raise UserError(f"config rope_scaling must be an object, not {scaling!r}")
        ropes[FULL].update(scaling)
    ropes[FULL].setdefault("rope_theta", hf.get("rope_theta", 1_000_000.0))
    ropes[SLIDING].setdefault("rope_theta", hf.get("rope_local_base_freq", 10_000.0))
    for rope in ropes.values():
        rope.setdefault("rope_type", rope.pop("type", "default"))
        rope.pop("type", None)
        rotary.check(rope)
    return ropes[FULL], ropes[SLIDING]


def _alternating(n_layer: int, pattern: int) -> tuple[str, ...]:
    """transformers' layer types where a config gives none: every `pattern`-th layer full, the others sliding."""
    return tuple(SLIDING if (i + 1) % pattern else FULL for i in range(n_layer))


def _linear(factor: float) -> tuple[tuple[str, object], ...]:
    return (("factor", factor), ("rope_type", "linear"))


# The published models, each from its config.json on the Hugging Face Hub (google/<name>).
PRESETS: dict[str, GemmaConfig] = {
    # google/gemma-2-2b: 2,614,341,888 parameters
    "gemma-2-2b": GemmaConfig(
        n_layer=26, n_head=8, n_kv_head=4, head_dim=256, n_embd=2304, n_inner=9216, vocab_size=256000,
        n_positions=8192, query_pre_attn_scalar=256, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
        sliding_window=4096, attention_types=_alternating(26, 2), tie_word_embeddings=True, bos_token_id=2,
        eos_token_id=1, name="gemma-2-2b",
    ),
    # google/gemma-2-9b
    "gemma-2-9b": GemmaConfig(
        n_layer=42, n_head=16, n_kv_head=8, head_dim=256, n_embd=3584, n_inner=14336, vocab_size=256000,
        n_positions=8192, query_pre_attn_scalar=256, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
        sliding_window=4096, attention_types=_alternating(42, 2), tie_word_embeddings=True, bos_token_id=2,
        eos_token_id=1, name="gemma-2-9b",
    ),
    # google/gemma-3-1b-pt (gemma3_text)
    "gemma-3-1b": GemmaConfig(
        n_layer=26, n_head=4, n_kv_head=1, head_dim=256, n_embd=1152, n_inner=6912, vocab_size=262144,
        n_positions=32768, query_pre_attn_scalar=256, sliding_window=512, attention_types=_alternating(26, 6),
        rope_theta=1_000_000.0, local_rope_theta=10_000.0, qk_norm=True, tie_word_embeddings=True,
        bos_token_id=2, eos_token_id=1, model_type="gemma3_text", name="gemma-3-1b",
    ),
    # google/gemma-3-4b-pt (gemma3): its text model only (text_config, transformers' defaults where it says
    # nothing); the SigLIP vision tower and the projector are not counted
    "gemma-3-4b": GemmaConfig(
        n_layer=34, n_head=8, n_kv_head=4, head_dim=256, n_embd=2560, n_inner=10240, vocab_size=262208,
        n_positions=131072, query_pre_attn_scalar=256, sliding_window=1024, attention_types=_alternating(34, 6),
        rope_theta=1_000_000.0, rope_scaling=_linear(8.0), local_rope_theta=10_000.0, qk_norm=True,
        tie_word_embeddings=True, bos_token_id=2, eos_token_id=1, model_type="gemma3", name="gemma-3-4b",
    ),
}  # fmt: skip
