"""DeepSeek-V3's config: each field under its config.json key with transformers' DeepseekV3Config default, and the
preset of the published model, from its config.json."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property
from typing import ClassVar

from ...errors import UserError
from .. import rotary
from ..config import ModelConfig, SharedExperts, check_experts, check_multiple
from ..keys import (
    ACTIVATION,
    COUNT,
    FLAG,
    LAYER_COUNT,
    POSITIVE,
    SCALE,
    SIZE,
    TOKENS,
    TRUTHY,
    Refusal,
    Written,
    eps,
    key,
)
from ..rotary import YARN_ROPE_TYPES, Rope, RopeKeys, rope_scaling

# The rope types the forward pass computes (families/rotary.py): the default, linear and YaRN, DeepSeek-V3's own; any
# other reads and counts, but running it is refused by name (forward.py).
RUNNABLE_ROPE_TYPES = ("default", "linear", "yarn")
FIRST_DENSE = replace(COUNT.or_null(), shape=True, read=lambda n: n or 0)  # null: none (transformers' `if`)


@dataclass(frozen=True)
class DeepseekConfig(SharedExperts, ModelConfig):
    """A DeepSeek-V3: multi-head latent attention (q through a rank-q_lora_rank bottleneck, or one q_proj; k and v
    up-projected from a kv_lora_rank latent, a qk_rope_head_dim rotary key shared by the heads beside each head's
    qk_nope_head_dim), and after first_k_dense_replace dense layers, a mixture of n_experts routed experts of width
    moe_inner (top_k a token, chosen by group-limited sigmoid scores) beside n_shared_experts always-on ones."""

    n_layer: int = key("num_hidden_layers", 61, LAYER_COUNT)
    n_head: int = key("num_attention_heads", 128, SIZE)
    n_embd: int = key("hidden_size", 7168, SIZE)
    n_inner: int = key("intermediate_size", 18432, SIZE)  # the dense layers' MLP width
    vocab_size: int = key("vocab_size", 129280, SIZE)
    # each expert's width (the shared experts': n_shared_experts x it)
    moe_inner: int = key("moe_intermediate_size", 2048, SIZE)
    q_lora_rank: int | None = key("q_lora_rank", 1536, SIZE.or_null())  # null: q = h W_q in one product
    kv_lora_rank: int = key("kv_lora_rank", 512, SIZE)
    qk_rope_head_dim: int = key("qk_rope_head_dim", 64, SIZE)
    qk_nope_head_dim: int = key("qk_nope_head_dim", 128, SIZE)
    v_head_dim: int = key("v_head_dim", 128, SIZE)
    rope_interleave: bool = key("rope_interleave", True, TRUTHY)  # null reads as false, as transformers' `if`
    n_experts: int = key("n_routed_experts", 256, SIZE, aliases=("num_local_experts",))
    top_k: int = key("num_experts_per_tok", 8, SIZE)
    n_shared_experts: int = key("n_shared_experts", 1, SIZE)
    n_group: int = key("n_group", 8, POSITIVE)
    topk_group: int = key("topk_group", 4, POSITIVE)
    first_k_dense: int = key("first_k_dense_replace", 3, FIRST_DENSE)  # beyond the layers: all dense
    norm_topk_prob: bool = key("norm_topk_prob", True, TRUTHY)
    routed_scaling_factor: float = key("routed_scaling_factor", 2.5, SCALE)
    n_positions: int = key("max_position_embeddings", 4096, SIZE)
    norm_eps: float = eps("rms_norm_eps", 1e-6)
    hidden_act: str = key("hidden_act", "silu", ACTIVATION)
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None  # sorted (key, value) pairs: hashable
    sliding_window: None = None
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    # the multi-token-prediction layers the checkpoint keeps after the main model's (families/parts/mtp.py), which
    # draft beside it (count --mtp); the main model's logits are the same without them. Not in the ledger's "model":
    # a count without --mtp is the main model's alone
    n_mtp: int = key("num_mtp_layers", 1, COUNT, aliases=("num_nextn_predict_layers",), dict_key=None)
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 1, TOKENS)
    model_type: str = "deepseek_v3"

    what = "a DeepSeek-V3"
    classes = {"deepseek_v3": "DeepseekV3ForCausalLM"}
    checkpoint_kind = "DeepSeek-V3 model"  # what messages call a checkpoint of it
    # MLA gives every head its own k and v from the latent: num_key_value_heads is read by no layer here, and written
    # as the heads for transformers' eager attention (which would repeat them otherwise)
    groups = (
        RopeKeys(YARN_ROPE_TYPES, refused=("pretraining_tp", "partial_rotary_factor"), top_level=True),
        Written(lambda c: {"num_key_value_heads": c.n_head}),
    )
    # Options that change inference and are not computed here. (output_router_logits only adds an output.)
    refusals: ClassVar[tuple[Refusal, ...]] = (
        Refusal("attention_bias", "is not supported"),
        Refusal("layer_types", "is not supported (DeepSeek-V3's layers differ by first_k_dense_replace)"),
    )
    dict_last: ClassVar[tuple[str, ...]] = ("d_head", "d_value", "d_ff")

    def validate(self) -> None:
        if self.qk_rope_head_dim % 2:
            raise UserError(f"config qk_rope_head_dim={self.qk_rope_head_dim} must be even (rotary pairs)")
        check_router(self)

    @property
    def d_head(self) -> int:
        """A head's query and key width: qk_nope_head_dim + qk_rope_head_dim (192 in DeepSeek-V3)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def d_value(self) -> int:
        """A head's value width: v_head_dim (128 in DeepSeek-V3), not the keys' d_head."""
        return self.v_head_dim

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """The symbols of MLA and the experts, beside every family's (dh = dn + dr is the query/key width)."""
        return dict(
            dq=self.q_lora_rank or 0,
            dc=self.kv_lora_rank,
            dn=self.qk_nope_head_dim,
            dr=self.qk_rope_head_dim,
            dv=self.v_head_dim,
            Fe=self.moe_inner,
            Fs=self.d_shared,
        )

    def rope(self, layer: int = 0) -> Rope:
        """The rotary part of each head, qk_rope_head_dim numbers, and the shared rotary key."""
        return Rope(self.qk_rope_head_dim, self.rope_theta, self.rope_scaling, self.n_positions)

    @property
    def softmax_scale(self) -> float:
        """qk_head_dim^-0.5, times mscale^2 where a rope scaling sets mscale_all_dim (YaRN: 0.1 mscale_all_dim
        ln(factor) + 1, as transformers' yarn_apply_mscale)."""
        scale = self.d_head**-0.5
        rope = dict(self.rope_scaling or ())
        if rope.get("rope_type", "default") != "default" and rope.get("mscale_all_dim"):
            mscale = rotary.mscale(float(rope["factor"]), float(rope["mscale_all_dim"]))  # type: ignore[arg-type]
            scale = scale * mscale * mscale
        return scale

    def is_moe(self, layer: int) -> bool:
        return layer >= self.first_k_dense

    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        """ "dense" for the first first_k_dense_replace layers (a gated MLP), "moe" after (experts)."""
        return tuple("moe" if self.is_moe(i) else "dense" for i in range(self.n_layer))


def check_router(config) -> None:
    """A group-limited router's numbers (DeepSeek-V3's, Nemotron-H's): k of E experts, E in n_group groups of at least
    2 (the router sums each group's 2 best scores), k within the experts of the topk_group groups chosen."""
    E, k, groups, chosen = config.n_experts, config.top_k, config.n_group, config.topk_group
    check_experts(config)
    check_multiple(config, "n_experts", "n_group")
    if chosen > groups:
        raise UserError(f"config topk_group={chosen} exceeds n_group={groups}")
    if E // groups < 2:
        raise UserError(
            f"config n_group={groups} leaves fewer than 2 experts a group (the router sums each group's 2 best scores)"
        )
    if k > chosen * E // groups:
        raise UserError(f"config {config.key('top_k')}={k} exceeds the experts of topk_group={chosen} groups")


# deepseek-ai/DeepSeek-V3 (and -V3-0324, DeepSeek-R1: the same shapes), config.json: 61 layers (the first 3 dense),
# hidden 7168, dense MLP 18432, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128 + qk_rope 64, v 128,
# 256 routed experts of 2048 (8 a token, n_group 8, topk_group 4, norm_topk_prob, routed_scaling_factor 2.5), 1 shared
# expert, vocabulary 129280, rope_theta 10000, rms_norm_eps 1e-6, untied, bos 0, eos 1: DeepseekV3Config's defaults,
# which are DeepSeek-V3's; and 163840 positions with YaRN (factor 40 over 4096, beta_fast 32, beta_slow 1, mscale 1,
# mscale_all_dim 1). Its multi-token-prediction layer (num_nextn_predict_layers 1: layer 61 of the checkpoint) drafts
# beside the main model where asked (count --mtp), as transformers' generate(..., use_mtp=True).
YARN_40 = rope_scaling(4096, rope_type="yarn", factor=40, beta_fast=32, beta_slow=1, mscale=1.0, mscale_all_dim=1.0)
PRESETS: dict[str, DeepseekConfig] = {
    "deepseek-v3": DeepseekConfig(n_positions=163840, rope_scaling=YARN_40, name="deepseek-v3"),
}
