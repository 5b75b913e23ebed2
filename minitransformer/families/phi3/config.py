"""The Phi-3 family's config, read from a Hugging Face config.json as transformers' Phi3Config reads it, and the
presets of Phi-3 models, from each model's published config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import UserError
from .. import rotary
from ..config import (
    ModelConfig,
    check_activation,
    check_dtype,
    check_model_type,
    check_positive,
    flag,
    listed,
    rope_dict,
    token_ids,
)
from ..llama.config import preset
from ..rotary import Rope

PHI3_MODEL_TYPES = ("phi3",)
ROPE_TYPES = ("default", "longrope")  # as Phi3Config, which reads "yarn" as longrope


@dataclass(frozen=True)
class Phi3Config(ModelConfig):
    """A Phi-3 decoder: the Llama block with q, k and v computed by one fused product (qkv_proj) and the MLP's gate
    and up by another (gate_up_proj); rotary embeddings on the first `partial_rotary_factor` of each head's numbers
    only; LongRoPE (Phi-3-mini-128k, Phi-3.5): per-frequency factors, short or long by the sequence's length, and
    an attention factor on cos and sin; a sliding window where the config sets one; no biases."""

    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int  # intermediate_size: the MLP width (gate_up_proj is twice as wide)
    vocab_size: int
    n_kv_head: int = None  # type: ignore[assignment]  # None: as many as query heads (__post_init__ says so)
    n_positions: int = 4096
    original_max_position_embeddings: int = 4096  # LongRoPE: the context trained before the extension
    rms_norm_eps: float = 1e-5
    hidden_act: str = "silu"
    rope_theta: float = 10000.0
    partial_rotary_factor: float = 1.0  # the share of each head's numbers that RoPE turns (the rest pass)
    # LongRoPE: sorted (key, value) pairs, hashable (short_factor and long_factor as tuples); None: plain RoPE
    rope_scaling: tuple[tuple[str, object], ...] | None = None
    sliding_window: int | None = None  # each query sees only the last `sliding_window` positions (itself included)
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 1
    eos_token_id: int | tuple[int, ...] | None = 32000
    name: str = field(default="phi3", compare=False)

    family = "phi3"

    def __post_init__(self) -> None:
        if self.n_kv_head is None:
            object.__setattr__(self, "n_kv_head", self.n_head)
        self.require_positive("n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "n_kv_head", "n_positions",
                              "original_max_position_embeddings")  # fmt: skip
        if self.n_embd % self.n_head:
            raise UserError(f"config hidden_size={self.n_embd} is not a multiple of num_attention_heads={self.n_head}")
        if self.n_head % self.n_kv_head:
            raise UserError(
                f"config num_attention_heads={self.n_head} is not a multiple of num_key_value_heads={self.n_kv_head}"
            )
        check_activation(self.key("hidden_act"), self.hidden_act)
        self.require_positive_number("rms_norm_eps", "rope_theta", "partial_rotary_factor")
        if self.partial_rotary_factor > 1 or self.rotary_dim % 2 or not self.rotary_dim:
            raise UserError(
                f"config partial_rotary_factor={self.partial_rotary_factor} turns {self.rotary_dim} of "
                f"each head's {self.d_head} numbers; rotary embeddings need an even number, at least 2, "
                f"at most all"
            )
        if self.sliding_window is not None:
            check_positive("sliding_window", self.sliding_window)
        if self.rope_scaling is not None:
            _check_longrope(dict(self.rope_scaling), self.rotary_dim)

    @property
    def model_type(self) -> str:
        """config.json's model_type (the one this family reads), as the reports name a model's family."""
        return "phi3"

    @property
    def checkpoint_kind(self) -> str:
        return "phi3 model"

    @property
    def d_head(self) -> int:
        return self.n_embd // self.n_head

    @property
    def d_ff(self) -> int:
        return self.n_inner

    @property
    def rotary_dim(self) -> int:
        """How many of each head's numbers RoPE turns: int(dh x partial_rotary_factor), as transformers rounds."""
        return int(self.d_head * self.partial_rotary_factor)

    @property
    def attention_factor(self) -> float:
        """LongRoPE's multiplier of cos and sin (so of every score, squared), as transformers'
        _compute_longrope_parameters (rotary.attention_factor); 1 without LongRoPE."""
        return rotary.attention_factor(self.rope())

    def rope(self, layer: int = 0) -> Rope:
        """The first rotary_dim numbers of each head turn; LongRoPE (where the config has it) beyond the context of
        original_max_position_embeddings."""
        scaling = self.rope_scaling
        if scaling is not None:
            scaling = tuple(
                sorted((*scaling, ("original_max_position_embeddings", self.original_max_position_embeddings)))
            )
        return Rope(self.rotary_dim, self.rope_theta, scaling, self.n_positions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rope_scaling"] = (
            None
            if self.rope_scaling is None
            else {k: list(v) if isinstance(v, tuple) else v for k, v in self.rope_scaling}
        )
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, "model_type": self.model_type, **d, "d_head": self.d_head, "d_ff": self.d_ff}

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (Phi3Config's keys; LongRoPE's in rope_parameters)."""
        rope = rope_dict(self.rope_theta, self.rope_scaling, partial_rotary_factor=self.partial_rotary_factor)
        return {
            "architectures": ["Phi3ForCausalLM"],
            "model_type": "phi3",
            "vocab_size": self.vocab_size,
            "hidden_size": self.n_embd,
            "intermediate_size": self.n_inner,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_kv_head,
            "max_position_embeddings": self.n_positions,
            "original_max_position_embeddings": self.original_max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": self.hidden_act,
            "rope_parameters": rope,
            "sliding_window": self.sliding_window,
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "phi3") -> Phi3Config:
        """Read a transformers Phi3Config dict (as config.json holds it), with Phi3Config's defaults."""
        check_model_type(hf, PHI3_MODEL_TYPES, "a Phi-3 model (phi3)")
        check_dtype(hf)
        D, H = hf.get("hidden_size", 3072), hf.get("num_attention_heads", 32)
        # Phi3Attention takes a head_dim the config carries (getattr), its rotary embedding and checks do not.
        if (
            hf.get("head_dim") is not None
            and isinstance(D, int)
            and isinstance(H, int)
            and H
            and hf["head_dim"] != D // H
        ):
            raise UserError(
                f"config head_dim={hf['head_dim']!r} (not hidden_size / num_attention_heads = {D // H}) "
                f"is not supported for phi3"
            )
        rope = _rope_parameters(hf)
        original = hf.get("original_max_position_embeddings", 4096)
        return cls(
            n_layer=hf.get("num_hidden_layers", 32),
            n_head=H,
            n_embd=D,
            n_inner=hf.get("intermediate_size", 8192),
            vocab_size=hf.get("vocab_size", 32064),
            n_kv_head=H if hf.get("num_key_value_heads") is None else hf["num_key_value_heads"],
            n_positions=hf.get("max_position_embeddings", 4096),
            original_max_position_embeddings=original,
            rms_norm_eps=hf.get("rms_norm_eps", 1e-5),
            hidden_act=hf.get("hidden_act", "silu"),
            rope_theta=rope.pop("rope_theta"),
            partial_rotary_factor=rope.pop("partial_rotary_factor"),
            rope_scaling=_longrope(rope) if rope["rope_type"] == "longrope" else None,
            sliding_window=hf.get("sliding_window"),
            tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            bos_token_id=hf.get("bos_token_id", 1),
            eos_token_id=token_ids(hf.get("eos_token_id", 32000)),
            name=name,
        )


def _rope_parameters(hf: dict) -> dict:
    """rope_type, rope_theta, partial_rotary_factor and LongRoPE's keys, as Phi3Config.convert_rope_params_to_dict
    reads them: a non-empty rope_scaling replaces rope_parameters whole; theta and partial_rotary_factor missing
    from the dict are the top-level ones (else 10,000 and 1); "type" is the oldest spelling of "rope_type", and
    "yarn" is read as "longrope" (as Phi3Config does) and "su" refused (transformers 5 fails on it)."""
    _, rope = rotary.given(hf)
    kind = rope["rope_type"]
    if kind == "su":  # transformers 5 fails on it too (it looks for original_max_position_embeddings first)
        raise UserError(
            "config rope type 'su' (the old name of 'longrope') is not supported: transformers no longer "
            'reads it; write "type": "longrope"'
        )
    if kind == "yarn":  # Phi3Config reads Phi-3's old "yarn" as longrope (short and long factors), not as YaRN
        rope["rope_type"] = kind = "longrope"
    if kind not in ROPE_TYPES:
        raise UserError(f"config rope type {kind!r} is not supported for phi3 (supported: {', '.join(ROPE_TYPES)})")
    for name, default in (("rope_theta", 10000.0), ("partial_rotary_factor", 1.0)):
        if rope.get(name) is None:
            rope[name] = hf[name] if hf.get(name) is not None else default
    # transformers puts the top-level original_max_position_embeddings (Phi3Config's field, 4096 by default) in the
    # dict over any it held: this config's own field says it.
    rope.pop("original_max_position_embeddings", None)
    return rope


def _longrope(rope: dict) -> tuple[tuple[str, object], ...]:
    known = {"rope_type", "short_factor", "long_factor", "factor", "attention_factor"}
    unknown = sorted(set(rope) - known)
    if unknown:
        raise UserError(f"config rope scaling 'longrope' with {', '.join(unknown)} is not supported")
    pairs = {k: tuple(v) if isinstance(v, list) else v for k, v in rope.items() if v is not None}
    return tuple(sorted(pairs.items()))


def _check_longrope(rope: dict, rotary_dim: int) -> None:
    if rope.get("rope_type") != "longrope":
        raise UserError(
            f"config rope type {rope.get('rope_type')!r} is not supported for phi3 (supported: {', '.join(ROPE_TYPES)})"
        )
    for key in ("short_factor", "long_factor"):
        factors = rope.get(key)
        if not isinstance(factors, tuple) or not all(
            isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in factors
        ):
            raise UserError(f"config rope scaling 'longrope' needs {key}, a list of positive numbers, not {factors!r}")
        if len(factors) != rotary_dim // 2:
            raise UserError(
                f"config rope scaling 'longrope' {key} has {len(factors)} numbers; the {rotary_dim} "
                f"rotated numbers of a head need {rotary_dim // 2}"
            )
    for key in ("factor", "attention_factor"):
        value = rope.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise UserError(f"config rope scaling 'longrope' {key} must be a positive number, not {value!r}")


# Phi-3.5-mini's LongRoPE factors, one per rotated frequency (48 for a head of 96), from its config.json's rope_scaling
_PHI35_LONG_FACTOR = (
    1.0800000429153442,
    1.1100000143051147,
    1.1399999856948853,
    1.340000033378601,
    1.5899999141693115,
    1.600000023841858,
    1.6200000047683716,
    2.620000123977661,
    3.2300000190734863,
    3.2300000190734863,
    4.789999961853027,
    7.400000095367432,
    7.700000286102295,
    9.09000015258789,
    12.199999809265137,
    17.670000076293945,
    24.46000099182129,
    28.57000160217285,
    30.420001983642578,
    30.840002059936523,
    32.590003967285156,
    32.93000411987305,
    42.320003509521484,
    44.96000289916992,
    50.340003967285156,
    50.45000457763672,
    57.55000305175781,
    57.93000411987305,
    58.21000289916992,
    60.1400032043457,
    62.61000442504883,
    62.62000274658203,
    62.71000289916992,
    63.1400032043457,
    63.1400032043457,
    63.77000427246094,
    63.93000411987305,
    63.96000289916992,
    63.970001220703125,
    64.02999877929688,
    64.06999969482422,
    64.08000183105469,
    64.12000274658203,
    64.41000366210938,
    64.4800033569336,
    64.51000213623047,
    64.52999877929688,
    64.83999633789062,
)
_PHI35_SHORT_FACTOR = (
    1.0,
    1.0199999809265137,
    1.0299999713897705,
    1.0299999713897705,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0499999523162842,
    1.0699999332427979,
    1.0999999046325684,
    1.1099998950958252,
    1.1599998474121094,
    1.1599998474121094,
    1.1699998378753662,
    1.2899998426437378,
    1.339999794960022,
    1.679999828338623,
    1.7899998426437378,
    1.8199998140335083,
    1.8499997854232788,
    1.8799997568130493,
    1.9099997282028198,
    1.9399996995925903,
    1.9899996519088745,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0199997425079346,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0299997329711914,
    2.0799996852874756,
    2.0899996757507324,
    2.189999580383301,
    2.2199995517730713,
    2.5899994373321533,
    2.729999542236328,
    2.749999523162842,
    2.8399994373321533,
)


# Shapes of Phi-3 models, for counting without weights (and for the download list), from each model's published
# config.json on the Hugging Face hub: vocabulary 32,064, trained on 4,096 positions, rms_norm_eps 1e-5, rope_theta
# 10,000, bos 1, eos 32000.
PRESETS: dict[str, Phi3Config] = {
    # microsoft/Phi-3-mini-4k-instruct: 3,821,079,552 parameters (3.8B)
    "phi-3-mini": preset(Phi3Config, "phi-3-mini", 32, 32, 32, 3072, 8192, 32064, 4096, sliding_window=2047),
    # microsoft/Phi-3-medium-4k-instruct: 13,960,238,080 parameters (14B); grouped-query attention, 10 KV heads
    "phi-3-medium": preset(Phi3Config, "phi-3-medium", 40, 40, 10, 5120, 17920, 32064, 4096, sliding_window=2047),
    # microsoft/Phi-3.5-mini-instruct: Phi-3-mini's shapes (3,821,079,552 parameters), 128K positions by LongRoPE
    # over the 4,096 it was trained on (attention factor sqrt(1 + ln 32 / ln 4096) = 1.19); a window of 262,144, wider
    # than the context
    "phi-3.5-mini": preset(
        Phi3Config, "phi-3.5-mini", 32, 32, 32, 3072, 8192, 32064, 131072, sliding_window=262144,
        rope_scaling=(("long_factor", _PHI35_LONG_FACTOR), ("rope_type", "longrope"), ("short_factor", _PHI35_SHORT_FACTOR)),
    ),
}  # fmt: skip
