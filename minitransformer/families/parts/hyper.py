"""Manifold-constrained hyper-connections (mHC: DeepSeek-V4's), as transformers' DeepseekV4HyperConnection and
DeepseekV4HyperHead compute them: the residual stream kept as N = hc_mult streams X [T, N, D] (the embedding copied
into each), and in each block, around each branch:

- the streams flattened and RMS-normed without gains, x' = X / rms(X) [T, N D], then one product with weights,
  m = x' W_hc [T, (2 + N) N]: each token's mixing weights, cut into pre [N], post [N] and comb [N, N];
- pre = sigmoid(a_pre m_pre + b_pre) + eps, post = 2 sigmoid(a_post m_post + b_post), comb = softmax over its rows of
  a_comb m_comb + b_comb, + eps, then made doubly stochastic by Sinkhorn's alternating row and column normalisations
  (hc_sinkhorn_iters of them, the columns first);
- the block's input collapses the streams, h = pre X (a product of length N: one dot product a token and number);
- the block's output o [T, D] is spread back, post o [T, N, D], and the streams mixed, comb^T X (a product of length
  N), their sum the new streams.
After the last block the head (its own W_hc of N outputs) collapses the streams into one, h = pre X, before the final
norm. The counting rule: the mixing weights are a product with weights (N D long); the collapse and the mixing of the
streams are products of the streams, each number a dot product of the N streams' numbers; the spread is a product
by one number (a multiply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from types import SimpleNamespace
from typing import Any

import numpy as np

from ...engine.lens_names import STREAMS_IN
from ...engine.ops import constant, rms_norm, sigmoid, softmax
from ...engine.shapes import ShapeOnly
from ...engine.stages import HYPER_CONNECTIONS, HYPER_STREAMS, Stage, by_op
from ...engine.tape import Tape
from .blocks import LayerInputs, held_under, norm_stage
from .decoder import TokenEmbedding
from .norms import RMSNorm
from .part import Part, Products, Tensor, Tensors, module_of

KINDS = {
    "hyper_connections": "hyper-connections' mixing weights W_hc [(2+N)N, N D] (the head's [N, N D]), their "
    "biases and scales"
}


@cache
def hyper_stages(prefix: str) -> tuple[Stage, ...]:
    """The stages a hyper-connection runs before its branch (its weights, the collapse), under `prefix` (attn_hc,
    ffn_hc)."""
    return (
        Stage(f"{prefix}.norm", (f"{prefix}.normed",), "norm", "x' = X / rms(X)  (the N streams flattened, no gains)",
              "X [T, N, D]", reads_stream=True),
        Stage(f"{prefix}.weights", (f"{prefix}.mixes",), "matmul", "m = x' W_hc  (each token's mixing weights: pre "
              "N, post N, comb N x N)", "x' [T, N*D], W_hc [N*D, (2+N)*N]", HYPER_CONNECTIONS),
        Stage(f"{prefix}.pre", (f"{prefix}.pre",), "activation", "pre = sigmoid(a_pre m_pre + b_pre) + eps", "m [T, N]"),
        Stage(f"{prefix}.post", (f"{prefix}.post",), "activation", "post = 2 sigmoid(a_post m_post + b_post)",
              "m [T, N]"),
        Stage(f"{prefix}.comb", (f"{prefix}.comb",), "norm", "comb = Sinkhorn(softmax(a_comb m_comb + b_comb) + eps): "
              "rows and columns normalised in turn, hc_sinkhorn_iters times (doubly stochastic)", "m [T, N, N]"),
        Stage(f"{prefix}.collapse", (f"{prefix}.collapsed",), "matmul", "h = pre X  (the streams collapsed into the "
              "branch's input: each number a dot product of its N streams)", "pre [T, 1, N], X [T, N, D]",
              HYPER_STREAMS, reads_stream=True),
    )  # fmt: skip


@cache
def mixing_stages(prefix: str, branch: str) -> tuple[Stage, ...]:
    """The stages after its branch: the branch's output spread to the streams, the streams mixed, their sum."""
    return (
        Stage(f"{prefix}.spread", (f"{prefix}.spread",), "multiply", f"Y = post {branch}  (the branch's output, to "
              "each stream by its weight)", f"post [T, N], {branch} [T, D]"),
        Stage(f"{prefix}.mix", (f"{prefix}.mixed",), "matmul", "X = comb^T X  (each stream a mix of the N streams)",
              "comb^T [T, N, N], X [T, N, D]", HYPER_STREAMS, reads_stream=True),
        Stage(f"{prefix}.add", (f"resid_{'mid' if prefix == 'attn_hc' else 'post'}",), "residual",
              f"X = comb^T X + post {branch}", "X [T, N, D]"),
    )  # fmt: skip


def unweighted_rms(x, eps: float):
    """x / sqrt(mean(x^2) + eps) over its last axis, without gains (transformers' DeepseekV4UnweightedRMSNorm)."""
    return rms_norm(x, constant(x, 1.0), eps)


def sinkhorn(logits, iterations: int, eps: float):
    """softmax over each row + eps, then the columns and the rows normalised in turn (transformers' order: the columns
    once, then iterations - 1 times the rows and the columns), each sum + eps: nearly doubly stochastic."""
    comb = softmax(logits) + constant(logits, eps)
    e = constant(logits, eps)
    comb = comb / (comb.sum(axis=-2, keepdims=True) + e)
    for _ in range(iterations - 1):
        comb = comb / (comb.sum(axis=-1, keepdims=True) + e)
        comb = comb / (comb.sum(axis=-2, keepdims=True) + e)
    return comb


@dataclass(frozen=True)
class HyperConnection(Part):
    """One hyper-connection (attn_hc or ffn_hc): its weights W_hc [(2+N)N, N D] ("fn"), biases [(2+N)N] ("base") and
    three scales ("scale"), at the layer's top under `names` (the checkpoint's hc_attn_ or hc_ffn_); `prefix`: its
    stages'."""

    prefix: str = "attn_hc"
    names: str = "hc_attn_"
    kinds = KINDS

    def stages(self, config: Any) -> dict[str, Stage]:
        branch = "o" if self.prefix == "attn_hc" else "m"
        return by_op(*hyper_stages(self.prefix), *mixing_stages(self.prefix, branch))

    def weights(self, X, p: SimpleNamespace, config: Any, at: Tape):
        """(post [T, N], comb [T, N, N], h [T, D]): the mixing weights of the streams X [T, N, D], and the branch's
        input collapsed from them."""
        at, N, eps, P = at.declaring(self.declared(config)), config.hc_mult, config.hc_eps, self.prefix
        flat = at.stage(f"{P}.norm", unweighted_rms(X.reshape(*X.shape[:-2], -1), config.norm_eps), "T N*D")
        fn, base, scale = (getattr(p, self.names + name) for name in ("fn", "base", "scale"))
        m = at.matmul(f"{P}.weights", flat, fn.T, "T N*D, N*D Nm -> T Nm")
        scale, base = scale.astype(m.dtype), base.astype(m.dtype)
        pre = at.stage(f"{P}.pre", sigmoid(m[..., :N] * scale[0] + base[:N]) + constant(m, eps), "T N")
        post = at.stage(f"{P}.post", constant(m, 2.0) * sigmoid(m[..., N : 2 * N] * scale[1] + base[N : 2 * N]), "T N")
        logits = m[..., 2 * N :] * scale[2] + base[2 * N :]
        logits = logits.reshape(*logits.shape[:-1], N, N)
        comb = at.stage(f"{P}.comb", sinkhorn(logits, config.hc_sinkhorn_iters, eps), "T N N")
        h = at.matmul(f"{P}.collapse", pre[..., None, :], X, "T 1 N, T N D -> T 1 D")
        return post, comb, h[..., 0, :]

    def mixed(self, X, post, comb, o, config: Any, at: Tape):
        """The new streams: comb^T X + post o."""
        at, P = at.declaring(self.declared(config)), self.prefix
        spread = at.stage(f"{P}.spread", post[..., None] * o[..., None, :], "T N D")
        mixed = at.matmul(f"{P}.mix", comb.swapaxes(-1, -2), X, "T N N, T N D -> T N D")
        return at.stage(f"{P}.add", mixed + spread, "T N D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        N, D = config.hc_mult, config.n_embd
        M = (2 + N) * N
        n, hc = self.names, "hyper_connections"
        return {f"{n}fn": Tensor((M, N * D), hc), f"{n}base": Tensor((M,), hc), f"{n}scale": Tensor((3,), hc)}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        N, D, P = config.hc_mult, config.n_embd, self.prefix
        return {
            f"{P}.weights": (B * T * (2 + N) * N, N * D),  # x' [T, N D] x W_hc [N D, (2+N) N]
            f"{P}.collapse": (B * T * D, N),  # pre [T, 1, N] x X [T, N, D]
            f"{P}.mix": (B * T * N * D, N),  # comb^T [T, N, N] x X [T, N, D]
        }


@dataclass(frozen=True)
class HyperConnected(Part):
    """DeepSeek-V4's block (transformers' DeepseekV4DecoderLayer) on the N streams X: the attention's hyper-connection
    collapses X into its input, h = RMSNorm_1(pre X), o = mixer(h), X = comb^T X + post o; then the same around the
    MLP with the second norm (the MLP given the pass's token ids: a hash router reads them)."""

    mixer: Any
    mlp: Any
    norm: Any = RMSNorm()
    attn_hc: HyperConnection = field(default_factory=lambda: HyperConnection("attn_hc", "hc_attn_"))
    ffn_hc: HyperConnection = field(default_factory=lambda: HyperConnection("ffn_hc", "hc_ffn_"))
    names: tuple[str, str, str, str] = ("attn_norm", "attn", "ffn_norm", "ffn")  # the checkpoint's

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(norm_stage("ln_1", self.norm, "1"), norm_stage("ln_2", self.norm, "2"))

    def __call__(self, X, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        ln_1, mixer, ln_2, mlp = (module_of(p, name) for name in self.names)
        post, comb, h = self.attn_hc.weights(X, p, config, at)
        h = at.stage("ln_1", self.norm(h, ln_1, config), "T D")
        X = self.attn_hc.mixed(X, post, comb, self.mixer(h, mixer, config, at, inputs), config, at)
        post, comb, h = self.ffn_hc.weights(X, p, config, at)
        h = at.stage("ln_2", self.norm(h, ln_2, config), "T D")
        return self.ffn_hc.mixed(X, post, comb, self.mlp(h, mlp, config, at, ids=inputs.ids), config, at)

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **KINDS, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        ln_1, mixer, ln_2, mlp = self.names
        named = [(mixer, self.mixer), (mlp, self.mlp), (ln_1, self.norm), (ln_2, self.norm)]
        return held_under(config, layer, [*named, ("", self.attn_hc), ("", self.ffn_hc)])  # theirs at the layer's top

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        parts = (self.attn_hc, self.mixer, self.ffn_hc, self.mlp)
        return {op: n for part in parts for op, n in part.products(config, T, t, B, layer).items()}


STREAMS = Stage(STREAMS_IN, (STREAMS_IN,), "reshape", "X = [x, ..., x]  (the embedding, one copy a stream: "
                "N = hc_mult residual streams)", "x [T, D]")  # fmt: skip


@dataclass(frozen=True)
class StreamsEmbedding(TokenEmbedding):
    """The token embedding copied into the N residual streams, X [T, N, D]."""

    def stages(self, config: Any) -> dict[str, Stage]:
        return super().stages(config) | by_op(STREAMS)

    def stream_shape(self, config: Any) -> tuple[int, ...]:
        """A position's numbers in the residual stream: N streams of D (an embedding without this method starts D)."""
        return (config.hc_mult, config.n_embd)

    def __call__(self, ids, p: SimpleNamespace, config: Any, tape: Tape, pads=None):
        x = super().__call__(ids, p, config, tape, pads)
        streams = (*x.shape[:-1], config.hc_mult, x.shape[-1])
        copied = ShapeOnly(streams, x.dtype) if isinstance(x, ShapeOnly) else np.broadcast_to(x[..., None, :], streams)
        return tape.declaring(self.declared(config)).stage(STREAMS_IN, copied, "T N D")


HEAD = (
    Stage("hc_head.norm", ("hc_head.normed",), "norm", "x' = X / rms(X)  (the N streams flattened, no gains)",
          "X [T, N, D]", reads_stream=True),
    Stage("hc_head.weights", ("hc_head.mixes",), "matmul", "m = x' W_head  (each token's weight of each stream)",
          "x' [T, N*D], W_head [N*D, N]", HYPER_CONNECTIONS),
    Stage("hc_head.pre", ("hc_head.pre",), "activation", "pre = sigmoid(a m + b) + eps", "m [T, N]"),
    Stage("hc_head.collapse", ("hc_head.collapsed",), "matmul", "x = pre X  (the streams collapsed into one, before "
          "the final norm)", "pre [T, 1, N], X [T, N, D]", HYPER_STREAMS, reads_stream=True),
)  # fmt: skip


@dataclass(frozen=True)
class HyperHead(Part):
    """The streams collapsed into one after the last block (transformers' DeepseekV4HyperHead: hc_fn [N, N D], hc_base
    [N], hc_scale [1], under `module`)."""

    module: str = "hc_head"
    kinds = KINDS

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(*HEAD)

    def __call__(self, X, p: SimpleNamespace, config: Any, tape: Tape):
        at = tape.declaring(self.declared(config))
        flat = at.stage("hc_head.norm", unweighted_rms(X.reshape(*X.shape[:-2], -1), config.norm_eps), "T N*D")
        m = at.matmul("hc_head.weights", flat, p.hc_fn.T, "T N*D, N*D N -> T N")
        pre = sigmoid(m * p.hc_scale.astype(m.dtype)[0] + p.hc_base.astype(m.dtype)) + constant(m, config.hc_eps)
        pre = at.stage("hc_head.pre", pre, "T N")
        return at.matmul("hc_head.collapse", pre[..., None, :], X, "T 1 N, T N D -> T 1 D")[..., 0, :]

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        N, D, hc = config.hc_mult, config.n_embd, "hyper_connections"
        return {"hc_fn": Tensor((N, N * D), hc), "hc_base": Tensor((N,), hc), "hc_scale": Tensor((1,), hc)}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        N, D = config.hc_mult, config.n_embd
        return {"hc_head.weights": (B * T * N, N * D), "hc_head.collapse": (B * T * D, N)}
