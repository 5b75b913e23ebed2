"""DeepSeek-V3's config, read from a Hugging Face config.json (transformers' DeepseekV3Config, with its defaults), and
the preset of the published model, from its config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import UserError
from .. import rotary
from ..config import (
    SUPPORTED_ACTIVATIONS,
    ModelConfig,
    check_dtype,
    check_model_type,
    either,
    flag,
    listed,
    number,
    rope_dict,
    token_ids,
)
from ..rotary import Rope

DEEPSEEK_MODEL_TYPES = ("deepseek_v3",)
# The rope types the forward pass computes (families/rotary.py): the default, linear and YaRN, DeepSeek-V3's own; any
# other reads and counts, but running it is refused by name (forward.py).
RUNNABLE_ROPE_TYPES = ("default", "linear", "yarn")


def _rope(hf: dict) -> dict:
    """rope_theta and the scaling as the Llama family reads them, and YaRN besides (DeepSeek-V3's own: read and
    counted, not run; RUNNABLE_ROPE_TYPES)."""
    key = "rope_scaling" if hf.get("rope_scaling") else "rope_parameters"
    rope = hf.get(key) or {}
    if isinstance(rope, dict) and rope.get("rope_type", rope.get("type")) == "yarn":
        rope = {k: v for k, v in rope.items() if k != "type"}
        rope["rope_type"] = "yarn"
        rope.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
        return rope
    return rotary.read(hf)


@dataclass(frozen=True)
class DeepseekConfig(ModelConfig):
    """A DeepSeek-V3: multi-head latent attention (q through a rank-q_lora_rank bottleneck, or one q_proj; k and v
    up-projected from a kv_lora_rank latent, a qk_rope_head_dim rotary key shared by the heads beside each head's
    qk_nope_head_dim), and after first_k_dense_replace dense layers, a mixture of n_experts routed experts of width
    moe_inner (top_k a token, chosen by group-limited sigmoid scores) beside n_shared_experts always-on ones."""

    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int  # intermediate_size: the dense layers' MLP width
    vocab_size: int
    moe_inner: int = 2048  # moe_intermediate_size: each expert's width (the shared experts': n_shared_experts x it)
    q_lora_rank: int | None = 1536  # None: q = h W_q in one product
    kv_lora_rank: int = 512
    qk_rope_head_dim: int = 64
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    rope_interleave: bool = True
    n_experts: int = 256  # n_routed_experts: E
    top_k: int = 8  # num_experts_per_tok: k
    n_shared_experts: int = 1
    n_group: int = 8
    topk_group: int = 4
    first_k_dense: int = 3  # first_k_dense_replace
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 2.5
    n_positions: int = 4096
    rms_norm_eps: float = 1e-6
    hidden_act: str = "silu"
    rope_theta: float = 10000.0
    rope_scaling: tuple[tuple[str, object], ...] | None = None  # sorted (key, value) pairs: hashable
    sliding_window: None = None
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 0
    eos_token_id: int | tuple[int, ...] | None = 1
    model_type: str = "deepseek_v3"
    name: str = field(default="deepseek_v3", compare=False)

    family = "deepseek_v3"
    json_keys = ModelConfig.json_keys | {"moe_inner": "moe_intermediate_size", "n_experts": "n_routed_experts",
                                         "first_k_dense": "first_k_dense_replace"}  # fmt: skip

    def __post_init__(self) -> None:
        self.require_positive("n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "moe_inner", "kv_lora_rank",
                              "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "n_experts", "top_k",
                              "n_shared_experts", "n_group", "topk_group", "n_positions")  # fmt: skip
        self.require_positive_number("routed_scaling_factor", "rms_norm_eps")
        if self.q_lora_rank is not None:
            self.require_positive("q_lora_rank")
        if self.qk_rope_head_dim % 2:
            raise UserError(f"config qk_rope_head_dim={self.qk_rope_head_dim} must be even (rotary pairs)")
        if self.top_k > self.n_experts:
            raise UserError(f"config num_experts_per_tok={self.top_k} exceeds n_routed_experts={self.n_experts}")
        if self.n_experts % self.n_group:
            raise UserError(f"config n_routed_experts={self.n_experts} is not a multiple of n_group={self.n_group}")
        if self.topk_group > self.n_group:
            raise UserError(f"config topk_group={self.topk_group} exceeds n_group={self.n_group}")
        if self.n_experts // self.n_group < 2:
            raise UserError(
                f"config n_group={self.n_group} leaves fewer than 2 experts a group (the router sums each "
                f"group's 2 best scores)"
            )
        if self.top_k > self.topk_group * self.n_experts // self.n_group:
            raise UserError(
                f"config num_experts_per_tok={self.top_k} exceeds the experts of topk_group={self.topk_group} groups"
            )
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UserError(f"config hidden_act={self.hidden_act!r} is not supported")
        if not isinstance(self.first_k_dense, int) or self.first_k_dense < 0:  # beyond the layers: all dense
            raise UserError(f"config first_k_dense_replace={self.first_k_dense!r} must be a whole number >= 0")

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "deepseek_v3") -> DeepseekConfig:
        """Read a transformers DeepseekV3Config dict (as config.json holds it), with DeepseekV3Config's defaults."""
        check_model_type(hf, DEEPSEEK_MODEL_TYPES, f"a DeepSeek-V3 ({', '.join(DEEPSEEK_MODEL_TYPES)})")
        if hf.get("layer_types"):
            raise UserError(
                "config layer_types is not supported (DeepSeek-V3's layers differ by first_k_dense_replace)"
            )
        return cls(**deepseek_fields(hf, name))

    @property
    def checkpoint_kind(self) -> str:
        return "DeepSeek-V3 model"

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (DeepseekV3Config's keys)."""
        return {
            "architectures": ["DeepseekV3ForCausalLM"],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.n_embd,
            "intermediate_size": self.n_inner,
            "moe_intermediate_size": self.moe_inner,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "num_key_value_heads": self.n_head,
            "n_shared_experts": self.n_shared_experts,
            "n_routed_experts": self.n_experts,
            "routed_scaling_factor": self.routed_scaling_factor,
            "kv_lora_rank": self.kv_lora_rank,
            "q_lora_rank": self.q_lora_rank,
            "qk_rope_head_dim": self.qk_rope_head_dim,
            "v_head_dim": self.v_head_dim,
            "qk_nope_head_dim": self.qk_nope_head_dim,
            "n_group": self.n_group,
            "topk_group": self.topk_group,
            "num_experts_per_tok": self.top_k,
            "first_k_dense_replace": self.first_k_dense,
            "norm_topk_prob": self.norm_topk_prob,
            "rope_interleave": self.rope_interleave,
            "max_position_embeddings": self.n_positions,
            "rms_norm_eps": self.rms_norm_eps,
            "hidden_act": self.hidden_act,
            "rope_parameters": rope_dict(self.rope_theta, self.rope_scaling),
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }

    @property
    def n_kv_head(self) -> int:  # type: ignore[override]
        """MLA: every query head has its own keys and values, up-projected from the one latent."""
        return self.n_head

    @property
    def d_head(self) -> int:
        """A head's query and key width: qk_nope_head_dim + qk_rope_head_dim (192 in DeepSeek-V3)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def d_value(self) -> int:
        """A head's value width: v_head_dim (128 in DeepSeek-V3), not the keys' d_head."""
        return self.v_head_dim

    @property
    def d_ff(self) -> int:
        return self.n_inner

    @property
    def d_shared(self) -> int:
        """The shared experts' width: n_shared_experts x moe_intermediate_size, one gated MLP."""
        return self.n_shared_experts * self.moe_inner

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

    @property
    def active_experts(self) -> int:
        return self.top_k

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

    @property
    def layer_types(self) -> tuple[str, ...]:
        """ "dense" for the first first_k_dense_replace layers (a gated MLP), "moe" after (experts)."""
        return tuple("moe" if self.is_moe(i) else "dense" for i in range(self.n_layer))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["rope_scaling"] = None if self.rope_scaling is None else dict(self.rope_scaling)
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, **d, "d_head": self.d_head, "d_value": self.d_value, "d_ff": self.d_ff}


def deepseek_fields(hf: dict, name: str, context: int = 4096) -> dict:
    """DeepseekConfig's fields from a config.json of the DeepSeek-V3 layout (DeepSeek-V3.2's too), with
    DeepseekV3Config's defaults (`context`: max_position_embeddings', which DeepseekV32Config's differs from), every
    option that changes inference and is not computed refused by name."""
    check_dtype(hf)
    if hf.get("quantization_config"):  # DeepSeek-V3's published weights are fp8 blocks with scales
        method = (
            hf["quantization_config"].get("quant_method", "?") if isinstance(hf["quantization_config"], dict) else "?"
        )
        raise UserError(f"config quantization_config ({method}) is not supported: dequantize the weights first")
    rope = _rope(hf)
    rotary.refuse_partial(hf, rope, ("pretraining_tp", "partial_rotary_factor"))
    # Options that change inference and are not computed here: refused by name. (output_router_logits only adds
    # an output; num_nextn_predict_layers / num_mtp_layers name the multi-token-prediction module, which
    # transformers does not build: the logits are the base model's; num_key_value_heads is not read by MLA,
    # whose every head has its own k and v from the latent.)
    if hf.get("attention_bias"):
        raise UserError("config attention_bias=true is not supported")
    theta = rope.pop("rope_theta")
    # rope_interleave and norm_topk_prob: null reads as false, as transformers' `if config.rope_interleave` does
    first = hf.get("first_k_dense_replace", 3)
    return dict(
        n_layer=hf.get("num_hidden_layers", 61),
        n_head=hf.get("num_attention_heads", 128),
        n_embd=hf.get("hidden_size", 7168),
        n_inner=hf.get("intermediate_size", 18432),
        vocab_size=hf.get("vocab_size", 129280),
        moe_inner=hf.get("moe_intermediate_size", 2048),
        q_lora_rank=hf.get("q_lora_rank", 1536),
        kv_lora_rank=hf.get("kv_lora_rank", 512),
        qk_rope_head_dim=hf.get("qk_rope_head_dim", 64),
        qk_nope_head_dim=hf.get("qk_nope_head_dim", 128),
        v_head_dim=hf.get("v_head_dim", 128),
        rope_interleave=bool(hf.get("rope_interleave", True)),
        n_experts=either(hf, ("n_routed_experts", "num_local_experts"), 256),
        top_k=hf.get("num_experts_per_tok", 8),
        n_shared_experts=hf.get("n_shared_experts", 1),
        n_group=hf.get("n_group", 8),
        topk_group=hf.get("topk_group", 4),
        first_k_dense=0 if first is None else first,
        norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
        routed_scaling_factor=number(hf, "routed_scaling_factor", 2.5),
        n_positions=hf.get("max_position_embeddings", context),
        rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
        hidden_act=hf.get("hidden_act", "silu"),
        rope_theta=theta,
        rope_scaling=rotary.scaling(rope),
        tie_word_embeddings=flag(hf, "tie_word_embeddings"),
        bos_token_id=hf.get("bos_token_id", 0),
        eos_token_id=token_ids(hf.get("eos_token_id", 1)),
        model_type=hf.get("model_type"),
        name=name,
    )


# deepseek-ai/DeepSeek-V3 (and -V3-0324, DeepSeek-R1: the same shapes), config.json: 61 layers (the first 3 dense),
# hidden 7168, dense MLP 18432, 128 heads, q_lora_rank 1536, kv_lora_rank 512, qk_nope 128 + qk_rope 64, v 128,
# 256 routed experts of 2048 (8 a token, n_group 8, topk_group 4, norm_topk_prob, routed_scaling_factor 2.5), 1 shared
# expert, vocabulary 129280, 163840 positions with YaRN (factor 40 over 4096, beta_fast 32, beta_slow 1, mscale 1,
# mscale_all_dim 1), rope_theta 10000, rms_norm_eps 1e-6, untied, bos 0, eos 1. Its multi-token-prediction layer
# (num_nextn_predict_layers 1: layer 61 of the checkpoint) is not part of the model here, nor of transformers'.
PRESETS: dict[str, DeepseekConfig] = {
    "deepseek-v3": DeepseekConfig(
        n_layer=61, n_head=128, n_embd=7168, n_inner=18432, vocab_size=129280, moe_inner=2048, q_lora_rank=1536,
        kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_experts=256, top_k=8,
        n_shared_experts=1, n_group=8, topk_group=4, first_k_dense=3, norm_topk_prob=True, routed_scaling_factor=2.5,
        n_positions=163840, rms_norm_eps=1e-6, rope_theta=10000.0, rope_scaling=(
            ("beta_fast", 32), ("beta_slow", 1), ("factor", 40), ("mscale", 1.0), ("mscale_all_dim", 1.0),
            ("original_max_position_embeddings", 4096), ("rope_type", "yarn"),
        ), bos_token_id=0, eos_token_id=1, name="deepseek-v3",
    ),
}  # fmt: skip
