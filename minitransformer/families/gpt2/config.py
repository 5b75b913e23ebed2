"""GPT-2's config: the numbers that fix its shapes and arithmetic, as a Hugging Face config.json states them (each
field under its key, with transformers' GPT2Config default), and the presets of well-known GPT-2-shaped models."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...errors import UserError
from ..config import ModelConfig, check_multiple, read_config_json
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, POSITIVE, SIZE, TOKENS, Refusal, eps, key, unnoted


@dataclass(frozen=True)
class GPT2Config(ModelConfig):
    # its depth and width the file must give: defaulting them to GPT-2 small's would only end in a complaint about some
    # tensor of the checkpoint (old checkpoints spell them as GPT2Config's attribute_map does)
    n_layer: int = key("n_layer", 12, LAYER_COUNT, aliases=("num_hidden_layers",), required=True)
    n_head: int = key("n_head", 12, SIZE, aliases=("num_attention_heads",), required=True)
    n_embd: int = key("n_embd", 768, SIZE, aliases=("hidden_size",), required=True)
    n_inner: int | None = key("n_inner", None, SIZE.or_null("a positive integer or null"))  # None: 4 n_embd
    n_positions: int = key("n_positions", 1024, SIZE, aliases=("max_position_embeddings",))
    vocab_size: int = key("vocab_size", 50257, SIZE)
    norm_eps: float = eps("layer_norm_epsilon", 1e-5)
    activation_function: str = key("activation_function", "gelu_new", ACTIVATION)
    scale_attn_weights: bool = key("scale_attn_weights", True, FLAG)
    scale_attn_by_inverse_layer_idx: bool = key("scale_attn_by_inverse_layer_idx", False, FLAG)
    # Read and not acted on. In transformers it changes rounding only, in eager attention only (SDPA,
    # the default, ignores it): Q K^T in float32 with the scale folded into the product. We compute in
    # float32 throughout and scale the scores right after Q K^T (forward.scale_scores), whatever this says;
    # tests/families/test_gpt2_transformers.py holds that to transformers' eager reordered path within 1e-4.
    reorder_and_upcast_attn: bool = key("reorder_and_upcast_attn", False, FLAG)
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    bos_token_id: int | None = key("bos_token_id", 50256, TOKENS)
    eos_token_id: int | None = key("eos_token_id", 50256, TOKENS)

    what = "a GPT-2 model"
    model_type = "gpt2"
    classes = {"gpt2": "GPT2LMHeadModel"}
    checkpoint_kind = "GPT-2"  # what messages call a checkpoint of it
    refusals = (Refusal("add_cross_attention", "(an encoder-decoder GPT-2) is not supported"),)
    dict_last = ("d_head", "n_kv_head", "d_ff")
    sliding_window = None  # every position attends to every earlier one

    def validate(self) -> None:
        check_multiple(self, "n_embd", "n_head")

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str | None = None) -> GPT2Config:
        config = super().from_hf_dict(hf, name)
        n_ctx = unnoted(hf, "n_ctx")  # old checkpoints' context, which the position table must hold
        if n_ctx is not None:
            POSITIVE.check("n_ctx", n_ctx)
            if n_ctx > config.n_positions:
                raise UserError(f"config n_ctx={n_ctx} exceeds n_positions={config.n_positions}")
        return config

    @property
    def d_ff(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    @classmethod
    def from_json(cls, path: Path, name: str | None = None) -> GPT2Config:
        hf = read_config_json(path)
        if hf.get("model_type", "gpt2") != "gpt2":
            raise UserError(f"{path} describes a {hf['model_type']} model, not a GPT-2")
        return cls.from_hf_dict(hf, name=name or Path(path).parent.name)


# Shapes of well-known models, for counting without weights (and for the download list).
PRESETS: dict[str, GPT2Config] = {
    "gpt2": GPT2Config(name="gpt2"),
    "gpt2-medium": GPT2Config(n_layer=24, n_head=16, n_embd=1024, name="gpt2-medium"),
    "gpt2-large": GPT2Config(n_layer=36, n_head=20, n_embd=1280, name="gpt2-large"),
    "gpt2-xl": GPT2Config(n_layer=48, n_head=25, n_embd=1600, name="gpt2-xl"),
    "distilgpt2": GPT2Config(n_layer=6, name="distilgpt2"),
    "gpt3-175b": GPT2Config(n_layer=96, n_head=96, n_embd=12288, n_positions=2048, name="gpt3-175b"),
}
