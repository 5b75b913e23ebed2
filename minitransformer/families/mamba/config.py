"""Mamba's config: each field under its config.json key with transformers' MambaConfig default (Falcon-Mamba's derives
from it), the shapes of its mixer, and the presets of published models, from their config.json."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...engine.kvcache import State
from ..config import ModelConfig
from ..keys import ACTIVATION, FLAG, LAYER_COUNT, SIZE, TOKENS, TRUTHY, eps, key
from ..mamba2.config import UNBOUNDED_CONTEXT, MixersAlone

WIDTH_PER_RANK = 16  # time_step_rank "auto": ceil(hidden_size / 16), as MambaConfig's __post_init__ makes it


def auto_rank(hf: dict, values: dict) -> int:
    return math.ceil(values["n_embd"] / WIDTH_PER_RANK)


def time_step_rank(hf: dict, values: dict):
    """The file's time_step_rank, or "auto" (its default) worked out from hidden_size."""
    rank = hf.get("time_step_rank", "auto")
    return auto_rank(hf, values) if rank == "auto" else rank


class Mamba1Shapes:
    """The shapes of a Mamba-1 mixer, from the fields Mamba's and Jamba's configs have: d_inner channels (I), each with
    a state of state_size (N), dt from a rank of dt_rank (Rdt), a causal conv of conv_kernel (K) positions."""

    d_inner: int
    state_size: int
    dt_rank: int
    conv_kernel: int

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """I channels, N a state per channel, Rdt the rank of dt, a conv of kernel K, Ks = K - 1 positions kept."""
        K = self.conv_kernel
        return dict(I=self.d_inner, N=self.state_size, Rdt=self.dt_rank, K=K, Ks=K - 1)

    @property
    def mixer_state(self) -> State:
        """What a Mamba layer keeps between passes: the conv's last K - 1 inputs [K - 1, I] and the scan's state
        [I, N], whatever the context."""
        return State((("conv", (self.conv_kernel - 1, self.d_inner)), ("ssm", (self.d_inner, self.state_size))))


@dataclass(frozen=True)
class MambaConfig(MixersAlone, Mamba1Shapes, ModelConfig):  # type: ignore[override]
    """A Mamba (transformers' MambaForCausalLM): every layer x + Mixer(RMSNorm(x)), the mixer a selective state-space
    model of d_inner channels (intermediate_size), each with a state of state_size, its step from a rank of dt_rank
    (time_step_rank), computed position by position."""

    n_layer: int = key("num_hidden_layers", 32, LAYER_COUNT)
    n_embd: int = key("hidden_size", 768, SIZE)
    vocab_size: int = key("vocab_size", 50280, SIZE)
    state_size: int = key("state_size", 16, SIZE)
    expand: int = key("expand", 2, SIZE)
    # transformers takes a file's intermediate_size over expand x hidden_size (Falcon-Mamba-7B's says expand 16 and
    # intermediate_size 8,192, which its weights have)
    d_inner: int = key("intermediate_size", None, SIZE, rule=lambda hf, values: values["expand"] * values["n_embd"])
    dt_rank: int = key("time_step_rank", None, SIZE, read=time_step_rank, rule=auto_rank)
    conv_kernel: int = key("conv_kernel", 4, SIZE)
    use_bias: bool = key("use_bias", False, FLAG)  # in_proj and out_proj
    use_conv_bias: bool = key("use_conv_bias", True, TRUTHY)
    ssm_act: str = key("hidden_act", "silu", ACTIVATION)  # the conv's activation
    norm_eps: float = eps("layer_norm_epsilon", 1e-5)
    n_positions: int = UNBOUNDED_CONTEXT
    tie_word_embeddings: bool = key("tie_word_embeddings", True, FLAG)
    sliding_window: None = None
    bos_token_id: int | None = key("bos_token_id", 0, TOKENS)
    eos_token_id: int | tuple[int, ...] | None = key("eos_token_id", 0, TOKENS)
    pad_token_id: int | None = key("pad_token_id", 0, TOKENS)
    model_type: str = "mamba"

    what = "a Mamba"
    classes = {"mamba": "MambaForCausalLM"}
    checkpoint_kind = "Mamba model"
    # Read and not refused, since transformers' Mamba computes the same with or without them: time_step_scale, _min,
    # _max, _init_scheme and _floor, rescale_prenorm_residual and initializer_range only initialise weights;
    # residual_in_fp32 keeps the residual in float32, which it is here in any case; use_mambapy and
    # use_associative_scan choose other ways to compute the same scan (in training, or under torch.compile).
    refusals = ()
    dict_last = ("d_ff",)

    @property
    def bcdt_norm_eps(self) -> float | None:
        """The epsilon of RMSNorms on dt, B and C inside the mixer: none in Mamba's (Falcon-Mamba's mixer_rms_eps)."""
        return None

    @property
    def d_head(self) -> int:
        """Each of its I channels a head of one number with a state of N (Mamba-2's heads of P with P = 1)."""
        return 1


# state-spaces/mamba-130m-hf's config.json (as NVIDIA-NeMo/Megatron-Bridge's tests/unit_tests/models/mamba/
# test_mamba_bridge.py copies it whole, transformers_version 4.39.0.dev0): 24 layers, hidden 768, intermediate 1536
# (expand 2), state 16, conv kernel 4, time_step_rank 48, vocabulary 50,280, no biases but the conv's,
# layer_norm_epsilon 1e-5, bos, eos and pad 0, no tie_word_embeddings key (tied: transformers' default).
# state-spaces/mamba-2.8b's (LaurentMazare/mamba.rs, src/constants.rs, params_2_8b, from its config.json): 64 layers,
# d_model 2,560, its vocabulary of 50,277 padded to a multiple of 8 (pad_vocab_size_multiple), 50,280, as the -hf
# conversion holds it; d_state 16 and d_conv 4 (the same file); expand 2 and time_step_rank "auto" (2560 / 16 = 160),
# the -hf conversion's, as every Mamba-1 size's.
PRESETS: dict[str, MambaConfig] = {  # the larger first: the family's headline model
    "mamba-2.8b": MambaConfig(n_layer=64, n_embd=2560, vocab_size=50280, d_inner=5120, dt_rank=160, name="mamba-2.8b"),
    "mamba-130m": MambaConfig(n_layer=24, n_embd=768, vocab_size=50280, d_inner=1536, dt_rank=48, name="mamba-130m"),
}
