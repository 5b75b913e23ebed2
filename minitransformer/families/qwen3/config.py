"""The Qwen3 config, read from a Hugging Face config.json (transformers' Qwen3Config and its defaults), and the presets
of the Qwen3 dense models, from each model's published config.json.

Against the Llama family's config (families/llama/config.py): head_dim is its own number (128 unless the config says
otherwise), attention_bias puts biases on q, k, v and o alike, and a sliding window applies to the layers that
`layer_types` (or use_sliding_window and max_window_layers) name, not to every layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ...errors import UserError
from ..config import check_positive, flag
from ..llama.config import LlamaConfig, _rope_parameters

QWEN3_MODEL_TYPES = ("qwen3",)
LAYER_KINDS = ("full_attention", "sliding_attention")


@dataclass(frozen=True)
class Qwen3Config(LlamaConfig):
    """A Qwen3 decoder: the Llama block, with q and k RMS-normalised per head (gains of dh) before the rotation.

    `sliding_window` is the window of the layers that have one; `layer_kinds` says which (None: every layer,
    if there is a window).
    """

    layer_kinds: tuple[str, ...] | None = None  # transformers' layer_types, where the layers differ
    model_type: str = "qwen3"
    name: str = field(default="qwen3", compare=False)

    family = "qwen3"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layer_kinds is not None:
            if len(self.layer_kinds) != self.n_layer:
                raise UserError(f"config layer_types has {len(self.layer_kinds)} entries for "
                                f"num_hidden_layers={self.n_layer}")  # fmt: skip
            unknown = sorted(set(self.layer_kinds) - set(LAYER_KINDS))
            if unknown:
                raise UserError(f"config layer_types {', '.join(map(repr, unknown))} is not supported "
                                f"(supported: {', '.join(LAYER_KINDS)})")  # fmt: skip

    @property
    def layer_types(self) -> tuple[str, ...]:
        return self.layer_kinds if self.layer_kinds is not None else super().layer_types

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if self.layer_types[layer] == "sliding_attention" else None

    def prefix(self, n_layer: int) -> Qwen3Config:
        kinds = None if self.layer_kinds is None else self.layer_kinds[:n_layer]
        return replace(self, n_layer=n_layer, layer_kinds=kinds)

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["layer_kinds"] = None if self.layer_kinds is None else list(self.layer_kinds)
        return d

    def to_hf_dict(self) -> dict:
        window = self.sliding_window is not None
        return super().to_hf_dict() | {
            "head_dim": self.d_head, "attention_bias": self.qkv_bias, "use_sliding_window": window,
            "sliding_window": self.sliding_window, "layer_types": list(self.layer_types),
        }  # fmt: skip

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "qwen3") -> Qwen3Config:
        """Read a transformers Qwen3Config dict (as config.json holds it), with Qwen3Config's defaults."""
        if hf.get("model_type") not in QWEN3_MODEL_TYPES:
            raise UserError(f"config model_type={hf.get('model_type')!r} is not a Qwen3 model")
        dtype = hf.get("dtype", hf.get("torch_dtype"))
        if dtype not in (None, "float32", "float16", "bfloat16"):
            raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")
        if "head_dim" in hf and hf["head_dim"] is None:
            raise UserError("config head_dim=None: a Qwen3 model needs its head size (Qwen3Config's default is 128)")
        rope = _rope_parameters(hf)
        value = rope.pop("partial_rotary_factor", None)
        if value not in (None, 1, 1.0):
            raise UserError(f"config partial_rotary_factor={value!r} is not supported")
        theta = rope.pop("rope_theta")
        # As Qwen3Config reads them: the window exists only under use_sliding_window; layer_types, when absent, makes
        # the layers from max_window_layers on sliding ones.
        use_window = flag(hf, "use_sliding_window")
        window = hf.get("sliding_window", 4096) if use_window else None
        n_layer = hf.get("num_hidden_layers", 32)
        check_positive("num_hidden_layers", n_layer)
        kinds = hf.get("layer_types")
        if kinds is None:
            first = hf.get("max_window_layers", 28)
            if not isinstance(first, int) or isinstance(first, bool):
                raise UserError(f"config max_window_layers must be an integer, not {first!r}")
            kinds = ["sliding_attention" if window is not None and i >= first else "full_attention"
                     for i in range(n_layer)]  # fmt: skip
        if not isinstance(kinds, list) or len(kinds) != n_layer or not set(kinds) <= set(LAYER_KINDS):
            raise UserError(f"config layer_types={kinds!r} is not supported: one of {', '.join(LAYER_KINDS)} for each "
                            f"of the {n_layer} layers")  # fmt: skip
        if window is None and "sliding_attention" in kinds:
            raise UserError("config layer_types has sliding_attention layers but use_sliding_window is false "
                            "(no window for them): set use_sliding_window or make those layers full_attention")  # fmt: skip
        if window is not None and "sliding_attention" not in kinds:
            window = None  # no layer uses it (max_window_layers >= num_hidden_layers)
        n_head = hf.get("num_attention_heads", 32)
        n_kv_head = hf.get("num_key_value_heads", 32)
        bias = flag(hf, "attention_bias")
        eos = hf.get("eos_token_id")
        return cls(
            n_layer=n_layer, n_head=n_head, n_embd=hf.get("hidden_size", 4096),
            n_inner=hf.get("intermediate_size", 22016), vocab_size=hf.get("vocab_size", 151936),
            n_kv_head=n_head if n_kv_head is None else n_kv_head, head_dim=hf.get("head_dim", 128),
            n_positions=hf.get("max_position_embeddings", 32768), rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            hidden_act=hf.get("hidden_act", "silu"), rope_theta=theta,
            rope_scaling=tuple(sorted(rope.items())) if rope.get("rope_type", "default") != "default" else None,
            qkv_bias=bias, o_bias=bias, sliding_window=window,
            layer_kinds=None if len(set(kinds)) == 1 else tuple(kinds),  # one kind: sliding_window says which
            tie_word_embeddings=flag(hf, "tie_word_embeddings"), bos_token_id=hf.get("bos_token_id"),
            eos_token_id=tuple(eos) if isinstance(eos, list) else eos, name=name,
        )  # fmt: skip


def _qwen3(name: str, n_layer: int, n_head: int, n_kv_head: int, n_embd: int, n_inner: int, tied: bool,
           n_positions: int = 40960) -> Qwen3Config:  # fmt: skip
    """A Qwen3 dense model as its config.json states it: head_dim 128, rope_theta 1,000,000, vocabulary 151,936,
    rms_norm_eps 1e-6, no biases, no sliding window (use_sliding_window false), bos 151643, eos 151645."""
    return Qwen3Config(n_layer=n_layer, n_head=n_head, n_kv_head=n_kv_head, head_dim=128, n_embd=n_embd,
                       n_inner=n_inner, vocab_size=151936, n_positions=n_positions, rms_norm_eps=1e-6,
                       rope_theta=1000000.0, tie_word_embeddings=tied, bos_token_id=151643, eos_token_id=151645,
                       name=name)  # fmt: skip


# The Qwen3 dense models, from the config.json of Qwen/Qwen3-0.6B, -1.7B, -4B, -8B, -14B and -32B.
PRESETS: dict[str, Qwen3Config] = {
    "qwen3-0.6b": _qwen3("qwen3-0.6b", 28, 16, 8, 1024, 3072, tied=True),
    "qwen3-1.7b": _qwen3("qwen3-1.7b", 28, 16, 8, 2048, 6144, tied=True),
    "qwen3-4b": _qwen3("qwen3-4b", 36, 32, 8, 2560, 9728, tied=True),
    "qwen3-8b": _qwen3("qwen3-8b", 36, 32, 8, 4096, 12288, tied=False),
    "qwen3-14b": _qwen3("qwen3-14b", 40, 40, 8, 5120, 17408, tied=False),
    "qwen3-32b": _qwen3("qwen3-32b", 64, 64, 8, 5120, 25600, tied=False),
}
