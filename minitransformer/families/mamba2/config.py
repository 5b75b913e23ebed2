"""Mamba-2's config: each field under its config.json key with transformers' Mamba2Config default, the shapes of its
mixer that Nemotron-H shares (`MixerShapes`), and the preset of a published model, from its config.json."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from ...engine.kvcache import State
from ...errors import UserError
from ..config import ModelConfig, check_multiple
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, POSITIVE, SIZE, TOKENS, TRUTHY, Kind, eps, key

# A state-space model attends to no positions and transformers' Mamba2Config has no context length; minitransformer
# needs one for its checks and its sweeps over the context (count, memory). This is that bound, not the model's.
UNBOUNDED_CONTEXT = 1 << 20

# How the scan's output y meets the gate z (MixerShapes.gated_norm): the gate, then a grouped RMSNorm (Mamba-2's,
# transformers' MambaRMSNormGated); the norm first (Falcon-H1's norm_before_gate); the gate alone (no norm).
GATE_NORM, NORM_GATE, GATE_ONLY = "gate, then norm", "norm, then gate", "gate alone"


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
    use_bias: bool
    use_conv_bias: bool
    ssm_act: str
    norm_eps: float
    time_step_limit: tuple[float, float]

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

    # The mixer's options as Mamba-2's and Nemotron-H's configs have them; a config that states them otherwise says so
    # (Falcon-H1's).
    @property
    def gated_norm(self) -> str:
        """How y meets the gate z: silu(z), then an RMSNorm over each group (GATE_NORM)."""
        return GATE_NORM

    @property
    def in_proj_multipliers(self) -> tuple[float, ...] | None:
        """Numbers in_proj's output is multiplied by, one for each of z, x, B, C and dt; None: not multiplied."""
        return None

    @property
    def out_proj_bias(self) -> bool:
        """out_proj's bias: where in_proj has one (use_bias)."""
        return self.use_bias

    @property
    def mixer_symbols(self) -> dict[str, int]:
        """The symbols the mixer's shapes name (engine Dims.data): Hs heads of P, a state of N, Ng groups of Hg
        heads, I = Hs P, Cv conv channels of a kernel K, Ks = K - 1 positions of conv state."""
        Hs, Ng, K = self.ssm_heads, self.n_groups, self.conv_kernel
        shapes = dict(
            Hs=Hs, P=self.ssm_head_dim, N=self.state_size, Ng=Ng, Hg=Hs // Ng, I=self.d_inner, Cv=self.conv_dim
        )
        return shapes | {"K": K, "Ks": K - 1}

    @property
    def symbol_sizes(self) -> dict[str, int]:
        return self.mixer_symbols

    @property
    def mixer_state(self) -> State:
        """What a Mamba-2 layer keeps between passes: the conv's last K - 1 inputs [K - 1, Cv] and the scan's state
        [Hs, P, N], whatever the context."""
        conv, ssm = (self.conv_kernel - 1, self.conv_dim), (self.ssm_heads, self.ssm_head_dim, self.state_size)
        return State((("conv", conv), ("ssm", ssm)))

    def check_mixer(self) -> None:
        check_multiple(self, "ssm_heads", "n_groups", " (the heads of a group share B and C)")  # type: ignore[arg-type]


class MixersAlone:
    """The names every family's config answers to, in a model of state-space layers alone: no attention and no MLP; its
    heads are the mixer's (its d_inner channels I in heads of d_head), and d_ff, what count and the headers ask of every
    family's MLP, is I. Every layer "mamba" (transformers calls them "linear_attention") keeps its conv and scan states
    (mixer_state), whatever the context: no keys, no values."""

    n_layer: int
    d_inner: int
    if TYPE_CHECKING:  # each config's own

        @property
        def d_head(self) -> int: ...

        @property
        def mixer_state(self) -> State: ...

    @property
    def n_head(self) -> int:
        return self.d_inner // self.d_head

    @property
    def d_ff(self) -> int:
        return self.d_inner

    @cached_property  # as ModelConfig.layer_types
    def layer_types(self) -> tuple[str, ...]:
        return ("mamba",) * self.n_layer

    def layer_cache(self, layer: int) -> State:
        return self.mixer_state


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


def _time_step_limit(value) -> bool:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return False
    low, high = (json_float(v) for v in value)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high))
    return numbers and 0 <= low <= high


# (low, high) that dt is clamped to in the chunked scan, as transformers clamps it (an infinity as transformers 5
# writes one: {"__float__": "Infinity"}, or as Python's json does, as published)
TIME_STEP_LIMIT = Kind(
    "two numbers [low, high], 0 <= low <= high",
    _time_step_limit,
    read=lambda value: tuple(float(json_float(v)) for v in value),
    write=list,
)


def time_step_limit() -> Any:
    """The field of time_step_limit (Mamba-2's, Bamba's): transformers' (0, inf) where the file has none."""
    return key(
        "time_step_limit", (0.0, math.inf), TIME_STEP_LIMIT, dict_value=lambda lim: [to_json_float(x) for x in lim]
    )


@dataclass(frozen=True)
class Mamba2Config(MixersAlone, MixerShapes, ModelConfig):  # type: ignore[override]
    """A Mamba-2 (transformers' Mamba2ForCausalLM): every layer x + Mixer(RMSNorm(x)), the mixer a selective
    state-space model of ssm_heads heads (num_heads) of ssm_head_dim (head_dim), each with a state of state_size,
    computed in chunks of chunk_size for a prompt and one step at a time in decode."""

    n_layer: int = key("num_hidden_layers", 64, LAYER_COUNT)
    n_embd: int = key("hidden_size", 4096, SIZE)
    vocab_size: int = key("vocab_size", 32768, SIZE)
    ssm_heads: int = key("num_heads", 128, SIZE)
    ssm_head_dim: int = key("head_dim", 64, SIZE)
    state_size: int = key("state_size", 128, SIZE)
    n_groups: int = key("n_groups", 8, SIZE)
    conv_kernel: int = key("conv_kernel", 4, SIZE)
    expand: int = key("expand", 2, SIZE)
    chunk_size: int = key("chunk_size", 256, POSITIVE)
    use_bias: bool = key("use_bias", False, FLAG)  # in_proj and out_proj
    use_conv_bias: bool = key("use_conv_bias", True, TRUTHY)
    ssm_act: str = key("hidden_act", "silu", ACTIVATION)  # the conv's activation
    norm_eps: float = eps("layer_norm_epsilon", 1e-5)
    time_step_limit: tuple[float, float] = time_step_limit()
    n_positions: int = UNBOUNDED_CONTEXT
    tie_word_embeddings: bool = key("tie_word_embeddings", False, FLAG)
    sliding_window: None = None
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 2, TOKENS)
    pad_token_id: int | None = key("pad_token_id", 1, TOKENS)
    model_type: str = "mamba2"

    what = "a Mamba-2"
    classes = {"mamba2": "Mamba2ForCausalLM"}
    checkpoint_kind = "Mamba-2 model"  # what messages call a checkpoint of it
    # Read and not refused, since transformers' Mamba2 computes the same with or without them: time_step_rank,
    # time_step_min, _max and _floor, rescale_prenorm_residual and initializer_range only initialise weights;
    # residual_in_fp32 keeps the residual in float32, which it is here in any case; rms_norm and norm_before_gate
    # (Mamba-Codestral's config.json has true) are mamba_ssm's options, which transformers' Mamba2 does not read: its
    # norm is always an RMSNorm, taken after the gate.
    refusals = ()
    dict_last = ("d_inner",)

    def validate(self) -> None:
        self.check_mixer()
        if self.n_embd * self.expand != self.d_inner:
            raise UserError(
                f"config hidden_size x expand ({self.n_embd} x {self.expand}) must equal num_heads x "
                f"head_dim ({self.ssm_heads} x {self.ssm_head_dim}), as transformers requires"
            )

    @property
    def d_head(self) -> int:  # its heads are the mixer's: Hs of P
        return self.ssm_head_dim


# mistralai/Mamba-Codestral-7B-v0.1, its config.json (as transcribed in NX-AI's mlstm_kernels benchmark,
# mlstm_kernels/utils/benchmark/benchmarks/huggingface_model_benchmark.py, "codestral_mamba_config"): 64 layers,
# hidden 4096, expand 2, 128 heads of 64, state 128, 8 groups, conv kernel 4, chunk 256, vocabulary 32768, no biases
# but the conv's, layer_norm_epsilon 1e-5, time_step_limit [0, inf], untied, bos 0, eos 0, pad 0. It has no context
# length; n_positions is minitransformer's bound (UNBOUNDED_CONTEXT), not the model's.
PRESETS: dict[str, Mamba2Config] = {
    # Mamba2Config's defaults, which are Mamba-Codestral's shapes, and its ids
    "mamba-codestral-7b": Mamba2Config(bos_token_id=0, eos_token_id=0, pad_token_id=0, name="mamba-codestral-7b"),
}
