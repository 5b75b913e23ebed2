"""Where a Nemotron-H keeps its numbers in a Hugging Face checkpoint, as NVIDIA's checkpoints name them and
transformers 5 saves NemotronHForCausalLM (it renames `backbone.` to `model.` and fuses the experts on loading, and
undoes both on saving): `backbone.embeddings`, each layer's `norm` and `mixer` (a Mamba-2 mixer's tensors,
q/k/v/o_proj, an MLP's up_proj and down_proj, or a mixture's `gate` (the router [E, D] and its
e_score_correction_bias [E], a buffer), each expert's up_proj [Fe, Dl] and down_proj [Dl, Fe], the shared_experts'
up_proj and down_proj, and fc1/fc2_latent_proj where moe_latent_size is set), `backbone.norm_f` and `lm_head`."""

from __future__ import annotations

import re

from ..architecture import Layout
from ..mamba2.layout import MIXER_KINDS, mixer_kind_of, mixer_shapes
from .config import NemotronHConfig


def nemotron_h_shapes(config: NemotronHConfig) -> dict[str, tuple[int, ...]]:
    c = config
    D, V, F, E = c.n_embd, c.vocab_size, c.d_ff, c.n_experts or 0
    q, kv = c.n_head * c.d_head, c.n_kv_head * c.d_head
    shapes: dict[str, tuple[int, ...]] = {"embeddings.weight": (V, D)}

    def linear(name: str, rows: int, cols: int, bias: bool) -> None:
        shapes[f"{name}.weight"] = (rows, cols)
        if bias:
            shapes[f"{name}.bias"] = (rows,)

    for i, kind in enumerate(c.layer_types):
        m = f"layers.{i}.mixer"
        shapes[f"layers.{i}.norm.weight"] = (D,)
        if kind == "mamba":
            shapes.update(mixer_shapes(c, m, c.use_bias))
        elif kind == "full_attention":
            for name, rows, cols in (("q_proj", q, D), ("k_proj", kv, D), ("v_proj", kv, D), ("o_proj", D, q)):
                linear(f"{m}.{name}", rows, cols, False)
        elif kind == "mlp":
            linear(f"{m}.up_proj", F, D, c.mlp_bias)
            linear(f"{m}.down_proj", D, F, c.mlp_bias)
        else:
            Dl = c.d_latent
            shapes[f"{m}.gate.weight"] = (E, D)
            shapes[f"{m}.gate.e_score_correction_bias"] = (E,)
            for e in range(E):
                shapes[f"{m}.experts.{e}.up_proj.weight"] = (c.moe_inner, Dl)
                shapes[f"{m}.experts.{e}.down_proj.weight"] = (Dl, c.moe_inner)
            linear(f"{m}.shared_experts.up_proj", c.shared_inner, D, c.mlp_bias)
            linear(f"{m}.shared_experts.down_proj", D, c.shared_inner, c.mlp_bias)
            if c.moe_latent is not None:
                linear(f"{m}.fc1_latent_proj", Dl, D, c.mlp_bias)
                linear(f"{m}.fc2_latent_proj", D, Dl, c.mlp_bias)
    shapes["norm_f.weight"] = (D,)
    if not c.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    **MIXER_KINDS,
    "attention_q": "attention query weights W_q [H*dh, D]",
    "attention_k": "attention key weights W_k [Hkv*dh, D]",
    "attention_v": "attention value weights W_v [Hkv*dh, D]",
    "attention_out": "attention output weights W_o [D, H*dh]",
    "mlp": "MLP layers' weights W_up [F, D], W_down [D, F]",
    "router": "router weights W_router [E, D]",
    "router_bias": "router's correction bias b [E] (a buffer: chooses experts only; not in transformers' count)",
    "expert_up": "routed experts' up weights [Fe, Dl], E a layer",
    "expert_down": "routed experts' down weights [Dl, Fe], E a layer",
    "moe_latent": "the mixture's latent projections W_fc1 [Dl, D], W_fc2 [D, Dl]",
    "shared_expert": "shared expert's weights W_up_s [Fs, D], W_down_s [D, Fs]",
    "biases": "biases of the linear layers that have them",
    "norms": "RMSNorm gains (the Mamba layers' gated norm's [I] too)",
    "unembedding": "unembedding W_U [V, D] (untied)",
}

# The kinds of which one token's pass reads only k of E (params' "active" count): the routed experts.
ROUTED_KINDS = ("expert_up", "expert_down")
# A buffer the checkpoint holds beside the parameters (transformers' count leaves it out).
BUFFER_KINDS = ("router_bias",)

L = r"^layers\.\d+\."
M = L + r"mixer\."
KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embeddings\.weight$"), "token_embedding"),
    *mixer_kind_of(L),
    (re.compile(M + r"q_proj\.weight$"), "attention_q"),
    (re.compile(M + r"k_proj\.weight$"), "attention_k"),
    (re.compile(M + r"v_proj\.weight$"), "attention_v"),
    (re.compile(M + r"o_proj\.weight$"), "attention_out"),
    (re.compile(M + r"(up|down)_proj\.weight$"), "mlp"),
    (re.compile(M + r"gate\.weight$"), "router"),
    (re.compile(M + r"gate\.e_score_correction_bias$"), "router_bias"),
    (re.compile(M + r"experts\.\d+\.up_proj\.weight$"), "expert_up"),
    (re.compile(M + r"experts\.\d+\.down_proj\.weight$"), "expert_down"),
    (re.compile(M + r"fc[12]_latent_proj\.weight$"), "moe_latent"),
    (re.compile(M + r"shared_experts\.(up|down)_proj\.weight$"), "shared_expert"),
    (re.compile(M + r"[\w.]+\.bias$"), "biases"),
    (re.compile(L + r"norm\.weight$"), "norms"),
    (re.compile(r"^norm_f\.weight$"), "norms"),
)

# A checkpoint's multi-token-prediction layers (mtp.*) are ignored, as transformers skips them.
LAYOUT = Layout(
    prefix="backbone.",
    layers="layers",
    embedding="embeddings.weight",
    ignored=r"mtp\..*",
    shapes=nemotron_h_shapes,
    kinds=KINDS,
    kind_of=KIND_OF,
    routed_kinds=ROUTED_KINDS,
    buffer_kinds=BUFFER_KINDS,
)
