"""The blocks: how a layer wires its parts to the residual stream. A family hands its parts to one of these (the
pre-norm block, OLMo 2's norms after the branches, Gemma's and GLM-4's four norms, a parallel block, a layer of one
branch, a block by kind of layer), and writes a block of its own only where the wiring itself differs (GPT-NeoX's
parallel residual with a norm a branch), and then from the same parts.

The parts' signatures, which every part keeps:
- a mixer (an attention, a hybrid's state-space or linear-attention layer): (h [T, D], its weights, config, the
  layer's tape, the layer's `LayerInputs`) -> [T, D];
- an MLP (or a mixture of experts): (h [T, D], its weights, config, the layer's tape) -> [T, D];
- a norm: (x, its weights, config) -> x normed (parts/norms.py).
A block is a part too: its tensors are its norms' and its parts' under the names its layer's checkpoint gives them,
its products its parts'.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from ...engine.ops import constant
from ...engine.stages import Stage, by_op
from ...engine.tape import Tape
from .norms import RMSNorm
from .part import Part, Products, Tensors, module_of


@dataclass(frozen=True)
class LayerInputs:
    """What a layer's mixer reads besides the stream, made by the decoder for that layer (parts/decoder.py)."""

    cache: Any  # its cache's handle: KVCache.layer(i) (append(k, v) -> K, V), or a recurrent layer's state; None
    mask: np.ndarray | None  # the attention bias of its window (0 or -inf, [T, t] or [B, 1, T, t]); None: counting
    rotary: tuple  # (cos, sin) of its rope (families/rotary.py); () where its layer has none
    pads: np.ndarray | None  # a left-padded batch: the pad slots of each row (a recurrent state must skip them)
    # What a layer leaves for the later layers of the same pass, one dict the decoder hands every layer: the keys each
    # layer's indexer chose, by layer, for the layers that attend over another's choice (GLM-5's shared top-k)
    choices: dict = field(default_factory=dict)
    ids: Any = None  # the pass's token ids [T] (or [B, T]): what DeepSeek-V4's hash router routes by


def under(name: str, tensors: Tensors) -> Tensors:
    """A part's tensors under its module's name ("": the layer's own, where a part keeps its modules at the layer's
    top: Falcon-H1's mixers, Granite's mixture and shared MLP)."""
    return {f"{name}.{key}" if name else key: tensor for key, tensor in tensors.items()}


def held_under(config: Any, layer: int, named: Iterable[tuple[str, Any]]) -> Tensors:
    """The tensors of each (module name, part) of a layer, each part's under its name, in that order."""
    return {key: tensor for name, part in named for key, tensor in under(name, part.tensors(config, layer)).items()}


def norm_stage(op: str, norm: Any, index: str) -> Stage:
    """A block's norm of the stream: `h = RMSNorm_1(x)`, its equation naming the norm (and how its gains scale)."""
    return Stage(op, (op,), "norm", f"h = {norm.label}_{index}(x){norm.note}", "x [T, D]", reads_stream=True)


RESID_MID = Stage("resid_mid", ("resid_mid",), "residual", "x = x + o", "x, o [T, D]")
RESID_POST = Stage("resid_post", ("resid_post",), "residual", "x = x + m", "x, m [T, D]")


def times(x, config: Any, field: str):
    """x times the config's `field` (a multiplier of a branch: µP's), in x's dtype; x itself where `field` is ""."""
    return x * constant(x, getattr(config, field)) if field else x


@dataclass(frozen=True)
class PreNorm(Part):
    """The pre-norm block: x + mixer(norm_1(x)), then x + mlp(norm_2(x)). `names`: where a layer's checkpoint keeps
    the first norm, the mixer, the second norm and the MLP ("input_layernorm", "self_attn", ...; "" where the part
    keeps its modules at the layer's top). `residual`: the config's field each branch is multiplied by before its add
    (Granite's residual_multiplier)."""

    mixer: Any
    mlp: Any
    norm: Any = RMSNorm()
    names: tuple[str, str, str, str] = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")
    residual: str = ""

    def stages(self, config: Any) -> dict[str, Stage]:
        mid, post = RESID_MID, RESID_POST
        if self.residual:  # the branches scaled on their way back
            mid = replace(mid, equation=f"x = x + {self.residual} o")
            post = replace(post, equation=f"x = x + {self.residual} m")
        return by_op(norm_stage("ln_1", self.norm, "1"), mid, norm_stage("ln_2", self.norm, "2"), post)

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        ln_1, mixer, ln_2, mlp = (module_of(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        x = at.stage("resid_mid", x + times(self.mixer(h, mixer, config, at, inputs), config, self.residual), "T D")
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")
        return at.stage("resid_post", x + times(self.mlp(h, mlp, config, at), config, self.residual), "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return held_under(config, layer, zip(self.names, (self.norm, self.mixer, self.norm, self.mlp)))

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


@dataclass(frozen=True)
class DeepNorm(Part):
    """DeepNorm's block (MiniMax-01's): the stream is normed on its way into each branch and stays normed, the branch
    added to it scaled: h = norm_1(x), x = alpha_1 h + beta_1 mixer(h); then h = norm_2(x), x = alpha_2 h + beta_2
    mlp(h). `scales`: the config's fields alpha_1, beta_1, alpha_2, beta_2; `names`, as PreNorm's."""

    mixer: Any
    mlp: Any
    scales: tuple[str, str, str, str]
    norm: Any = RMSNorm()
    names: tuple[str, str, str, str] = ("input_layernorm", "self_attn", "post_attention_layernorm", "mlp")

    def stages(self, config: Any) -> dict[str, Stage]:
        a1, b1, a2, b2 = self.scales
        return by_op(
            norm_stage("ln_1", self.norm, "1"),
            replace(RESID_MID, equation=f"x = {a1} h + {b1} o  (the normed stream: DeepNorm)", reads="h, o [T, D]"),
            norm_stage("ln_2", self.norm, "2"),
            replace(RESID_POST, equation=f"x = {a2} h + {b2} m  (the normed stream: DeepNorm)", reads="h, m [T, D]"),
        )

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        a1, b1, a2, b2 = self.scales
        ln_1, mixer, ln_2, mlp = (module_of(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        o = self.mixer(h, mixer, config, at, inputs)
        x = at.stage("resid_mid", times(h, config, a1) + times(o, config, b1), "T D")
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")
        m = self.mlp(h, mlp, config, at)
        return at.stage("resid_post", times(h, config, a2) + times(m, config, b2), "T D")

    # the same modules as the pre-norm block's, under the same names: its kinds, tensors and products
    kinds = PreNorm.kinds
    tensors = PreNorm.tensors
    products = PreNorm.products


@dataclass(frozen=True)
class PostNorm(Part):
    """OLMo 2's block: no norm before attention or the MLP; each branch reads the stream x itself and its output is
    normed before it is added back: x + norm(mixer(x)), then x + norm(mlp(x)). `names`: where a layer's checkpoint
    keeps the mixer, the norm of its output, the MLP and the norm of its output."""

    mixer: Any
    mlp: Any
    norm: Any = RMSNorm()
    names: tuple[str, str, str, str] = ("self_attn", "post_attention_layernorm", "mlp", "post_feedforward_layernorm")

    def stages(self, config: Any) -> dict[str, Stage]:
        norm = self.norm.label
        return by_op(
            Stage("post_attn_norm", ("attn.normed",), "norm", f"o = {norm}_attn(o)  (the branch, before the add)", "o [T, D]"),
            RESID_MID,
            Stage("post_mlp_norm", ("mlp.normed",), "norm", f"m = {norm}_mlp(m)  (the branch, before the add)", "m [T, D]"),
            RESID_POST,
        )  # fmt: skip

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        mixer, attn_norm, mlp, mlp_norm = (getattr(p, name) for name in self.names)
        o = self.mixer(x, mixer, config, at, inputs)  # x itself: no norm before a branch
        o = at.stage("post_attn_norm", self.norm(o, attn_norm, config), "T D")
        x = at.stage("resid_mid", x + o, "T D")
        m = self.mlp(x, mlp, config, at)
        m = at.stage("post_mlp_norm", self.norm(m, mlp_norm, config), "T D")
        return at.stage("resid_post", x + m, "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        mixer, attn_norm, mlp, mlp_norm = self.names
        parts = ((mixer, self.mixer), (mlp, self.mlp), (attn_norm, self.norm), (mlp_norm, self.norm))
        return held_under(config, layer, parts)

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


GEMMA_NORMS = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm")


@dataclass(frozen=True)
class Sandwich(Part):
    """Four norms a block (Gemma's, GLM-4's): x + norm(mixer(norm(x))), then x + norm(mlp(norm(x))), each branch normed
    on its way in and on its way out. `names`: where a layer's checkpoint keeps the mixer, the MLP and the four norms:
    before the mixer, after it, before the MLP, after it (Gemma's names by default)."""

    mixer: Any
    mlp: Any
    norm: Any = RMSNorm()
    names: tuple[str, ...] = ("self_attn", "mlp", *GEMMA_NORMS)
    resid: ClassVar[str] = "resid_post"  # the op of the MLP's add (Gemma 4's block scales the stream after it)

    def stages(self, config: Any) -> dict[str, Stage]:
        norm, note, ln_2 = self.norm.label, self.norm.note, norm_stage("ln_2", self.norm, "2")
        o = f"o = {norm}_o(o){note}  (before the add)"
        m = f"m = {norm}_m(m){note}  (before the add)"
        return by_op(
            norm_stage("ln_1", self.norm, "1"),
            Stage("post_attn_norm", ("post_attn_norm",), "norm", o, "o [T, D]"),
            Stage("resid_mid", ("resid_mid",), "residual", f"x = x + {norm}_o(o)", "x, o [T, D]"),
            replace(ln_2, equation=f"{ln_2.equation}  ({self.names[4]})"),
            Stage("post_mlp_norm", ("post_mlp_norm",), "norm", m, "m [T, D]"),
            Stage(self.resid, (self.resid,), "residual", f"x = x + {norm}_m(m)", "x, m [T, D]"),
        )

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        return self.sandwiched(x, p, config, at.declaring(self.declared(config)), inputs)

    def sandwiched(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        """The block's two branches, each normed on its way in and out, on a tape that knows its stages."""
        mixer, mlp, ln_1, post_attn, ln_2, post_mlp = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        o = self.mixer(h, mixer, config, at, inputs)
        o = at.stage("post_attn_norm", self.norm(o, post_attn, config), "T D")
        x = at.stage("resid_mid", x + o, "T D")
        h = at.stage("ln_2", self.norm(x, ln_2, config), "T D")
        m = self.beside_mlp(self.mlp(h, mlp, config, at), x, p, config, at)
        m = at.stage("post_mlp_norm", self.norm(m, post_mlp, config), "T D")
        return at.stage(self.resid, x + m, "T D")

    def beside_mlp(self, m, x, p: SimpleNamespace, config: Any, at: Tape):
        """The MLP's output m with what the block computes beside it from the stream x (Gemma 4's experts): here,
        nothing."""
        return m

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        mixer, mlp, *norms = self.names
        return held_under(config, layer, [(mixer, self.mixer), (mlp, self.mlp), *((n, self.norm) for n in norms)])

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


@dataclass(frozen=True)
class Parallel(Part):
    """The mixer and the MLP side by side on one normed input, summed into the stream in one step: x + mixer(h) +
    mlp(h), h = norm(x) (Cohere's and GPT-J's parallel block; GPT-NeoX's norms each branch's input on its own).
    `names`: where a layer's checkpoint keeps the norm, the mixer and the MLP."""

    mixer: Any
    mlp: Any
    norm: Any = RMSNorm()
    names: tuple[str, str, str] = ("input_layernorm", "self_attn", "mlp")

    def stages(self, config: Any) -> dict[str, Stage]:
        parallel = "x = x + o + m  (both branches read the one h)"
        return by_op(
            norm_stage("ln_1", self.norm, "1"),
            Stage("resid_post", ("resid_post",), "residual", parallel, "x, o, m [T, D]"),
        )

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        ln_1, mixer, mlp = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, ln_1, config), "T D")
        o = self.mixer(h, mixer, config, at, inputs)
        m = self.mlp(h, mlp, config, at)
        return at.stage("resid_post", x + o + m, "T D")  # in transformers' order: (x + o) + m

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.mlp.kinds, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return held_under(config, layer, zip(self.names, (self.norm, self.mixer, self.mlp)))

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer) | self.mlp.products(config, T, t, B, layer)


@dataclass(frozen=True)
class Residual(Part):
    """A layer that is one branch: x + mixer(norm(x)) (Mamba-2's, Nemotron-H's: each layer one mixer, or an MLP or a
    mixture of experts in its place, which reads nothing of the layer's inputs: `takes_inputs` False). `names`: where
    a layer's checkpoint keeps the norm and the mixer."""

    mixer: Any
    norm: Any = RMSNorm()
    names: tuple[str, str] = ("norm", "mixer")
    takes_inputs: bool = True

    def stages(self, config: Any) -> dict[str, Stage]:
        norm = self.norm
        ln_1 = Stage("ln_1", ("ln_1",), "norm", f"h = {norm.label}(x){norm.note}", "x [T, D]", reads_stream=True)
        return by_op(ln_1, RESID_POST)

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        norm, mixer = (getattr(p, name) for name in self.names)
        h = at.stage("ln_1", self.norm(x, norm, config), "T D")
        m = self.mixer(h, mixer, config, at, inputs) if self.takes_inputs else self.mixer(h, mixer, config, at)
        return at.stage("resid_post", x + m, "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {**self.mixer.kinds, **self.norm.kinds}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return held_under(config, layer, zip(self.names, (self.norm, self.mixer)))

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.mixer.products(config, T, t, B, layer)


@dataclass(frozen=True)
class Branch:
    """One of ParallelMixers' branches: its mixer, where the layer's checkpoint keeps it (`name`), the label of its stages
    and the prefix of their captures (its mixer's: "ssm" and "mixer", "attn" and "attn"), and the config's fields its
    input and its output are multiplied by ("": none; Falcon-H1's µP multipliers)."""

    mixer: Any
    name: str
    label: str
    captures: str
    into: str = ""
    out: str = ""


@dataclass(frozen=True, eq=False)  # a part is itself: compared and hashed by identity
class ParallelMixers(Part):
    """Mixers side by side on one input, their outputs summed: o = sum over the branches of b(h m_in) m_out (Falcon-H1's
    Mamba-2 mixer beside its attention). Each branch's products are counted as it computes them; the sum, as every
    multiplier, is a stage of no product. A layer's scan is its branches'."""

    branches: tuple[Branch, ...]
    summed: str = "mixer.summed"  # the capture of their sum

    def stages(self, config: Any) -> dict[str, Stage]:
        stages = []
        for b in self.branches:
            into, out = f"h_{b.label} = {b.into} h", f"o_{b.label} = {b.out} o_{b.label}"
            if b.into:
                stages.append(Stage(f"{b.label}.in_scale", (f"{b.captures}.in_scaled",), "scale", into, "h [T, D]"))
            if b.out:
                stages.append(Stage(f"{b.label}.out_scale", (f"{b.captures}.out_scaled",), "scale", out, "o [T, D]"))
        total = " + ".join(f"o_{b.label}" for b in self.branches)
        each = "each branch's products counted as it computes them; the sum, no product"
        return by_op(*stages, Stage("branches.sum", (self.summed,), "add", f"o = {total}  ({each})", "o [T, D]"))

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        at = at.declaring(self.declared(config))
        total = None
        for b in self.branches:
            x = at.stage(f"{b.label}.in_scale", times(h, config, b.into), "T D") if b.into else h
            o = b.mixer(x, module_of(p, b.name), config, at, inputs)
            o = at.stage(f"{b.label}.out_scale", times(o, config, b.out), "T D") if b.out else o
            total = o if total is None else total + o
        return at.stage("branches.sum", total, "T D")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {kind: text for b in self.branches for kind, text in b.mixer.kinds.items()}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {name: t for b in self.branches for name, t in under(b.name, b.mixer.tensors(config, layer)).items()}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return {op: n for b in self.branches for op, n in b.mixer.products(config, T, t, B, layer).items()}

    def scan(self, config: Any, T: int, t: int, B: int = 1) -> dict[str, tuple[int, int]]:
        return {
            op: n for b in self.branches if hasattr(b.mixer, "scan") for op, n in b.mixer.scan(config, T, t, B).items()
        }

    def scan_recurrent_macs(self, config: Any, T: int) -> int:
        return sum(b.mixer.scan_recurrent_macs(config, T) for b in self.branches if hasattr(b.mixer, "scan"))


@dataclass(frozen=True, eq=False)  # a part is itself: compared and hashed by identity (its blocks are a dict)
class ByKind(Part):
    """A block for each kind of layer the config names (config.layer_types[i]): layer i runs its kind's."""

    blocks: Mapping[str, Any]

    def __call__(self, x, p: SimpleNamespace, config: Any, at: Tape, inputs: LayerInputs):
        return self.blocks[config.layer_types[at.layer_index or 0]](x, p, config, at, inputs)

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        """Its blocks' kinds, their mixers' first (a pass meets a layer's mixer before its MLP), then the rest."""
        mixers = {kind: text for block in self.blocks.values() for kind, text in block.mixer.kinds.items()}
        return mixers | {kind: text for block in self.blocks.values() for kind, text in block.kinds.items()}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return self.blocks[config.layer_types[layer]].tensors(config, layer)

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.blocks[config.layer_types[layer]].products(config, T, t, B, layer)
