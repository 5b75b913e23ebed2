"""Nemotron-H's stage table: one pre-RMSNorm and one residual add a layer around its one mixer, whose stages are those
of its kind (forward.py): the Mamba-2 mixer's (families/mamba2/stages.py), the Llama family's attention without its
rotation, a squared-ReLU MLP, or DeepSeek-V3's router with squared-ReLU experts and a shared expert."""

from __future__ import annotations

from functools import cache

from ...engine.stages import MLP, Stage, StageTable
from ..llama.stages import llama_family
from ..mamba2.stages import EMBED, FINAL, MIXER, NORM, RESID, SYMBOLS
from ..parts.moe import ROUTED_COMBINE as COMBINE
from ..parts.moe import SIGMOID_ROUTER as ROUTER

ATTENTION_OPS = ("q", "k", "v", "split_heads", "cache", "scores", "scale", "mask", "softmax", "mix", "merge_heads",
                 "out")  # fmt: skip
DENSE_MLP = (
    Stage("mlp.up", ("mlp.up",), "matmul", "u = h W_up", "h [T, D], W_up [D, F]", MLP),
    Stage("mlp.act", ("mlp.act",), "activation", "a = relu(u)^2", "u [T, F]"),
    Stage("mlp.down", ("mlp.down",), "matmul", "m = a W_down", "a [T, F], W_down [F, D]", MLP),
)  # fmt: skip
LATENT_IN = Stage("moe.latent_in", ("moe.latent_in",), "matmul", "h_l = h W_fc1  (down to the experts' latent, Dl)",
                  "h [T, D], W_fc1 [D, Dl]", MLP, product="expert")  # fmt: skip
# Each expert e runs these on the Te tokens routed to it: one record per op and layer, with each expert's share.
EXPERTS = (
    Stage("expert.gather", ("moe.expert_in",), "select", "h_e = h_l[the Te tokens routed to e]  (for each expert e)",
          "h_l [T, Dl]"),
    Stage("expert.up", ("moe.expert_up",), "matmul", "u = h_e W_up_e  (expert e's up, on its Te rows)",
          "h_e [T, k*Dl] (each token in its k experts), W_up_e [Dl, Fe]", MLP, product="expert"),
    Stage("expert.act", ("moe.expert_act",), "activation", "a = relu(u)^2", "u [T, k*Fe]"),
    Stage("expert.down", ("moe.expert_down",), "matmul", "y = a W_down_e  (expert e's down, on its Te rows)",
          "a [T, k*Fe], W_down_e [Fe, Dl]", MLP, product="expert"),
    Stage("expert.weigh", ("moe.expert_out",), "multiply", "y = y * gate of e for each of its tokens", "y [T, k*Dl]"),
)  # fmt: skip
LATENT_OUT = Stage("moe.latent_out", ("moe.latent_out",), "matmul", "m = m W_fc2  (back up from the latent to D)",
                   "m [T, Dl], W_fc2 [Dl, D]", MLP, product="expert")  # fmt: skip
SHARED = (
    Stage("shared.up", ("moe.shared_up",), "matmul", "u = h W_up_s  (the shared expert, on every token)",
          "h [T, D], W_up_s [D, Fs]", MLP, product="expert"),
    Stage("shared.act", ("moe.shared_act",), "activation", "a = relu(u)^2", "u [T, Fs]"),
    Stage("shared.down", ("moe.shared_down",), "matmul", "y_s = a W_down_s", "a [T, Fs], W_down_s [Fs, D]", MLP,
          product="expert"),
    Stage("moe.shared_add", ("moe.out",), "add", "m = m + y_s", "m, y_s [T, D]"),
)  # fmt: skip


@cache
def nemotron_h_family(latent: bool = True) -> StageTable:
    """Every stage a Nemotron-H layer can run, the mixture's latent projections where `latent` (moe_latent_size)."""
    llama = llama_family()
    attention = tuple(llama.stages[op] for op in ATTENTION_OPS)
    moe = (*ROUTER, *((LATENT_IN,) if latent else ()), *EXPERTS, COMBINE, *((LATENT_OUT,) if latent else ()), *SHARED)
    block = (NORM, *MIXER, *attention, *DENSE_MLP, *moe, RESID)
    symbols = (SYMBOLS + "; attention: H query heads of dh over Hkv key/value heads (G = H/Hkv), t attended; F the "
               "MLP's width; E experts, k a token, Te routed to expert e, Fe an expert's width, Dl the width they "
               "read and write, Fs the shared expert's")  # fmt: skip
    return StageTable("nemotron_h", EMBED, block, FINAL, symbols)


def stages_of(config) -> StageTable:
    return nemotron_h_family(config.moe_latent is not None)
