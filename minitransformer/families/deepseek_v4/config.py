"""DeepSeek-V4's config: each field under its config.json key with transformers' DeepseekV4Config default (and the
older spellings its __post_init__ folds in: compress_ratios, compress_rate_csa / _hca, num_hash_layers,
qk_rope_head_dim), the presets of the published models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, ClassVar

from ...engine.kvcache import KeysValues
from ...errors import UserError
from .. import rotary
from ..config import ModelConfig, SharedExperts, check_experts, check_multiple
from ..keys import (
    ACTIVATION,
    FLAG,
    LAYER_COUNT,
    POSITIVE,
    POSITIVE_NUMBER,
    SCALE,
    SIZE,
    TOKENS,
    Key,
    Kind,
    Refusal,
    eps,
    key,
    layer_kinds,
    unnoted,
)
from ..rotary import Rope, rope_scaling

SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
RATIOS = {0: SLIDING, 4: CSA, 128: HCA}  # transformers' reading of the older compress_ratios (per layer)
HASH, MOE = "hash_moe", "moe"
ATTENTION_TYPES = layer_kinds(SLIDING, CSA, HCA)
MLP_TYPES = layer_kinds(HASH, MOE)
LAYER_TYPES = Key("layer_types", None, ATTENTION_TYPES.or_null())


def ratios(value) -> bool:
    return isinstance(value, list) and set(value) <= set(RATIOS)


COMPRESS_RATIOS = Key("compress_ratios", None, Kind("a list of 0, 4 and 128", lambda v: v is None or ratios(v)))
MLP_LAYER_TYPES = Key("mlp_layer_types", None, MLP_TYPES.or_null())
HASH_LAYERS = Key("num_hash_layers", 3, Kind("a whole number >= 0", lambda v: isinstance(v, int) and v >= 0))


def two_rates(value) -> bool:
    positive = isinstance(value, dict) and all(isinstance(rate, int) and rate > 0 for rate in value.values())
    return value is None or positive and set(value) <= {CSA, HCA}


RATES = Key("compress_rates", None, Kind("an object of the two compression rates", two_rates))
PARTIAL = Key("partial_rotary_factor", None, POSITIVE_NUMBER.or_null())
ROPE_DIM = Key("qk_rope_head_dim", None, SIZE.or_null())
ROPE_PARAMETERS = ("rope_parameters", "rope_scaling")
TWO_RATES = Kind("two rates", shape=True)
SQRTSOFTPLUS = "only sqrtsoftplus, DeepSeek-V4's router, is computed here"
ONE_HEAD, RATES_OF = "DeepSeek-V4 attends with one key-value head (K = V)", "each layer's rate one of 0, 4 and 128"
KINDS_KEYS = (LAYER_TYPES, COMPRESS_RATIOS)  # the keys attention_types reads
DR = "qk_rope_head_dim"  # the rotary numbers' name in the JSON


def attention_types(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Each layer's attention: the file's layer_types, or its older compress_ratios (0, 4, 128 a layer), or
    DeepseekV4Config's rule (two heavily compressed layers, then compressed sparse and heavily compressed in turn);
    cut to the layers, as transformers cuts them (a checkpoint's list runs on over its prediction layers)."""
    n, kinds, older = values["n_layer"], LAYER_TYPES.get(hf), COMPRESS_RATIOS.get(hf)
    if kinds is None and older is not None:
        kinds = tuple(RATIOS[r] for r in older)
    if kinds is None:
        kinds = (HCA,) * min(n, 2) + tuple(CSA if i % 2 else HCA for i in range(max(n - 2, 0)))
    if len(kinds) < n:
        which = "layer_types (or compress_ratios)"
        raise UserError(f"config {which} must name {n} layers (num_hidden_layers), not {len(kinds)}")
    return tuple(kinds[:n])


def mlp_types(hf: dict, values: Mapping) -> tuple[str, ...]:
    """Each layer's experts: hash-routed (hash_moe) or routed by the scores (moe): the file's mlp_layer_types, or the
    first num_hash_layers (3) hash-routed."""
    n, kinds = values["n_layer"], MLP_LAYER_TYPES.get(hf)
    if kinds is None:
        hashed = min(n, HASH_LAYERS.get(hf))
        kinds = (HASH,) * hashed + (MOE,) * (n - hashed)
    if len(kinds) < n:
        raise UserError(f"config mlp_layer_types must name {n} layers (num_hidden_layers), not {len(kinds)}")
    return tuple(kinds[:n])


def rates(hf: dict, values: Mapping) -> tuple[int, int]:
    """(compressed sparse, heavily compressed) rates: compress_rates, or compress_rate_csa / compress_rate_hca, or
    transformers' 4 and 128."""
    given = RATES.get(hf) or {}
    csa = given.get(CSA, unnoted(hf, "compress_rate_csa", 4))
    hca = given.get(HCA, unnoted(hf, "compress_rate_hca", 128))
    for name, rate in (("compress_rate_csa", csa), ("compress_rate_hca", hca)):
        if not (isinstance(rate, int) and rate > 0):
            raise UserError(f"config {name} must be a positive integer, not {rate!r}")
    return csa, hca


def rope_dims(hf: dict, values: Mapping) -> int:
    """The rotary numbers of each head: head_dim x partial_rotary_factor, or the older qk_rope_head_dim, or 64 of
    512 (transformers' default factor 1/8)."""
    factor, dims = PARTIAL.get(hf), ROPE_DIM.get(hf)
    rope = (
        int(values["head_dim"] * factor)
        if factor is not None
        else (dims if dims is not None else values["head_dim"] // 8)
    )
    if rope % 2 or rope > values["head_dim"] or rope <= 0:
        head = f"head_dim={values['head_dim']}"
        raise UserError(
            f"config partial_rotary_factor gives {rope} rotary numbers of {head}: an even number, at most the head"
        )
    return rope


def compress_scaling(hf: dict, values: Mapping) -> tuple[tuple[str, object], ...] | None:
    """The compressed layers' rope scaling (YaRN, or none): rope_parameters' "compress" where nested, else the file's
    flat rope_parameters or rope_scaling (transformers applies it to those layers alone, with attention_factor 1)."""
    given = next((hf[k] for k in ROPE_PARAMETERS if isinstance(hf.get(k), dict)), None)
    if given is None:
        return None
    rope = dict(given.get("compress", given)) if isinstance(given.get("compress"), dict) else dict(given)
    rope = {k: v for k, v in rope.items() if k not in ("main", "compress", "rope_theta", "partial_rotary_factor")}
    kind = rope.pop("type", None) or rope.get("rope_type", "default")
    if kind == "default":
        return None
    if kind != "yarn":
        raise UserError(f"config rope_parameters rope_type={kind!r} is not supported (DeepSeek-V4: default or yarn)")
    # transformers' YaRN reads truncate from the outer rope_parameters, which here holds "main" and "compress" (a flat
    # one is nested on reading): it truncates the ramp whatever the file says, and so do we (the flag is not read)
    rope.pop("truncate", None)
    return rotary.scaling({**rope, "rope_type": "yarn", "attention_factor": rope.get("attention_factor", 1.0)})


def theta(which: str, json: str, default: float) -> Any:
    """A rope's base, the field: the nested rope_parameters' `which` ("main", "compress") where given, else the key
    `json` (written with the layer types)."""

    def read(hf: dict, values: Mapping) -> float:
        given = hf.get("rope_parameters")
        nested: dict = given if isinstance(given, dict) else {}
        value = (nested.get(which) or {}).get("rope_theta", hf.get(json, default))
        POSITIVE_NUMBER.check(json, value)
        return float(value)

    return key(json, default, POSITIVE_NUMBER, read=read, write=elsewhere)


def elsewhere(config: Any) -> dict:
    """The writer of a field whose keys `written` (the layer types') writes."""
    return {}


def ruled(json: str, kind: Kind, rule: Any, reads: tuple[Key, ...], **more: Any) -> Any:
    """A field read by `rule` from the file's keys `reads`, the same rule its value where the file has none."""
    return key(json, None, kind, read=rule, rule=rule, reads=reads, **{"write": elsewhere} | more)


def written(c: DeepseekV4Config) -> dict:
    rope = {"rope_parameters": dict(c.compress_scaling)} if c.compress_scaling else {}
    kinds = {"layer_types": list(c.attention_types), "mlp_layer_types": list(c.mlp_layer_types)}
    thetas = {"rope_theta": c.rope_theta, "compress_rope_theta": c.compress_rope_theta}
    share = {"partial_rotary_factor": c.qk_rope_head_dim / c.head_dim}
    return kinds | {"compress_rates": {CSA: c.csa_rate, HCA: c.hca_rate}} | share | thetas | rope


@dataclass(frozen=True)
class DeepseekV4Config(SharedExperts, ModelConfig):
    """A DeepSeek-V4: every layer attends through a sliding window of sliding_window keys, one key-value head of
    head_dim (K = V) and num_attention_heads query heads from a q_lora_rank latent, each head's sink; its compressed
    layers (layer_types) also attend to entries that compress every compress_rate positions (4, chosen by an indexer
    of index_n_heads x index_head_dim that keeps index_topk; or 128, all of them); the grouped output projection
    (o_groups of o_lora_rank); the residual stream as hc_mult streams; in each layer n_routed_experts of
    moe_intermediate_size (num_experts_per_tok a token, hash-routed in the hash_moe layers) beside a shared expert."""

    n_layer: int = key("num_hidden_layers", 43, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 64, SIZE)
    n_embd: int = key("hidden_size", 4096, SIZE)
    vocab_size: int = key("vocab_size", 129280, SIZE)
    moe_inner: int = key("moe_intermediate_size", 2048, SIZE)
    head_dim: int = key("head_dim", 512, SIZE)
    q_lora_rank: int = key("q_lora_rank", 1024, SIZE)
    qk_rope_head_dim: int = ruled("partial_rotary_factor", SIZE, rope_dims, (PARTIAL, ROPE_DIM), dict_key=DR)
    top_k: int = key("num_experts_per_tok", 6, SIZE)
    n_experts: int = key("n_routed_experts", 256, SIZE, aliases=("num_local_experts",))
    n_shared_experts: int = key("n_shared_experts", 1, SIZE)
    routed_scaling_factor: float = key("routed_scaling_factor", 1.5, SCALE)
    n_positions: int = key("max_position_embeddings", 1048576, SIZE)
    attention_types: tuple[str, ...] = ruled("layer_types", ATTENTION_TYPES, attention_types, KINDS_KEYS, write=written)
    mlp_layer_types: tuple[str, ...] = ruled("mlp_layer_types", MLP_TYPES, mlp_types, (MLP_LAYER_TYPES, HASH_LAYERS))
    compress_rates: tuple[int, int] = ruled("compress_rates", TWO_RATES, rates, (RATES,))
    hc_mult: int = key("hc_mult", 4, SIZE)
    hc_sinkhorn_iters: int = key("hc_sinkhorn_iters", 20, POSITIVE)
    hc_eps: float = key("hc_eps", 1e-6, POSITIVE_NUMBER)
    swiglu_limit: float = key("swiglu_limit", 10.0, SCALE)
    sliding_window: int = key("sliding_window", 128, SIZE)
    o_groups: int = key("o_groups", 8, SIZE)
    o_lora_rank: int = key("o_lora_rank", 1024, SIZE)
    index_n_heads: int = key("index_n_heads", 64, SIZE)
    index_head_dim: int = key("index_head_dim", 128, SIZE)
    compressed_topk: int = key("index_topk", 512, SIZE)  # the compressed entries a query attends to (4:1 layers)
    rope_theta: float = theta("main", "rope_theta", 10000.0)
    compress_rope_theta: float = theta("compress", "compress_rope_theta", 160000.0)
    compress_scaling: tuple[tuple[str, object], ...] | None = key(
        "rope_parameters", None, Kind("a rope scaling"), read=compress_scaling, write=elsewhere
    )
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    model_type: str = "deepseek_v4"

    what = "a DeepSeek-V4"
    classes = {"deepseek_v4": "DeepseekV4ForCausalLM"}
    checkpoint_kind = "DeepSeek-V4 model"
    padding_refused = (
        "a left-padded batch is not supported by DeepSeek-V4: its compressors pool every slot, pads too "
        "(transformers' do); give prompts of one length"
    )
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("attention_bias", "is not supported (DeepSeek-V4's projections have no biases)"),
        Refusal("mlp_bias", "is not supported (DeepSeek-V4's shared expert has no biases)"),
        Refusal("scoring_func", f"is not supported: {SQRTSOFTPLUS}", lambda v, hf: v != "sqrtsoftplus"),
        Refusal("num_key_value_heads", f"is not supported: {ONE_HEAD}", lambda v, hf: v not in (None, 1)),
        Refusal("compress_ratios", f"is not supported ({RATES_OF})", lambda v, hf: not ratios(v)),
    )

    def validate(self) -> None:
        if len(self.mlp_layer_types) != self.n_layer:
            raise UserError(f"config mlp_layer_types must name {self.n_layer} layers, not {len(self.mlp_layer_types)}")
        check_experts(self)
        check_multiple(self, "n_head", "o_groups", "(the grouped output projection splits the heads)")

    # --- what the rest of the code asks ---------------------------------------------------------------------------
    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind: its attention, with "+hash" where its experts are hash-routed (their stages differ)."""
        return tuple(a + ("+hash" if m == HASH else "") for a, m in zip(self.attention_types, self.mlp_layer_types))

    @property
    def csa_rate(self) -> int:
        return self.compress_rates[0]

    @property
    def hca_rate(self) -> int:
        return self.compress_rates[1]

    def attention_kind(self, layer: int) -> str:
        return self.attention_types[layer]

    def ratio(self, layer: int) -> int:
        """The positions a compressed entry of the layer stands for (0: a sliding layer, no compressor)."""
        return {SLIDING: 0, CSA: self.csa_rate, HCA: self.hca_rate}[self.attention_types[layer]]

    @property
    def d_head(self) -> int:
        return self.head_dim

    @property
    def n_kv_head(self) -> int:
        return 1

    @property
    def d_ff(self) -> int:
        return self.moe_inner

    @property
    def norm_topk_prob(self) -> bool:  # DeepSeek-V4's router always renormalises
        return True

    @property
    def symbol_sizes(self) -> dict[str, int]:
        N, H, g = self.hc_mult, self.n_head, self.o_groups
        streams = dict(N=N, Nm=(2 + N) * N, dq=self.q_lora_rank, dr=self.qk_rope_head_dim, Hi=self.index_n_heads)
        groups = dict(di=self.index_head_dim, g=g, dg=self.o_lora_rank, Hg=H * self.head_dim // g, Fe=self.moe_inner)
        return streams | groups | {"Fs": self.d_shared}

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window  # every layer's own keys: its window's

    def layer_cache(self, layer: int) -> KeysValues:
        """The window's keys (K = V, one head of head_dim), and in a compressed layer its entries (one of head_dim
        for every rate positions; an indexer's of index_head_dim beside them in a 4:1 layer) and its compressors'
        states (the rows of a window not yet closed, and, 4:1, the last closed window's first series)."""
        m, dh, di = self.ratio(layer), self.head_dim, self.index_head_dim
        if not m:
            return KeysValues(1, dh, window=self.sliding_window, shared=True)
        overlap = self.attention_types[layer] == CSA
        compressed = (("compressed", m, (dh,)),) + ((("index", m, (di,)),) if overlap else ())
        state = compressor_state("compressor", m, dh, overlap) + (
            compressor_state("indexer", m, di, True) if overlap else ()
        )
        return KeysValues(1, dh, window=self.sliding_window, shared=True, compressed=compressed, state=state)

    def prefix(self, n_layer: int) -> Any:
        n = n_layer
        return replace(
            self, n_layer=n, attention_types=self.attention_types[:n], mlp_layer_types=self.mlp_layer_types[:n]
        )

    def rope(self, layer: int) -> Rope:
        """A sliding layer's rope ("main": rope_theta, no scaling) or a compressed layer's ("compress":
        compress_rope_theta and the YaRN scaling), over the last qk_rope_head_dim numbers of each head."""
        if not self.ratio(layer):
            return Rope(self.qk_rope_head_dim, self.rope_theta, None, self.n_positions)
        return Rope(self.qk_rope_head_dim, self.compress_rope_theta, self.compress_scaling, self.n_positions)


def compressor_state(name: str, m: int, d: int, overlap: bool) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """A compressor's state in the cache: its projections (values and gates, 2d wide each with two series) of the
    positions of the window not yet closed (at most m - 1), and with two series the last closed window's first series
    (its m rows of values and of gates, d wide)."""
    width = 2 * d if overlap else d
    rows = ((f"{name}.kv", (m - 1, width)), (f"{name}.gate", (m - 1, width)))
    return rows + (((f"{name}.prior_kv", (m, d)), (f"{name}.prior_gate", (m, d))) if overlap else ())


# The published config.json of each model. Their sources: DeepSeek-V4-Flash, the config.json a Rust test of a serving
# engine holds byte for byte ("OFFICIAL_CONFIG", its sha256 checked: 43 layers, hidden 4096, 64 heads of 512, q_lora_rank
# 1024, o_groups 8 of o_lora_rank 1024, index 64 heads of 128 keeping 512, 256 experts of 2048 (6 a token, 1 shared,
# routed_scaling_factor 1.5, sqrtsoftplus, num_hash_layers 3), hc_mult 4, 20 Sinkhorn iterations, hc_eps 1e-6,
# swiglu_limit 10, window 128, rope_theta 10000, compress_rope_theta 160000, YaRN factor 16 over 65536 (beta_fast 32,
# beta_slow 1), max_position_embeddings 1048576, vocabulary 129280, rms_norm_eps 1e-6, untied, bos 0, eos 1,
# compress_ratios [0, 0] + [4, 128] x 20 + [4] for the 43 layers (and its prediction layers' after them));
# DeepSeek-V4-Pro, a Python lock of the complete snapshot's config.json and a checkpoint check of it (61 layers, hidden
# 7168, 128 heads of 512, q_lora_rank 1536, o_groups 16 of 1024, index 64 x 128 keeping 1024, 384 experts of 3072 (6 a
# token, 1 shared, routed_scaling_factor 2.5), the rest as Flash's) and its compress_ratios as a geometry check states
# them, (128, 128) then 4 on the even layers and 128 on the odd ones.
YARN_16 = rope_scaling(65536, rope_type="yarn", factor=16, beta_fast=32, beta_slow=1, attention_factor=1.0)
FLASH_TYPES = (SLIDING, SLIDING) + (CSA, HCA) * 20 + (CSA,)
PRO_TYPES = (HCA, HCA) + tuple(CSA if i % 2 == 0 else HCA for i in range(2, 61))
PRO = dict(n_layer=61, n_head=128, n_embd=7168, moe_inner=3072, q_lora_rank=1536, o_groups=16, compressed_topk=1024)


def v4(name: str, kinds: tuple[str, ...], **more: Any) -> DeepseekV4Config:
    hashed = (HASH,) * 3 + (MOE,) * (len(kinds) - 3)  # the first three layers' experts hash-routed
    return DeepseekV4Config(attention_types=kinds, mlp_layer_types=hashed, compress_scaling=YARN_16, name=name, **more)


PRESETS = {
    "deepseek-v4-flash": v4("deepseek-v4-flash", FLASH_TYPES),
    "deepseek-v4-pro": v4("deepseek-v4-pro", PRO_TYPES, **PRO, n_experts=384, routed_scaling_factor=2.5),
}
