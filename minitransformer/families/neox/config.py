"""The GPT-NeoX family's config (GPT-NeoX-20B, Pythia), read from a Hugging Face config.json, and the presets of the
Pythia models, from each one's published config.json."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...errors import UserError
from .. import rotary
from ..config import (
    ModelConfig,
    check_activation,
    check_dtype,
    check_model_type,
    flag,
    listed,
    rope_dict,
    token_ids,
)
from ..rotary import Rope


@dataclass(frozen=True)
class NeoXConfig(ModelConfig):
    """A GPT-NeoX decoder (model_type gpt_neox).

    Against GPT-2: no position table, q and k rotated instead, and only the first rotary_pct of each head's
    numbers; q, k and v from one fused product laid out head by head ([H, 3, dh], not [3, H, dh]); attention and
    MLP side by side on the same x (use_parallel_residual, the default) rather than one after the other; an
    untied unembedding (embed_out) by default. LayerNorms with biases and biased products, as GPT-2's.
    """

    n_layer: int
    n_head: int
    n_embd: int
    n_inner: int  # intermediate_size: the MLP width
    vocab_size: int
    n_positions: int = 2048
    layer_norm_eps: float = 1e-5
    hidden_act: str = "gelu"
    rotary_pct: float = 0.25  # the share of each head's numbers that rotary turns (partial_rotary_factor)
    rope_theta: float = 10000.0  # rotary_emb_base
    use_parallel_residual: bool = True  # x + attn(ln1(x)) + mlp(ln2(x)); false: one after the other
    attention_bias: bool = True  # biases of query_key_value and dense (the MLP always has them)
    tie_word_embeddings: bool = False
    bos_token_id: int | None = 0
    eos_token_id: int | tuple[int, ...] | None = 2
    model_type: str = "gpt_neox"
    name: str = field(default="gpt_neox", compare=False)

    family = "neox"
    sliding_window = None  # every position attends to every earlier one

    def __post_init__(self) -> None:
        self.require_positive("n_layer", "n_head", "n_embd", "n_inner", "vocab_size", "n_positions")
        if self.n_embd % self.n_head:
            raise UserError(f"config hidden_size={self.n_embd} is not divisible by num_attention_heads={self.n_head}")
        check_activation(self.key("hidden_act"), self.hidden_act)
        self.require_positive_number("layer_norm_eps", "rope_theta")
        pct = self.rotary_pct
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or pct < 0:
            raise UserError(f"config partial_rotary_factor (rotary_pct) must be a number from 0 to 1, not {pct!r}")
        if self.rotary_dims > self.d_head:  # an odd share rounds up to whole pairs: past the head when it is all
            raise UserError(
                f"config partial_rotary_factor={pct} of a head of {self.d_head} rotates "
                f"{self.rotary_dims} numbers, more than the head has"
            )

    @property
    def checkpoint_kind(self) -> str:
        return "GPT-NeoX model"

    @property
    def d_head(self) -> int:
        return self.n_embd // self.n_head

    @property
    def d_ff(self) -> int:
        return self.n_inner

    @property
    def n_kv_head(self) -> int:  # type: ignore[override]  # a field in families whose heads share keys
        return self.n_head  # each head has keys and values of its own

    @property
    def rotary_share(self) -> int:
        """int(dh x rotary_pct), as transformers rounds it: the frequencies are 1 / theta^(2i / this)."""
        return int(self.d_head * self.rotary_pct)

    @property
    def rotary_dims(self) -> int:
        """The numbers of each head that rotary turns: one pair per frequency (the share, rounded up to pairs)."""
        return self.rope().turned

    def rope(self, layer: int = 0) -> Rope:
        """The default rope over the rotated share of each head: frequencies 1 / theta^(2i / share)."""
        return Rope(self.rotary_share, self.rope_theta, None, self.n_positions)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["eos_token_id"] = listed(self.eos_token_id)
        return {
            "family": self.family,
            **d,
            "d_head": self.d_head,
            "n_kv_head": self.n_kv_head,
            "d_ff": self.d_ff,
            "rotary_dims": self.rotary_dims,
        }

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (GPTNeoXConfig's keys)."""
        return {
            "architectures": ["GPTNeoXForCausalLM"],
            "model_type": "gpt_neox",
            "vocab_size": self.vocab_size,
            "hidden_size": self.n_embd,
            "intermediate_size": self.n_inner,
            "num_hidden_layers": self.n_layer,
            "num_attention_heads": self.n_head,
            "max_position_embeddings": self.n_positions,
            "layer_norm_eps": self.layer_norm_eps,
            "hidden_act": self.hidden_act,
            "rope_parameters": rope_dict(self.rope_theta, partial_rotary_factor=self.rotary_pct),
            "use_parallel_residual": self.use_parallel_residual,
            "attention_bias": self.attention_bias,
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id),
        }

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "gpt_neox") -> NeoXConfig:
        """Read a transformers GPTNeoXConfig dict (as config.json holds it), with transformers' defaults."""
        check_model_type(hf, ("gpt_neox",), "a GPT-NeoX model ('gpt_neox')")
        missing = [
            k
            for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
            if hf.get(k) is None
        ]
        if missing:
            raise UserError(f"config.json lacks {', '.join(missing)}: a gpt_neox model needs its shapes spelled out")
        check_dtype(hf)
        head_dim = hf.get("head_dim")  # not GPT-NeoX's: its rotary would read it, its attention would not
        if head_dim is not None and head_dim * hf["num_attention_heads"] != hf["hidden_size"]:
            raise UserError(
                f"config head_dim={head_dim!r} other than hidden_size / num_attention_heads is not supported"
            )
        rope = _rope_parameters(hf)
        return cls(
            n_layer=hf["num_hidden_layers"],
            n_head=hf["num_attention_heads"],
            n_embd=hf["hidden_size"],
            n_inner=hf["intermediate_size"],
            vocab_size=hf["vocab_size"],
            n_positions=hf.get("max_position_embeddings", 2048),
            layer_norm_eps=hf.get("layer_norm_eps", 1e-5),
            hidden_act=hf.get("hidden_act", "gelu"),
            rotary_pct=rope["partial_rotary_factor"],
            rope_theta=rope["rope_theta"],
            use_parallel_residual=flag({"use_parallel_residual": True} | hf, "use_parallel_residual"),
            attention_bias=flag({"attention_bias": True} | hf, "attention_bias"),
            tie_word_embeddings=flag(hf, "tie_word_embeddings"),
            bos_token_id=hf.get("bos_token_id", 0),
            eos_token_id=token_ids(hf.get("eos_token_id", 2)),
            name=name,
        )


def _rope_parameters(hf: dict) -> dict:
    """rope_theta and partial_rotary_factor as GPTNeoXConfig reads them: from a non-empty rope_scaling, else
    rope_parameters (transformers 5), else the old top-level rotary_emb_base and rotary_pct, else 10,000 and 0.25.
    Only the default rope (no scaling) is computed; any other type is refused by name."""
    rope = rotary.read(hf, ("default",), theta_key="rotary_emb_base")
    if rope.get("partial_rotary_factor") is None:
        rope["partial_rotary_factor"] = hf["rotary_pct"] if hf.get("rotary_pct") is not None else 0.25
    return rope


# Shapes of well-known models, for counting without weights: each from its published config.json
# (EleutherAI/pythia-70m ... pythia-12b, EleutherAI/gpt-neox-20b). Each, as a Pythia model: MLP 4 D, rotary on a quarter of
# each head (rotary_pct 0.25, rotary_emb_base 10,000), parallel residual, untied embed_out, a 2,048-token context,
# bos = eos = 0; each one's layers, width, heads and vocabulary.
PRESETS: dict[str, NeoXConfig] = {
    name: NeoXConfig(
        n_layer=L, n_head=H, n_embd=D, n_inner=4 * D, vocab_size=V, bos_token_id=0, eos_token_id=0, name=name
    )
    for name, L, D, H, V in (
        ("pythia-70m", 6, 512, 8, 50304),
        ("pythia-160m", 12, 768, 12, 50304),
        ("pythia-410m", 24, 1024, 16, 50304),
        ("pythia-1b", 16, 2048, 8, 50304),
        ("pythia-1.4b", 24, 2048, 16, 50304),
        ("pythia-2.8b", 32, 2560, 32, 50304),
        ("pythia-6.9b", 32, 4096, 32, 50432),
        ("pythia-12b", 36, 5120, 40, 50688),
        ("gpt-neox-20b", 44, 6144, 64, 50432),  # the same shapes: MLP 4 D (24,576)
    )
}
