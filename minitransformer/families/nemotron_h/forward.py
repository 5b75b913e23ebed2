"""Nemotron-H's forward pass, as transformers' NemotronHForCausalLM computes it: every layer x + Mixer(RMSNorm(x))
(families/blocks.py's Residual), the mixer of the layer's kind (config.layer_types, from the config's pattern: ByKind):

- mamba: the Mamba-2 mixer (families/mamba2/mixer.py), its conv and scan states in the cache;
- full_attention: the Llama family's grouped-query attention with no rotation at all (Nemotron-H's attention has no
  positions: the Mamba layers before it carry the order), scale dh^-0.5, no biases; its keys and values in the cache;
- mlp: m = relu(h W_up)^2 W_down, two products (no gate);
- moe: DeepSeek-V3's router (sigmoid scores, a correction bias to choose, group-limited top k, the chosen scores as
  weights, renormalised and scaled), k of E squared-ReLU experts on their tokens (in a latent of Dl where
  moe_latent_size is set: h W_fc1 before them, W_fc2 after), and a shared squared-ReLU expert on every token.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.ops import ACTIVATIONS
from ...engine.shapes import ShapeOnly
from ...engine.tape import Tape
from ..blocks import ByKind, LayerInputs, Residual, as_mixer, rms
from ..decoder import Decoder
from ..deepseek_v3.forward import sigmoid, weigh
from ..deepseek_v3.routing import choose
from ..llama.forward import attend_to_cache, bias_of, heads
from ..mamba2.forward import mixer
from ..moe import add_rows, routed
from .config import NemotronHConfig


def attention(h, p: SimpleNamespace, config: NemotronHConfig, at: Tape, inputs: LayerInputs):
    """Grouped-query attention without positions: the Llama family's, less its rotation."""
    llama_like: Any = config  # heads reads n_head and n_kv_head, which a Nemotron-H config has too
    q, k, v = heads(h, p, llama_like, at)
    return attend_to_cache(q, k, v, p, config, at, inputs)


def mlp(h, p: SimpleNamespace, config: NemotronHConfig, at: Tape):
    """m = act(h W_up) W_down (relu2: relu(u)^2)."""
    u = at.matmul("mlp.up", h, p.up_proj.weight.T, "T D, D F -> T F", bias=bias_of(p.up_proj))
    a = at.stage("mlp.act", ACTIVATIONS[config.mlp_act](u), "T F")
    return at.matmul("mlp.down", a, p.down_proj.weight.T, "T F, F D -> T D", bias=bias_of(p.down_proj))


def mixture(h, p: SimpleNamespace, config: NemotronHConfig, at: Tape):
    """The routed experts (k of E a token) and the shared expert, added."""
    deepseek_like: Any = (
        config  # choose and weigh read top_k, n_experts, n_group, topk_group and the weighing's options
    )
    logits = at.matmul("router", h, p.gate.weight.T, "T D, D E -> T E")
    scores = at.stage("router.sigmoid", sigmoid(logits), "T E")
    chosen = at.stage("router.choose", choose(scores, p.gate.e_score_correction_bias, deepseek_like, at), "T k")
    gates = at.stage("router.weigh", weigh(scores, chosen, deepseek_like), "T k")
    x = h
    if config.moe_latent is not None:
        x = at.matmul(
            "moe.latent_in", h, p.fc1_latent_proj.weight.T, "T D, D Dl -> T Dl", bias=bias_of(p.fc1_latent_proj)
        )
    m = squared_relu_experts(x, chosen, gates, p.experts, config, at)
    if config.moe_latent is not None:
        m = at.matmul(
            "moe.latent_out", m, p.fc2_latent_proj.weight.T, "T Dl, Dl D -> T D", bias=bias_of(p.fc2_latent_proj)
        )
    s = p.shared_experts
    u = at.matmul("shared.up", h, s.up_proj.weight.T, "T D, D Fs -> T Fs", bias=bias_of(s.up_proj))
    a = at.stage("shared.act", ACTIVATIONS[config.mlp_act](u), "T Fs")
    y = at.matmul("shared.down", a, s.down_proj.weight.T, "T Fs, Fs D -> T D", bias=bias_of(s.down_proj))
    return at.stage("moe.shared_add", m + y, "T D")


# The shapes of a layer's expert records: each token's rows in its k experts (families/moe.py's expert_shapes, for
# experts without a gate, reading and writing Dl).
EXPERT_SHAPES = {
    "expert.gather": "T k*Dl",
    "expert.up": "T Dl, Dl k*Fe -> T k*Fe",
    "expert.act": "T k*Fe",
    "expert.down": "T Fe, Fe k*Dl -> T k*Dl",
    "expert.weigh": "T k*Dl",
}


def squared_relu_experts(x, chosen, gates, experts, config: NemotronHConfig, at: Tape):
    """Each routed expert on its Te tokens' rows: y = act(x_e W_up_e) W_down_e, weighted by the tokens' gates and added
    back to their rows ([T, Dl])."""
    E, k = config.n_experts or 0, chosen.shape[-1]
    rows, n = x.reshape(-1, x.shape[-1]), x.size // x.shape[-1]
    out = ShapeOnly(rows.shape, rows.dtype) if isinstance(rows, ShapeOnly) else np.zeros_like(rows)
    each = at.experts()
    for expert in routed(chosen.reshape(n, k), E, at.routing):
        ex, w = each.expert(expert), getattr(experts, str(expert.expert))
        xe = ex.stage("expert.gather", expert.gather(rows), "Te Dl")
        u = ex.matmul("expert.up", xe, w.up_proj.weight.T, "Te Dl, Dl Fe -> Te Fe")
        a = ex.stage("expert.act", ACTIVATIONS[config.mlp_act](u), "Te Fe")
        y = ex.matmul("expert.down", a, w.down_proj.weight.T, "Te Fe, Fe Dl -> Te Dl")
        y = ex.stage("expert.weigh", y * expert.gates(gates.reshape(n, k)), "Te Dl")
        add_rows(out, expert, y)
    at.record_experts(each, EXPERT_SHAPES, E)
    return at.stage("moe.combine", out.reshape(x.shape), "T Dl")


# Token ids [T] (or [B, T], left-padded by `pads`) -> logits [R, V]: each layer x + Mixer(RMSNorm(x)) (a Residual),
# its mixer its kind's (config.layer_types); an MLP or a mixture reads nothing of the layer's inputs (as_mixer).
nemotron_h = Decoder(
    ByKind(
        {
            "mamba": Residual(mixer, rms),
            "full_attention": Residual(attention, rms),
            "mlp": Residual(as_mixer(mlp), rms),
            "moe": Residual(as_mixer(mixture), rms),
        }
    ),
    rms,
    embedding="embeddings",
    final_norm="norm_f",
)
