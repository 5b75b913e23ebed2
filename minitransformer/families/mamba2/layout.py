"""Where a Mamba-2 keeps its numbers in a Hugging Face checkpoint (as transformers' Mamba2ForCausalLM names them):
`backbone.embeddings`, each layer's `norm` and `mixer` (in_proj, conv1d, dt_bias, A_log, D, the gated norm,
out_proj), `backbone.norm_f` and `lm_head`. nn.Linear weights are [out, in]; the conv's weight [Cv, 1, K]."""

from __future__ import annotations

import re

from ..architecture import Layout
from .config import Mamba2Config, MixerShapes


def mixer_shapes(config: MixerShapes, mixer: str, bias: bool) -> dict[str, tuple[int, ...]]:
    """A Mamba-2 mixer's tensors under the name `mixer` (biases on in_proj and out_proj where `bias`)."""
    D, inner, Cv, Hs, K = config.n_embd, config.d_inner, config.conv_dim, config.ssm_heads, config.conv_kernel
    shapes: dict[str, tuple[int, ...]] = {f"{mixer}.in_proj.weight": (config.in_proj_dim, D)}
    if bias:
        shapes[f"{mixer}.in_proj.bias"] = (config.in_proj_dim,)
    shapes[f"{mixer}.conv1d.weight"] = (Cv, 1, K)
    if config.use_conv_bias:
        shapes[f"{mixer}.conv1d.bias"] = (Cv,)
    shapes.update({f"{mixer}.dt_bias": (Hs,), f"{mixer}.A_log": (Hs,), f"{mixer}.D": (Hs,), f"{mixer}.norm.weight": (inner,),
                   f"{mixer}.out_proj.weight": (D, inner)})  # fmt: skip
    if bias:
        shapes[f"{mixer}.out_proj.bias"] = (D,)
    return shapes


def mamba2_shapes(config: Mamba2Config) -> dict[str, tuple[int, ...]]:
    D, V = config.n_embd, config.vocab_size
    shapes: dict[str, tuple[int, ...]] = {"embeddings.weight": (V, D)}
    for i in range(config.n_layer):
        shapes[f"layers.{i}.norm.weight"] = (D,)
        shapes.update(mixer_shapes(config, f"layers.{i}.mixer", config.use_bias))
    shapes["norm_f.weight"] = (D,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (V, D)
    return shapes


MIXER_KINDS: dict[str, str] = {
    "ssm_in": "state-space in-projection W_in [I+Cv+Hs, D] (z, x, B, C, dt)",
    "ssm_conv": "causal conv kernels [Cv, 1, K] and their biases [Cv]",
    "ssm_heads": "per-head dt_bias, A_log and D [Hs] each",
    "ssm_out": "state-space out-projection W_out [D, I]",
}
KINDS: dict[str, str] = {
    "token_embedding": "token embedding W_te [V, D]",
    **MIXER_KINDS,
    "biases": "in_proj's and out_proj's biases, where the config has them",
    "norms": "RMSNorm gains (the gated norm's [I] too)",
    "unembedding": "unembedding W_U [V, D] (untied)",
}


def mixer_kind_of(layer: str) -> tuple:
    """(regex, kind) for a mixer's tensors, under `layer` (a regex of the layer's prefix, ending in a dot)."""
    m = layer + r"mixer\."
    return (
        (re.compile(m + r"in_proj\.weight$"), "ssm_in"),
        (re.compile(m + r"conv1d\.(weight|bias)$"), "ssm_conv"),
        (re.compile(m + r"(dt_bias|A_log|D)$"), "ssm_heads"),
        (re.compile(m + r"out_proj\.weight$"), "ssm_out"),
        (re.compile(m + r"(in|out)_proj\.bias$"), "biases"),
        (re.compile(m + r"norm\.weight$"), "norms"),
    )


L = r"^layers\.\d+\."
KIND_OF = (
    (re.compile(r"^lm_head\.weight$"), "unembedding"),
    (re.compile(r"^embeddings\.weight$"), "token_embedding"),
    *mixer_kind_of(L),
    (re.compile(L + r"norm\.weight$"), "norms"),
    (re.compile(r"^norm_f\.weight$"), "norms"),
)

# A Mamba-2 checkpoint holds only its weights: nothing to ignore.
LAYOUT = Layout(
    prefix="backbone.", layers="layers", embedding="embeddings.weight", ignored=r"$^", shapes=mamba2_shapes,
    kinds=KINDS, kind_of=KIND_OF,
)  # fmt: skip
