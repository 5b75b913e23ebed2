"""GPT-2's config: the numbers that fix its shapes and arithmetic, read from a Hugging Face config.json, and
the presets of well-known GPT-2-shaped models."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from ...errors import UserError
from ..config import SUPPORTED_ACTIVATIONS, ModelConfig, either, read_config_json


@dataclass(frozen=True)
class GPT2Config(ModelConfig):
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    n_inner: int | None = None  # MLP width; None means 4 * n_embd
    n_positions: int = 1024
    vocab_size: int = 50257
    layer_norm_epsilon: float = 1e-5
    activation_function: str = "gelu_new"
    scale_attn_weights: bool = True
    scale_attn_by_inverse_layer_idx: bool = False
    # Read and not acted on. In transformers it changes rounding only, in eager attention only (SDPA,
    # the default, ignores it): Q K^T in float32 with the scale folded into the product. We compute in
    # float32 throughout and scale the scores right after Q K^T (forward.scale_scores), whatever this says;
    # tests/families/test_gpt2_transformers.py holds that to transformers' eager reordered path within 1e-4.
    reorder_and_upcast_attn: bool = False
    tie_word_embeddings: bool = True
    bos_token_id: int | None = 50256
    eos_token_id: int | None = 50256
    name: str = field(default="gpt2", compare=False)

    family = "gpt2"
    json_keys = {}  # its fields are its config.json's keys
    sliding_window = None  # every position attends to every earlier one

    def __post_init__(self) -> None:
        for key in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UserError(f"config {key} must be a positive integer, not {value!r}")
        if self.n_inner is not None and (not isinstance(self.n_inner, int) or self.n_inner < 1):
            raise UserError(f"config n_inner must be a positive integer or null, not {self.n_inner!r}")
        if self.n_embd % self.n_head:
            raise UserError(f"config n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if self.activation_function not in SUPPORTED_ACTIVATIONS:
            raise UserError(
                f"config activation_function={self.activation_function!r} is not supported "
                f"(supported: {', '.join(SUPPORTED_ACTIVATIONS)})"
            )
        if not isinstance(self.layer_norm_epsilon, (int, float)) or not self.layer_norm_epsilon > 0:
            raise UserError(f"config layer_norm_epsilon must be a positive number, not {self.layer_norm_epsilon!r}")
        for key in ("scale_attn_weights", "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn",
                    "tie_word_embeddings"):  # fmt: skip
            if not isinstance(getattr(self, key), bool):
                raise UserError(f"config {key} must be true or false, not {getattr(self, key)!r}")

    @property
    def checkpoint_kind(self) -> str:
        """What a checkpoint of this config is called in messages."""
        return "GPT-2"

    @property
    def d_head(self) -> int:
        return self.n_embd // self.n_head

    @property
    def d_ff(self) -> int:
        return self.n_inner if self.n_inner is not None else 4 * self.n_embd

    @property
    def n_kv_head(self) -> int:  # type: ignore[override]  # a field in families whose heads share keys
        return self.n_head  # each head has keys and values of its own

    def to_dict(self) -> dict:
        return {
            "family": self.family,
            **asdict(self),
            "d_head": self.d_head,
            "n_kv_head": self.n_kv_head,
            "d_ff": self.d_ff,
        }

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (GPT2Config's keys, every one spelled out)."""
        d = {k: v for k, v in asdict(self).items() if k != "name"}
        return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", **d}

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "gpt2") -> GPT2Config:
        """Read a transformers config.json dict, refusing what would change inference unseen."""
        if hf.get("model_type", "gpt2") != "gpt2":
            raise UserError(f"config model_type={hf.get('model_type')!r} is not a GPT-2 model (model_type 'gpt2')")
        if hf.get("add_cross_attention"):
            raise UserError("config add_cross_attention=true (an encoder-decoder GPT-2) is not supported")
        if hf.get("n_ctx") is not None and hf.get("n_positions") is not None and hf["n_ctx"] > hf["n_positions"]:
            raise UserError(f"config n_ctx={hf['n_ctx']} exceeds n_positions={hf['n_positions']}")
        dtype = hf.get("dtype", hf.get("torch_dtype"))
        if dtype not in (None, "float32", "float16", "bfloat16"):
            raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")
        # Old checkpoints spell the width and depth differently.
        spellings = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
                     "n_positions": "max_position_embeddings"}  # fmt: skip
        # The other fields have GPT-2's defaults, as in transformers; these fix the shapes, and defaulting
        # them to GPT-2 small's would only end in a complaint about some tensor of the checkpoint.
        missing = [key for key in ("n_layer", "n_head", "n_embd") if key not in hf and spellings[key] not in hf]
        if missing:
            raise UserError(
                f"config has no {', '.join(missing)} (the model's shapes); every GPT-2 config.json gives "
                f"n_layer, n_head and n_embd"
            )
        defaults = asdict(cls())
        fields = {key: either(hf, (key, spellings[key]) if key in spellings else (key,), default)
                  for key, default in defaults.items() if key != "name"}  # fmt: skip
        return cls(**fields, name=name)

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
