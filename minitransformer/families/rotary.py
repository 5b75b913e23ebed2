"""Rotary position embeddings, every variant the families use, in one place: how a config.json states them, which
numbers of a head turn, at which frequencies, and by how much cos and sin are scaled.

A config answers `config.rope(layer)` with a `Rope` (or None for a layer without rotary positions), and the decoder
makes each distinct Rope's tables once a pass (`tables`). The variants:

- default: frequencies 1 / theta^(2i / d) for i < d / 2, d the numbers the frequencies spread over (`Rope.dims`:
  the head's dh, or a share of it, Phi-3's int(dh x partial_rotary_factor) and GPT-NeoX's int(dh x rotary_pct));
- linear: every frequency divided by `factor` (positions slowed down);
- llama3 (Llama 3.1): long wavelengths slowed by `factor`, short ones kept, those between blended;
- YaRN (gpt-oss's and DeepSeek-V3's own; Qwen's model cards add it for long prompts): frequencies blended between
  kept and slowed along a ramp, and cos and sin multiplied by the attention factor mscale;
- LongRoPE (Phi-3): each frequency divided by its own factor, the short ones while the pass's last position is
  within the original context and the long ones beyond, and cos and sin multiplied by the attention factor;
- proportional (Gemma 4's full layers): the frequencies of the whole head, 1 / theta^(2i / dh), of which only the
  first int(partial_rotary_factor x dh / 2) turn, the others set to 0 (cos 1, sin 0: those pairs pass unturned);
- a rope for each kind of layer (Gemma 3's sliding layers at a base of their own, OLMo 3's full layers with YaRN
  and its sliding ones without): `RopePerLayerType` reads the sliding layers' rope beside the others', and the
  config answers it for them (`local_rope`).

Which numbers a frequency turns together is the attention's to say (`rotate_partial`): the halves (x[i], x[i + r/2])
of the first r numbers of a head (Llama's rotate_half), or neighbouring pairs (x[2i], x[2i + 1]) kept in place
(GPT-J's, `interleaved`: GLM-4, ERNIE 4.5, Cohere2); the tables are the same.

Each is computed step for step as transformers computes it in float32 (its frequencies are float32 at every dtype),
and in float64 with the same steps for the float64 reference (families/llama/reference.py says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import ceil, floor, log, pi, sqrt
from typing import Any

import numpy as np

from ..engine.ops import constant, rotary_tables, rotate
from ..errors import UserError, note
from .keys import FULL, SLIDING, slides

ROPE_TYPES: tuple[str, ...] = ("default", "linear", "llama3")
# YaRN, taken by the families whose conformance configs hold it against transformers (every transformers class builds
# its rope through the same ROPE_INIT_FUNCTIONS; a family takes it once a config of it is checked with YaRN).
YARN_ROPE_TYPES: tuple[str, ...] = (*ROPE_TYPES, "yarn")
# The hybrids whose conformance configs check YaRN beside the default rope, and no other type (Qwen3.5, Qwen3-Next).
DEFAULT_OR_YARN: tuple[str, ...] = ("default", "yarn")


@dataclass(frozen=True)
class Rope:
    """What a layer's rotary tables depend on, and nothing else (the decoder makes each one's tables once a pass)."""

    dims: int  # the numbers of a head the frequencies spread over: 1 / theta^(2i / dims), i < dims / 2
    theta: float
    scaling: tuple[tuple[str, object], ...] | None = None  # rope_type and its numbers, sorted pairs; None: default
    n_positions: int = 0  # the context: YaRN's factor and LongRoPE's attention factor where the config leaves them out

    @property
    def kind(self) -> str:
        return str(self.parameters.get("rope_type", "default"))

    @property
    def parameters(self) -> dict:
        return dict(self.scaling or ())

    @property
    def turned(self) -> int:
        """How many numbers of each head turn: a pair per frequency (an odd share rounds up to whole pairs)."""
        return 2 * len(range(0, self.dims, 2))


def tables(rope: Rope, positions: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [..., T, turned] of the positions, times the attention factor where the rope type has one (YaRN,
    LongRoPE), as transformers' rotary embedding hands them out.

    LongRoPE's long factors where the largest position passes the original context (is_long): a batch's rows each by
    their own largest, so that a left-padded row is its prompt alone (transformers' batch takes the batch's largest for
    every row: a short row beside a long one then turns by the long factors)."""
    longrope = rope.kind == "longrope" and positions.size
    long = positions.max(axis=-1, keepdims=True) + 1 > original_context(rope) if longrope else np.zeros(1, bool)
    cos, sin = rotary_tables(positions, inverse_frequencies(rope, np.dtype(dtype), bool(long.any())))
    if long.any() and not long.all():  # rows on both sides: the short rows' tables in their places
        short_cos, short_sin = rotary_tables(positions, inverse_frequencies(rope, np.dtype(dtype), False))
        cos, sin = np.where(long[..., None], cos, short_cos), np.where(long[..., None], sin, short_sin)
    factor = attention_factor(rope)
    if factor == 1.0:
        return cos, sin
    return cos * constant(cos, factor), sin * constant(sin, factor)


def rotate_partial(x, cos, sin, interleaved: bool = False):
    """RoPE on the first r numbers of each head (r = cos.shape[-1], Rope.turned); the other dh - r pass unturned.
    Each frequency i turns a pair: (x[i], x[i + r/2]), the halves (rotate_half: Llama's, GPT-NeoX's), or, where
    `interleaved`, the neighbours (x[2i], x[2i + 1]) in place (GPT-J's: GLM-4's, ERNIE 4.5's, Cohere2's)."""
    r, turn = cos.shape[-1], rotate_interleaved if interleaved else rotate
    if r == x.shape[-1]:
        return turn(x, cos, sin)
    out = x.copy()
    out[..., :r] = turn(x[..., :r], cos, sin)
    return out


def rotate_interleaved(x, cos, sin):
    """RoPE on neighbouring pairs, kept in place: (x[2i], x[2i + 1]) turned by position x frequency i, as
    transformers' interleaved rotate_half (stack(-x[1::2], x[::2]).flatten) turns them; the tables hold each frequency
    twice, [f, f] (`tables`), so cos[..., :r/2] is each once."""
    half = x.shape[-1] // 2
    cos, sin = cos[..., :half], sin[..., :half]
    even, odd = x[..., 0::2], x[..., 1::2]
    out = x.copy()
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = odd * cos + even * sin
    return out


def original_context(rope: Rope) -> float:
    """The positions the model was trained on before its context was extended (YaRN, LongRoPE)."""
    return rope.parameters.get("original_max_position_embeddings") or rope.n_positions


def is_long(rope: Rope, positions: int) -> bool:
    """LongRoPE's choice for a pass whose largest position is `positions` - 1: the long factors past the original
    context (transformers decides per call, on the largest position id)."""
    return rope.kind == "longrope" and positions > original_context(rope)


@lru_cache(maxsize=32)
def inverse_frequencies(rope: Rope, dtype: np.dtype, long: bool = False) -> np.ndarray:
    """The dims/2 rotation frequencies in `dtype`, rescaled as the rope type says (`long`: LongRoPE's long factors).

    float32: computed in float32, step for step as transformers computes them (in float32 at every dtype).
    float64: the same steps in float64, so that the reference's angles are those the config defines, not
    float32 roundings (each frequency off by up to 6e-8 of itself, an angle at position p by p times that).
    """
    c = np.dtype(dtype).type
    d, s = rope.dims, rope.parameters
    powers = c(rope.theta) ** (np.arange(0, d, 2, dtype=c) / c(d))  # theta^(2i / d)
    if rope.kind == "longrope":  # each frequency divided by its own factor: 1 / (factor_i theta^(2i / d))
        inv_freq = c(1.0) / (np.asarray(s["long_factor" if long else "short_factor"], dtype=c) * powers)
    else:
        inv_freq = c(1.0) / powers
    if rope.kind == "linear":  # positions divided by the factor: the same as frequencies divided by it
        inv_freq = inv_freq / c(s["factor"])
    elif rope.kind == "llama3":
        inv_freq = _llama3(inv_freq, s)
    elif rope.kind == "yarn":
        inv_freq = _yarn(inv_freq, rope)
    elif rope.kind == "proportional":  # Gemma 4's: the first share of the pairs turn at the head's frequencies, the
        inv_freq[int(s.get("partial_rotary_factor", 1.0) * d // 2) :] = c(0.0)  # rest at none (cos 1, sin 0)
        inv_freq = inv_freq / c(s.get("factor", 1.0))
    inv_freq.flags.writeable = False
    return inv_freq


def _llama3(inv_freq: np.ndarray, s: dict) -> np.ndarray:
    """Llama 3.1's rescaling: long wavelengths slowed by `factor`, short ones kept, those between blended (none where
    high_freq_factor = low_freq_factor: Llama 4 Scout's, whose wavelengths are either long or short)."""
    c = inv_freq.dtype.type
    factor, low, high = c(s["factor"]), c(s["low_freq_factor"]), c(s["high_freq_factor"])
    old_context = c(s["original_max_position_embeddings"])
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = c(2 * pi) / inv_freq
    scaled = np.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    with np.errstate(divide="ignore", invalid="ignore"):  # no band between where high = low: never chosen below
        smooth = (old_context / wavelen - low) / (high - low)
        smoothed = (c(1.0) - smooth) * scaled / factor + smooth * scaled  # inf - inf there: NaN, never chosen
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return np.where(medium, smoothed, scaled).astype(inv_freq.dtype)


def _yarn(inv_freq: np.ndarray, rope: Rope) -> np.ndarray:
    """YaRN's rescaling (transformers' _compute_yarn_parameters): frequencies that turn fewer than beta_slow times
    over the original context are slowed by `factor` (interpolated), those that turn more than beta_fast times are
    kept (extrapolated), and those between blended along a linear ramp over their index. The cos and sin tables are
    then multiplied by the attention factor (attention_factor)."""
    c, s, d, theta = inv_freq.dtype.type, rope.parameters, rope.dims, rope.theta
    original = original_context(rope)
    factor = yarn_factor(rope)
    beta_fast, beta_slow = s.get("beta_fast") or 32, s.get("beta_slow") or 1

    def correction_dim(rotations: float) -> float:  # the index whose frequency turns `rotations` times
        return (d * log(original / (rotations * 2 * pi))) / (2 * log(theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if s.get("truncate", True):
        low, high = floor(low), ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = np.clip((np.arange(d // 2, dtype=c) - c(low)) / c(high - low), c(0), c(1))
    keep = c(1) - ramp  # the share of each frequency that stays the original's
    interpolation = c(1.0) / (c(factor) * (c(theta) ** (np.arange(0, d, 2, dtype=c) / c(d))))
    return (interpolation * (c(1) - keep) + inv_freq * keep).astype(inv_freq.dtype)


def yarn_factor(rope: Rope) -> float:
    """YaRN's extension: its `factor`, or the context over the original one where the config leaves it out."""
    return rope.parameters.get("factor") or rope.n_positions / original_context(rope)


def mscale(factor: float, m: float = 1.0) -> float:
    """YaRN's mscale(factor, m): 0.1 m ln(factor) + 1, and 1 for no extension (factor <= 1)."""
    return 1.0 if factor <= 1 else 0.1 * m * log(factor) + 1.0


def attention_factor(rope: Rope) -> float:
    """The number transformers multiplies the cos and sin tables by. YaRN: its attention_factor, or
    mscale(factor, mscale) / mscale(factor, mscale_all_dim) where both are given, or mscale(factor). LongRoPE: its
    attention_factor, or sqrt(1 + ln s / ln n0) for the extension s = factor (or the context / n0) over n0 trained
    positions, 1 when s <= 1. 1 for every other rope type."""
    s = rope.parameters
    if rope.kind not in ("yarn", "longrope"):
        return 1.0
    if s.get("attention_factor") is not None:
        return float(s["attention_factor"])
    if rope.kind == "longrope":
        n0 = original_context(rope)
        factor = rope.n_positions / n0 if s.get("factor") is None else float(s["factor"])
        return 1.0 if factor <= 1.0 else sqrt(1 + log(factor) / log(n0))
    factor = yarn_factor(rope)
    if s.get("mscale") and s.get("mscale_all_dim"):
        return mscale(factor, s["mscale"]) / mscale(factor, s["mscale_all_dim"])
    return mscale(factor)


# --- how a config.json states them ------------------------------------------------------------------------------------
def given(hf: dict) -> tuple[str, dict]:
    """(the key, a copy of the dict) of a config.json's rope: a non-empty rope_scaling replaces transformers 5's
    rope_parameters whole, and "rope_type" wins over the oldest spelling "type"; refused if it is not one object for
    every layer."""
    key = "rope_scaling" if hf.get("rope_scaling") else "rope_parameters"
    rope = hf.get(key) or {}
    if not isinstance(rope, dict):
        raise UserError(f"config {key} must be an object, not {rope!r}")
    if any(isinstance(value, dict) for value in rope.values()):  # {"full_attention": {...}, ...}
        raise UserError(f"config {key} per layer type ({', '.join(rope)}) is not supported")
    rope = dict(rope)
    kind = rope.pop("type", "default")
    rope.setdefault("rope_type", kind)
    return key, rope


TRAINED_CONTEXT = ("llama3", "yarn", "longrope")  # the rope types that read the context the model was trained at


def trained_context(hf: dict, rope: dict, one_rope: bool = True, context: int | None = None) -> None:
    """Where a rope that reads the context the model was trained at (original_max_position_embeddings) finds it, as
    transformers' standardize_rope_params does when the model builds its rope (the config's attributes set by then):
    one rope for every layer takes a top-level key of the file over its own; without either, a rope takes the file's
    max_position_embeddings (a rope per layer type: its own, or that), or where the file has none `context`, the
    config class's default (file_context), as transformers' attribute holds it."""
    if rope.get("rope_type") not in TRAINED_CONTEXT:
        return
    context = hf["max_position_embeddings"] if hf.get("max_position_embeddings") is not None else context
    if one_rope and hf.get("original_max_position_embeddings") is not None:
        rope["original_max_position_embeddings"] = hf["original_max_position_embeddings"]
    elif context is not None:
        rope.setdefault("original_max_position_embeddings", context)


def file_context(config: Any, model_type: str = "") -> int | None:
    """transformers' default max_position_embeddings for a config class (its own per model type), where the file
    gives none: the default of the field the key fills; None where it has none."""
    found = next((f for f in config.__dataclass_fields__.values() if _json_key(f) == "max_position_embeddings"), None)
    if found is None:
        return None
    default = found.metadata["key"].default_for(model_type or None)
    return default if isinstance(default, int) and not isinstance(default, bool) else None


def _json_key(field) -> str | None:
    declared = field.metadata.get("key")
    return getattr(declared, "json", None)


def check(rope: dict, kinds: tuple[str, ...] = ROPE_TYPES) -> None:
    """A rope type of `kinds`, with the numbers it needs, each positive."""
    kind = rope.get("rope_type", "default")
    if kind not in kinds:
        raise UserError(f"config rope type {kind!r} is not supported (supported: {', '.join(kinds)})")
    needs = {
        "linear": ("factor",),
        "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
        "yarn": ("factor", "original_max_position_embeddings"),
    }.get(kind, ())
    if kind == "proportional" and rope.get("partial_rotary_factor") is not None:
        needs += ("partial_rotary_factor",)
    if kind == "yarn":  # the optional numbers: positive where given (transformers' defaults where not)
        optional = ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim")
        needs += tuple(k for k in optional if rope.get(k) is not None)
        if not isinstance(rope.get("truncate", True), bool):
            raise UserError(f"config rope scaling 'yarn' truncate must be true or false, not {rope['truncate']!r}")
    for key in needs:
        value = rope.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise UserError(f"config rope scaling {kind!r} needs a positive {key}, not {value!r}")


# The keys transformers' YaRN reads (_compute_yarn_parameters, with the type, theta and the share of a head turned)
YARN_KEYS = frozenset(("rope_type", "rope_theta", "partial_rotary_factor", "factor", "original_max_position_embeddings",
                       "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"))  # fmt: skip
_UNREAD_SAID: set[tuple[str, ...]] = set()  # the unread keys already said in this process (a model loaded twice)


def say_unread(rope: dict) -> None:
    """A note, once a process, of a YaRN rope's keys that transformers does not read, and so neither do we, with the
    attention factor computed without them: DeepSeek-R1-0528-Qwen3-8B's config.json gives an "attn_factor" of 0.878
    (another engine's spelling), which leaves transformers' cos and sin scaled by mscale(4) = 1.139, not by 1."""
    unread = tuple(sorted(set(rope) - YARN_KEYS)) if rope.get("rope_type") == "yarn" else ()
    if not unread or unread in _UNREAD_SAID:
        return
    _UNREAD_SAID.add(unread)
    factor = attention_factor(Rope(2, 1.0, scaling(rope)))
    keys = f"{', '.join(unread)}, {'a key' if len(unread) == 1 else 'keys'}"
    note(
        f"minitransformer: note: the config's YaRN has {keys} transformers does not read, nor do we: its attention "
        f"factor (attention_factor, or from factor and mscale) scales cos and sin by {factor:.6g}"
    )


def scaling(rope: dict) -> tuple[tuple[str, object], ...] | None:
    """The rope's type and numbers as a config keeps them (sorted pairs: hashable), None for the default rope."""
    return tuple(sorted(rope.items())) if rope.get("rope_type", "default") != "default" else None


def parameters(theta: float, scaling: tuple | None = None, **more) -> dict:
    """transformers 5's rope_parameters of a config: the rope type, theta and the scaling's keys (tuples as lists)."""
    rope: dict = {"rope_type": "default", "rope_theta": theta}
    for key, value in scaling or ():
        rope[key] = list(value) if isinstance(value, tuple) else value
    return rope | more


def refuse_partial(hf: dict, rope: dict, keys: tuple[str, ...] = ("partial_rotary_factor",)) -> None:
    """A partial rotation (partial_rotary_factor, in the rope, and at the file's top level where `hf` is the file) or
    pretraining_tp other than 1, refused by name where the family's attention turns every number of a head."""
    harmless = {"pretraining_tp": (None, 1), "partial_rotary_factor": (None, 1, 1.0)}
    for key in keys:
        for value in (hf.get(key), rope.pop(key, None)):
            if value not in harmless[key]:
                raise UserError(f"config {key}={value!r} is not supported")


def positive(key: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UserError(f"config {key} must be a positive number, not {value!r}")


def rope_scaling(original: int, **values: object) -> tuple[tuple[str, object], ...]:
    """A rope scaling as a config holds it, its (key, value) pairs sorted (hashable): `values` and the context it was
    trained on, original_max_position_embeddings."""
    return tuple(sorted((values | {"original_max_position_embeddings": original}).items()))


def partial_rotary(default: float | None) -> tuple[str, str, float | None]:
    """RopeKeys.share of a family whose field and older top-level key are both partial_rotary_factor."""
    return ("partial_rotary_factor", "partial_rotary_factor", default)


@dataclass(frozen=True)
class RopeKeys:
    """A config's rotary positions as its config.json states them (a group of the config's declaration, families/
    config.py): transformers 5's rope_parameters, or an older file's rope_scaling beside a top-level theta, read into
    the fields rope_theta and rope_scaling (sorted pairs; no such field where the family computes the default rope
    alone) and written back as rope_parameters. A family says which rope types it computes (another is refused by
    name), transformers' theta where the file gives none, the keys of a partial rotation it refuses (in the rope, and
    at the file's top level where transformers reads them there too), the rope where the file gives none, and where it
    turns a share of each head: the field that holds the share, the older top-level key and transformers' default."""

    kinds: tuple[str, ...] = ROPE_TYPES
    refused: tuple[str, ...] = ("partial_rotary_factor",)
    top_level: bool = False
    theta_key: str = "rope_theta"  # an older file's top-level theta
    default: dict | None = None  # the rope where the file gives none (gpt-oss's YaRN)
    share: tuple[str, str, float | None] | None = None  # (field, older top-level key, default): the share turned
    ignored: tuple[str, ...] = ()  # keys read and left (a multimodal rope's sections: a text token's are one position)
    strict: bool = False  # any other key of a default rope refused

    def rope(self, hf: dict, theta: float, context: int | None = None) -> dict:
        """The file's rope object (or the default one), its type checked, its theta (`theta` where the file has none)
        filled in; `context`: trained_context's, where the file has no max_position_embeddings."""
        if self.default is not None and not (hf.get("rope_scaling") or hf.get("rope_parameters")):
            hf = {"rope_parameters": self.default, self.theta_key: hf.get(self.theta_key)}
        _, rope = given(hf)
        if rope.get("rope_theta") is None:
            rope["rope_theta"] = hf[self.theta_key] if hf.get(self.theta_key) is not None else theta
        trained_context(hf, rope, context=context)
        check(rope, self.kinds)
        return rope

    def read(self, hf: dict, config: type, model_type: str = "") -> dict:
        """rope_theta (the config's default where the file has none), rope_scaling and the share of a head turned."""
        theta = config.__dataclass_fields__["rope_theta"].default  # type: ignore[attr-defined]
        rope = self.rope(hf, theta, file_context(config, model_type))
        fields = {"rope_theta": rope.pop("rope_theta")}
        if self.share is not None:
            name, older, default = self.share
            share = rope.pop("partial_rotary_factor", None)
            fields[name] = share if share is not None else hf[older] if hf.get(older) is not None else default
        refuse_partial(hf if self.top_level else {}, rope, self.refused)
        for key in self.ignored:
            rope.pop(key, None)
        say_unread(rope)
        if self.strict and rope.get("rope_type", "default") == "default" and set(rope) - {"rope_type"}:
            raise UserError(f"config rope_parameters {', '.join(sorted(set(rope) - {'rope_type'}))} is not supported")
        return fields if self.kinds == ("default",) else fields | {"rope_scaling": scaling(rope)}

    def write(self, config) -> dict:
        share = {} if self.share is None else {"partial_rotary_factor": getattr(config, self.share[0])}
        return {"rope_parameters": parameters(config.rope_theta, getattr(config, "rope_scaling", None), **share)}

    def check(self, config) -> None:
        """theta positive, the scaling's numbers those its type needs; a share of each head in (0, 1] turning whole
        pairs, one at least (where the share is in partial_rotary_factor; GPT-NeoX's rotary_pct rounds up)."""
        positive("rope_theta", config.rope_theta)
        if getattr(config, "rope_scaling", None) is not None:
            check(dict(config.rope_scaling), self.kinds)
        if self.share is not None and self.share[0] == "partial_rotary_factor":
            share = config.partial_rotary_factor
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
                raise UserError(f"config partial_rotary_factor must be a number in (0, 1], not {share!r}")
            turned = int(config.d_head * share)
            if turned < 2 or turned % 2:
                raise UserError(
                    f"config partial_rotary_factor={share} turns {turned} of each head's {config.d_head} "
                    f"numbers; rotary embeddings need an even number, at least 2"
                )


@dataclass(frozen=True)
class LongRope(RopeKeys):
    """Phi-3's rope as Phi3Config.convert_rope_params_to_dict reads it: the default rope or LongRoPE (short and long
    factors, one per rotated frequency; a factor and an attention factor where given), theta and the share of each head
    turned from the rope or the file's top level; "yarn" is Phi-3's old name of longrope, and "su" an older one which
    transformers 5 no longer reads (refused); original_max_position_embeddings is the config's own field (transformers
    puts the top-level one in the rope over any it held)."""

    kinds: tuple[str, ...] = ("default", "longrope")
    share: tuple[str, str, float | None] | None = ("partial_rotary_factor", "partial_rotary_factor", 1.0)
    refused: tuple[str, ...] = ()

    def rope(self, hf: dict, theta: float, context: int | None = None) -> dict:
        _, rope = given(hf)
        if rope["rope_type"] == "su":  # transformers 5 fails on it too (it looks for original_max_position_embeddings)
            raise UserError(
                "config rope type 'su' (the old name of 'longrope') is not supported: transformers no longer "
                'reads it; write "type": "longrope"'
            )
        if rope["rope_type"] == "yarn":  # not YaRN: Phi3Config reads Phi-3's old "yarn" as longrope
            rope["rope_type"] = "longrope"
        if rope["rope_type"] not in self.kinds:
            raise UserError(
                f"config rope type {rope['rope_type']!r} is not supported for phi3 (supported: {', '.join(self.kinds)})"
            )
        if rope.get("rope_theta") is None:
            rope["rope_theta"] = hf["rope_theta"] if hf.get("rope_theta") is not None else theta
        rope.pop("original_max_position_embeddings", None)
        unknown = sorted(
            set(rope)
            - {
                "rope_type",
                "rope_theta",
                "partial_rotary_factor",
                "short_factor",
                "long_factor",
                "factor",
                "attention_factor",
            }
        )
        if unknown and rope["rope_type"] == "longrope":
            raise UserError(f"config rope scaling 'longrope' with {', '.join(unknown)} is not supported")
        return {k: tuple(v) if isinstance(v, list) else v for k, v in rope.items() if v is not None}  # hashable

    def check(self, config) -> None:
        """LongRoPE's factors: a positive number per rotated frequency (config.rotary_dim / 2) of each list; a factor
        and an attention factor positive where given."""
        super().check(config)
        rope = dict(config.rope_scaling or ())
        if not rope:
            return
        for key in ("short_factor", "long_factor"):
            factors = rope.get(key)
            if not isinstance(factors, tuple) or not all(
                isinstance(f, (int, float)) and not isinstance(f, bool) and f > 0 for f in factors
            ):
                raise UserError(
                    f"config rope scaling 'longrope' needs {key}, a list of positive numbers, not {factors!r}"
                )
            if len(factors) != config.rotary_dim // 2:
                raise UserError(
                    f"config rope scaling 'longrope' {key} has {len(factors)} numbers; the {config.rotary_dim} "
                    f"rotated numbers of a head need {config.rotary_dim // 2}"
                )
        for key in ("factor", "attention_factor"):
            if rope.get(key) is not None:
                positive(f"rope scaling 'longrope' {key}", rope[key])


@dataclass(frozen=True)
class RopePerLayerType:
    """A rope for each kind of attention layer, as transformers 5 states it (rope_parameters {"full_attention": {...},
    "sliding_attention": {...}}, a kind left out taking the default rope), or as an older file does (rope_theta and
    rope_scaling, which are the full layers' alone; the sliding layers' theta under `local_key`, or `local_theta`
    where the family reads no such key): read into the fields rope_theta and rope_scaling (the full layers') and
    local_rope_theta and local_rope_scaling (the sliding layers', which `local_rope` hands them). A family says the rope
    types it computes, the full layers' theta where the file gives none, and the model types whose one rope turns
    every layer (Gemma 2's: read as RopeKeys reads it). A flat rope_parameters, which transformers leaves unread
    (OLMo 3) or reads otherwise, is refused by name."""

    theta: float
    local_theta: float
    local_key: str | None = None
    kinds: tuple[str, ...] = ROPE_TYPES
    single: tuple[str, ...] = ()
    # the full layers' rope where the file gives no rope_parameters (Gemma 4's proportional one), as sorted pairs
    full_default: tuple[tuple[str, object], ...] = ()

    def read(self, hf: dict, config: type, model_type: str = "") -> dict:
        if model_type in self.single:
            return RopeKeys(self.kinds).read(hf, config, model_type)
        given = hf.get("rope_parameters")
        if given is None and self.full_default:
            given = {FULL: dict(self.full_default)}
        if given is not None and (not isinstance(given, dict) or not set(given) <= {FULL, SLIDING}):
            raise UserError(
                f"config rope_parameters must hold {FULL!r} and {SLIDING!r} (a rope per layer type), not {given!r}"
            )
        ropes = {kind: dict((given or {}).get(kind) or {"rope_type": "default"}) for kind in (FULL, SLIDING)}
        older = hf.get("rope_scaling")
        if older is not None and not isinstance(older, dict):
            raise UserError(f"config rope_scaling must be an object, not {older!r}")
        ropes[FULL].update(older or {})
        ropes[FULL].setdefault("rope_theta", hf.get("rope_theta", self.theta))
        ropes[SLIDING].setdefault(
            "rope_theta", hf.get(self.local_key, self.local_theta) if self.local_key else self.local_theta
        )
        for rope in ropes.values():
            rope.setdefault("rope_type", rope.pop("type", "default"))
            rope.pop("type", None)
            trained_context(hf, rope, one_rope=False, context=file_context(config, model_type))
            check(rope, self.kinds)
            # transformers' YaRN reads truncate from the outer rope_parameters, which per layer type holds only the
            # kinds: it truncates the ramp whatever a kind's rope says, and so do we (the file's flag is not read)
            rope.pop("truncate", None)
            if rope["rope_type"] != "proportional":  # whose share of a head is its own (inverse_frequencies)
                refuse_partial({}, rope)
        full, local = ropes[FULL], ropes[SLIDING]
        return {
            "rope_theta": full.pop("rope_theta"),
            "rope_scaling": scaling(full),
            "local_rope_theta": local.pop("rope_theta"),
            "local_rope_scaling": scaling(local),
        }

    def write(self, config) -> dict:
        full = parameters(config.rope_theta, config.rope_scaling)
        if config.model_type in self.single:
            return {"rope_parameters": full}
        local = (config.local_rope_theta, config.local_rope_scaling) if config.local_rope_theta is not None else None
        return {"rope_parameters": {FULL: full, SLIDING: parameters(*local) if local else full}}

    def check(self, config) -> None:
        RopeKeys(self.kinds).check(config)
        if config.local_rope_theta is not None:
            positive(self.local_key or f"rope_parameters.{SLIDING}.rope_theta", config.local_rope_theta)
        if config.local_rope_scaling is not None:
            check(dict(config.local_rope_scaling), self.kinds)


def local_rope(config, layer: int) -> Rope | None:
    """A sliding layer's own rope (local_rope_theta and local_rope_scaling, RopePerLayerType's), or None where the
    layer does not slide or the config has none of its own: that layer turns at the config's rope."""
    if config.local_rope_theta is None or not slides(config.layer_types[layer]):
        return None
    return Rope(config.d_head, config.local_rope_theta, config.local_rope_scaling, config.n_positions)
