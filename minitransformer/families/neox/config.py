"""The GPT-NeoX family's config (GPT-NeoX-20B, Pythia): each field under its config.json key with transformers'
GPTNeoXConfig default, and the presets of the Pythia models, from each one's published config.json."""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import UserError
from ..config import ModelConfig, check_multiple, heads_of_width
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, SIZE, TOKENS, eps, key
from ..rotary import Rope, RopeKeys


@dataclass(frozen=True)
class NeoXConfig(ModelConfig):
    """A GPT-NeoX decoder (model_type gpt_neox).

    Against GPT-2: no position table, q and k rotated instead, and only the first rotary_pct of each head's
    numbers; q, k and v from one fused product laid out head by head ([H, 3, dh], not [3, H, dh]); attention and
    MLP side by side on the same x (use_parallel_residual, the default) rather than one after the other; an
    untied unembedding (embed_out) by default. LayerNorms with biases and biased products, as GPT-2's.
    """

    # the shapes, which a file must give
    n_layer: int = key("num_hidden_layers", kind=LAYER_COUNT)
    n_head: int = key("num_attention_heads", kind=SIZE)
    n_embd: int = key("hidden_size", kind=SIZE)
    n_inner: int = key("intermediate_size", kind=SIZE)  # the MLP width
    vocab_size: int = key("vocab_size", kind=SIZE)
    n_positions: int = key("max_position_embeddings", 2048, SIZE)
    norm_eps: float = eps("layer_norm_eps", 1e-5)
    hidden_act: str = key("hidden_act", "gelu", ACTIVATION)
    rotary_pct: float = 0.25  # the share of each head's numbers that rotary turns (partial_rotary_factor)
    rope_theta: float = 10000.0  # rotary_emb_base in older files
    use_parallel_residual: bool = key("use_parallel_residual", True, FLAG)  # x + attn(ln1(x)) + mlp(ln2(x))
    attention_bias: bool = key("attention_bias", True, FLAG)  # biases of query_key_value and dense (the MLP's always)
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    model_type: str = "gpt_neox"

    family = "neox"
    what = "a GPT-NeoX model"
    classes = {"gpt_neox": "GPTNeoXForCausalLM"}
    checkpoint_kind = "GPT-NeoX model"  # what messages call a checkpoint of it
    # transformers 5's rope_parameters (a non-empty rope_scaling before it), else an older file's rotary_pct and
    # rotary_emb_base; the default rope only
    groups = (
        RopeKeys(("default",), refused=(), theta_key="rotary_emb_base", share=("rotary_pct", "rotary_pct", 0.25)),
    )
    refusals = (heads_of_width(),)
    dict_last = ("d_head", "n_kv_head", "d_ff", "rotary_dims")
    sliding_window = None  # every position attends to every earlier one

    def validate(self) -> None:
        check_multiple(self, "n_embd", "n_head")
        pct = self.rotary_pct
        if isinstance(pct, bool) or not isinstance(pct, (int, float)) or pct < 0:
            raise UserError(f"config partial_rotary_factor (rotary_pct) must be a number from 0 to 1, not {pct!r}")
        if self.rotary_dims > self.d_head:  # an odd share rounds up to whole pairs: past the head when it is all
            raise UserError(
                f"config partial_rotary_factor={pct} of a head of {self.d_head} rotates "
                f"{self.rotary_dims} numbers, more than the head has"
            )

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


# Shapes of well-known models, for counting without weights: each from its published config.json
# (EleutherAI/pythia-70m ... pythia-12b, EleutherAI/gpt-neox-20b). Each, as a Pythia model: MLP 4 D, rotary on a quarter of
# each head (rotary_pct 0.25, rotary_emb_base 10,000), parallel residual, untied embed_out, a 2,048-token context,
# bos = eos = 0; each one's layers, width, heads and vocabulary. GPT-NeoX-20B's MLP is GELU's tanh approximation,
# "hidden_act": "gelu_fast" (its config.json as copies quote it beside its 6,144 x 24,576, 64 heads: a GPT-NeoX
# client's cfg, GitHub id 13240137420; Huawei atb_llm's GPTNeoXConfig defaults), Pythia's the exact GELU.
PRESETS: dict[str, NeoXConfig] = {
    name: NeoXConfig(
        n_layer=L,
        n_head=H,
        n_embd=D,
        n_inner=4 * D,
        vocab_size=V,
        bos_token_id=0,
        eos_token_id=0,
        name=name,
        hidden_act="gelu_fast" if name == "gpt-neox-20b" else "gelu",
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
