"""Mamba-2's config, read from a Hugging Face config.json (transformers' Mamba2Config, with its defaults), the shapes
of its mixer that Nemotron-H shares (`MixerShapes`), and the preset of a published model, from its config.json."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ...engine.kvcache import State
from ...errors import UserError
from ..config import SUPPORTED_ACTIVATIONS, ModelConfig, check_dtype, flag, listed, token_ids

MAMBA2_MODEL_TYPES = ("mamba2",)
# A state-space model attends to no positions and transformers' Mamba2Config has no context length; minitransformer
# needs one for its checks and its sweeps over the context (count, memory). This is that bound, not the model's.
UNBOUNDED_CONTEXT = 1 << 20


class MixerShapes:
    """The widths of a Mamba-2 mixer, from the fields both Mamba-2's and Nemotron-H's configs have: ssm_heads (Hs)
    heads of ssm_head_dim (P), a state of state_size (N) for each, B and C shared by the heads of each of n_groups
    (Ng) groups, a causal conv of conv_kernel (K) positions."""

    n_embd: int
    ssm_heads: int
    ssm_head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int
    chunk_size: int
    use_conv_bias: bool
    ssm_act: str
    layer_norm_epsilon: float
    time_step_limit: tuple[float, float]

    if TYPE_CHECKING:  # ModelConfig's, which every config with a mixer also is

        def require_positive(self, *fields: str) -> None: ...

    @property
    def d_inner(self) -> int:
        """I = Hs P: the width of x (and of the gate z) inside the mixer."""
        return self.ssm_heads * self.ssm_head_dim

    @property
    def conv_dim(self) -> int:
        """Cv = I + 2 Ng N: the channels the causal conv runs over (x, B and C)."""
        return self.d_inner + 2 * self.n_groups * self.state_size

    @property
    def in_proj_dim(self) -> int:
        """I + Cv + Hs: in_proj's output, z, then x B C, then dt (one per head)."""
        return self.d_inner + self.conv_dim + self.ssm_heads

    @property
    def mixer_symbols(self) -> dict[str, int]:
        """The symbols the mixer's shapes name (engine Dims.data): Hs heads of P, a state of N, Ng groups of Hg
        heads, I = Hs P, Cv conv channels of a kernel K, Ks = K - 1 positions of conv state."""
        return dict(Hs=self.ssm_heads, P=self.ssm_head_dim, N=self.state_size, Ng=self.n_groups,
                    Hg=self.ssm_heads // self.n_groups, I=self.d_inner, Cv=self.conv_dim, K=self.conv_kernel,
                    Ks=self.conv_kernel - 1)  # fmt: skip

    @property
    def mixer_state(self) -> State:
        """What a Mamba-2 layer keeps between passes: the conv's last K - 1 inputs [K - 1, Cv] and the scan's state
        [Hs, P, N], whatever the context."""
        return State((("conv", (self.conv_kernel - 1, self.conv_dim)),
                      ("ssm", (self.ssm_heads, self.ssm_head_dim, self.state_size))))  # fmt: skip

    def check_mixer(self) -> None:
        self.require_positive("ssm_heads", "ssm_head_dim", "state_size", "n_groups", "conv_kernel")
        if self.ssm_heads % self.n_groups:
            raise UserError(f"config: {self.ssm_heads} heads do not split into n_groups={self.n_groups} groups")


def json_float(value):
    """A float as transformers 5 writes one JSON has no number for: {"__float__": "Infinity"} (and NaN, -Infinity)."""
    if (
        isinstance(value, dict)
        and set(value) == {"__float__"}
        and value["__float__"] in ("Infinity", "-Infinity", "NaN")
    ):
        return float(value["__float__"])
    return value


def to_json_float(value: float):
    """A float as JSON can hold it: as it is, or as transformers 5 writes an infinity ({"__float__": "Infinity"})."""
    if math.isinf(value) or math.isnan(value):
        return {"__float__": "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"}
    return value


def check_time_step_limit(value) -> tuple[float, float]:
    """(low, high) that dt is clamped to in the chunked scan, as transformers clamps it."""
    if isinstance(value, (list, tuple)):
        value = [json_float(v) for v in value]
    if (
        not isinstance(value, (list, tuple))
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise UserError(f"config time_step_limit must be two numbers [low, high], not {value!r}")
    low, high = float(value[0]), float(value[1])
    if not 0 <= low <= high:
        raise UserError(f"config time_step_limit={value!r} must have 0 <= low <= high")
    return low, high


@dataclass(frozen=True)
class Mamba2Config(MixerShapes, ModelConfig):
    """A Mamba-2 (transformers' Mamba2ForCausalLM): every layer x + Mixer(RMSNorm(x)), the mixer a selective
    state-space model of ssm_heads heads (num_heads) of ssm_head_dim (head_dim), each with a state of state_size,
    computed in chunks of chunk_size for a prompt and one step at a time in decode."""

    n_layer: int
    n_embd: int
    vocab_size: int
    ssm_heads: int = 128  # num_heads
    ssm_head_dim: int = 64  # head_dim
    state_size: int = 128
    n_groups: int = 8
    conv_kernel: int = 4
    expand: int = 2
    chunk_size: int = 256
    use_bias: bool = False  # in_proj and out_proj
    use_conv_bias: bool = True
    ssm_act: str = "silu"  # hidden_act: the conv's activation
    layer_norm_epsilon: float = 1e-5
    time_step_limit: tuple[float, float] = (0.0, math.inf)
    n_positions: int = UNBOUNDED_CONTEXT
    tie_word_embeddings: bool = False
    sliding_window: None = None
    bos_token_id: int | None = 0
    eos_token_id: int | tuple[int, ...] | None = 2
    pad_token_id: int | None = 1
    model_type: str = "mamba2"
    name: str = field(default="mamba2", compare=False)

    family = "mamba2"
    json_keys = ModelConfig.json_keys | {"ssm_heads": "num_heads", "ssm_head_dim": "head_dim", "ssm_act": "hidden_act"}

    def __post_init__(self) -> None:
        self.require_positive("n_layer", "n_embd", "vocab_size", "expand", "chunk_size", "n_positions")
        self.require_positive_number("layer_norm_epsilon")
        self.check_mixer()
        if self.n_embd * self.expand != self.d_inner:
            raise UserError(f"config hidden_size x expand ({self.n_embd} x {self.expand}) must equal num_heads x "
                            f"head_dim ({self.ssm_heads} x {self.ssm_head_dim}), as transformers requires")  # fmt: skip
        if self.ssm_act not in SUPPORTED_ACTIVATIONS:
            raise UserError(f"config hidden_act={self.ssm_act!r} is not supported "
                            f"(supported: {', '.join(SUPPORTED_ACTIVATIONS)})")  # fmt: skip
        check_time_step_limit(self.time_step_limit)

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str = "mamba2") -> Mamba2Config:
        """Read a transformers Mamba2Config dict (as config.json holds it), with Mamba2Config's defaults."""
        model_type = hf.get("model_type")
        if model_type not in MAMBA2_MODEL_TYPES:
            raise UserError(f"config model_type={model_type!r} is not a Mamba-2 ({', '.join(MAMBA2_MODEL_TYPES)})")
        check_dtype(hf)
        # Read and not refused, since transformers' Mamba2 computes the same with or without them: time_step_rank,
        # time_step_min, _max and _floor, rescale_prenorm_residual and initializer_range only initialise weights;
        # residual_in_fp32 keeps the residual in float32, which it is here in any case; rms_norm and
        # norm_before_gate (Mamba-Codestral's config.json has true) are mamba_ssm's options, which transformers'
        # Mamba2 does not read: its norm is always an RMSNorm, taken after the gate.
        if hf.get("quantization_config"):
            raise UserError("config quantization_config is not supported: dequantize the weights first")
        eos = hf.get("eos_token_id", 2)
        return cls(
            n_layer=hf.get("num_hidden_layers", 64), n_embd=hf.get("hidden_size", 4096),
            vocab_size=hf.get("vocab_size", 32768), ssm_heads=hf.get("num_heads", 128),
            ssm_head_dim=hf.get("head_dim", 64), state_size=hf.get("state_size", 128),
            n_groups=hf.get("n_groups", 8), conv_kernel=hf.get("conv_kernel", 4), expand=hf.get("expand", 2),
            chunk_size=hf.get("chunk_size", 256), use_bias=flag(hf, "use_bias"),
            use_conv_bias=bool(hf.get("use_conv_bias", True)), ssm_act=hf.get("hidden_act", "silu"),
            layer_norm_epsilon=hf.get("layer_norm_epsilon", 1e-5),
            time_step_limit=check_time_step_limit(hf.get("time_step_limit", (0.0, math.inf))),
            tie_word_embeddings=flag(hf, "tie_word_embeddings"), bos_token_id=hf.get("bos_token_id", 0),
            eos_token_id=token_ids(eos), pad_token_id=hf.get("pad_token_id", 1),
            model_type=model_type, name=name,
        )  # fmt: skip

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config (Mamba2Config's keys)."""
        return {
            "architectures": ["Mamba2ForCausalLM"], "model_type": self.model_type, "num_hidden_layers": self.n_layer,
            "hidden_size": self.n_embd, "vocab_size": self.vocab_size, "num_heads": self.ssm_heads,
            "head_dim": self.ssm_head_dim, "state_size": self.state_size, "n_groups": self.n_groups,
            "conv_kernel": self.conv_kernel, "expand": self.expand, "chunk_size": self.chunk_size,
            "use_bias": self.use_bias, "use_conv_bias": self.use_conv_bias, "hidden_act": self.ssm_act,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "time_step_limit": list(self.time_step_limit),  # an infinity as Python's json writes it, as published
            "tie_word_embeddings": self.tie_word_embeddings, "bos_token_id": self.bos_token_id,
            "eos_token_id": listed(self.eos_token_id), "pad_token_id": self.pad_token_id,
        }  # fmt: skip

    @property
    def checkpoint_kind(self) -> str:
        return "Mamba-2 model"

    # The names every family's config answers to. A Mamba-2 has no attention and no MLP: its heads are the mixer's
    # (Hs of P), and d_ff, what count and the headers ask of every family's MLP, is the mixer's inner width I.
    @property
    def n_head(self) -> int:  # type: ignore[override]
        return self.ssm_heads

    @property
    def n_kv_head(self) -> int:  # type: ignore[override]
        return self.ssm_heads

    @property
    def d_head(self) -> int:
        return self.ssm_head_dim

    @property
    def d_ff(self) -> int:
        return self.d_inner

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return self.mixer_symbols

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Every layer a Mamba-2 mixer: "mamba" (transformers calls them "linear_attention")."""
        return ("mamba",) * self.n_layer

    def layer_cache(self, layer: int) -> State:
        """Every layer keeps its conv and scan states (MixerShapes.mixer_state): no keys, no values."""
        return self.mixer_state

    def to_dict(self) -> dict:
        d = asdict(self)
        d["time_step_limit"] = [to_json_float(x) for x in self.time_step_limit]
        d["eos_token_id"] = listed(self.eos_token_id)
        return {"family": self.family, **d, "d_inner": self.d_inner}


# mistralai/Mamba-Codestral-7B-v0.1, its config.json (as transcribed in NX-AI's mlstm_kernels benchmark,
# mlstm_kernels/utils/benchmark/benchmarks/huggingface_model_benchmark.py, "codestral_mamba_config"): 64 layers,
# hidden 4096, expand 2, 128 heads of 64, state 128, 8 groups, conv kernel 4, chunk 256, vocabulary 32768, no biases
# but the conv's, layer_norm_epsilon 1e-5, time_step_limit [0, inf], untied, bos 0, eos 0, pad 0. It has no context
# length; n_positions is minitransformer's bound (UNBOUNDED_CONTEXT), not the model's.
PRESETS: dict[str, Mamba2Config] = {
    "mamba-codestral-7b": Mamba2Config(
        n_layer=64,
        n_embd=4096,
        vocab_size=32768,
        ssm_heads=128,
        ssm_head_dim=64,
        state_size=128,
        n_groups=8,
        conv_kernel=4,
        expand=2,
        chunk_size=256,
        use_bias=False,
        use_conv_bias=True,
        layer_norm_epsilon=1e-5,
        tie_word_embeddings=False,
        bos_token_id=0,
        eos_token_id=0,
        pad_token_id=0,
        name="mamba-codestral-7b",
    ),
}
