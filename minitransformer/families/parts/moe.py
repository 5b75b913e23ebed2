"""Mixtures of experts: the routers that choose k of a layer's E experts for each token, the routed experts that each
compute only the rows of the tokens routed to them, the shared expert every token goes through, and the mixture that
wires them in an MLP's place; each part with its tensors, its stages and its closed forms.

- routers: `SoftmaxRouter` (Mixtral's, Qwen3-MoE's, Qwen3.5's: a softmax over the E logits, the top k, renormalised
  or not), `TopKSoftmaxRouter` (gpt-oss's: a biased router, a softmax over the k largest logits alone),
  `GroupLimitedRouter` (DeepSeek-V3's, Nemotron-H's, GLM-4.5's: sigmoid scores, a correction bias that only chooses,
  the top k in the best groups; MiniMax-M2's without groups, renormalised without an epsilon, unscaled),
  `SigmoidRouter` (LFM2-MoE's: without groups, its bias optional); each returns each token's k experts and their
  gates [T, k], every top k through the tape's one rule (Tape.top_k, engine/selection.py);
- routed experts (`RoutedExperts`): each expert on the Te rows of its tokens (Tape.experts), its outputs weighed by
  their gates and added back to their rows, one record per op for the layer with each expert's share
  (Tape.record_gathered, engine/gathered.py): `SwiGLUExperts` (three nn.Linear each) and `FusedClampedExperts`
  (gpt-oss's fused gate and up, clamped);
- `SharedExpert`: a SwiGLU on every token (DeepSeek-V3's), its output weighed by a sigmoid gate where it has one
  (Qwen3.5's);
- `Mixture`: the router, the experts and a shared expert where there is one, summed; `MlpByKind`: a dense MLP in some
  layers, the experts in the others (config.layer_types).

Which tokens each expert computes is the router's choice in a real run; counting from a config alone (shape-only),
no router decides and the routing is assumed (Tape.routing, ROUTINGS). Every token's rows are computed by exactly k
experts, so a layer's expert products are T k rows whichever experts were chosen: the closed forms say so. The routed
experts' parameter kinds (`routed`) are those of which one token's pass reads k of E (the active parameters).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cache, reduce
from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from ...engine.ops import ACTIVATIONS, constant, sigmoid, softmax
from ...engine.shapes import ShapeOnly
from ...engine.stages import MLP, Stage, by_op
from ...engine.tape import Tape
from ...errors import UserError
from .attention import bias_of
from .part import Part, Products, Tensor, Tensors, linear, module_of, plus

ROUTINGS = {
    "balanced": "every expert gets T k / E of the T k token rows; the remainder one more each to the first experts",
    "worst": "every token to the same k experts (experts 0..k-1): the busiest expert computes all T rows",
}


def assumed_loads(tokens: int, n_experts: int, k: int, routing: str) -> list[int]:
    """The tokens each expert computes when no router decides (counting from a config alone): `tokens` x k rows in
    all, since every token goes to k different experts, spread as ROUTINGS says."""
    if routing not in ROUTINGS:
        raise UserError(f"routing {routing!r} is not known (known: {', '.join(ROUTINGS)})")
    if routing == "worst":
        return [tokens] * k + [0] * (n_experts - k)
    share, remainder = divmod(tokens * k, n_experts)
    return [share + (e < remainder) for e in range(n_experts)]


@dataclass(frozen=True)
class Routed:
    """The token rows routed to one expert: `rows` (of the batch's tokens, flattened) and `slots` (which of each
    token's k choices it was), or None for both when counting from shapes alone."""

    expert: int
    tokens: int
    rows: np.ndarray | None
    slots: np.ndarray | None

    def gather(self, x):
        """x's rows [n, ...] of the tokens routed here: [tokens, ...]."""
        if self.rows is None:
            return ShapeOnly((self.tokens, *x.shape[1:]), x.dtype)
        return x[self.rows]

    def gates(self, gates):
        """The gate weight of this expert for each of its tokens [tokens, 1] (gates: [n, k])."""
        if self.rows is None:
            return ShapeOnly((self.tokens, 1), gates.dtype)
        return gates[self.rows, self.slots, None]


def choice(at: Tape, op: str, chosen, config: Any):
    """A router's choice stage: the k experts of each token [T, k] (with their scores beside them, where it gives them),
    whose indices a hook's replacement must keep among the E experts (Tape.stage's `indices`)."""
    return at.stage(op, chosen, "T k", indices=range(config.n_experts))


def routed(chosen, n_experts: int, routing: str) -> Iterator[Routed]:
    """Each expert that gets tokens, in increasing order (as transformers adds their outputs): from `chosen`
    [n, k], the experts the router chose for each of n tokens, or, shape-only, as `routing` assumes."""
    if isinstance(chosen, ShapeOnly):
        n, k = chosen.shape
        for e, tokens in enumerate(assumed_loads(n, n_experts, k, routing)):
            if tokens:
                yield Routed(e, tokens, None, None)
        return
    for e in range(n_experts):
        rows, slots = np.nonzero(chosen == e)
        if len(rows):
            yield Routed(e, len(rows), rows, slots)


def add_rows(out, expert: Routed, y) -> None:
    """out[rows] += y: an expert's weighted outputs added to its tokens' rows (each token once per expert; or, where
    a table sends a token to the same expert twice, a hash router's, once for each time)."""
    if expert.rows is None:
        return
    if len(expert.rows) > 1 and np.any(expert.rows[1:] == expert.rows[:-1]):  # rows in order: repeats side by side
        np.add.at(out, expert.rows, y)
    else:
        out[expert.rows] += y


def top_k(scores, k: int, at: Tape):
    """(the k chosen experts [..., k], their scores [..., k]), highest first as torch.topk gives them, equal ones the
    lowest expert first (the tape's one rule, engine/selection.py; what it decided is in the ledger as
    router.topk's)."""
    chosen = at.top_k("router.topk", scores, k)
    if isinstance(scores, ShapeOnly):
        return chosen, ShapeOnly(chosen.shape, scores.dtype)
    return chosen, np.take_along_axis(scores, chosen, axis=-1)


# --- routers --------------------------------------------------------------------------------------------------------
def router_logits(equation: str = "r = h W_router  (one logit per expert)") -> Stage:
    reads = "h [T, D], W_router [D, E]"
    return Stage("router", ("moe.router_logits",), "matmul", equation, reads, MLP, product="router")


def chosen_probs(equation: str) -> Stage:
    return Stage("router.topk", ("moe.chosen", "moe.top_probs"), "select", equation, "p [T, E]")


TOPK = "the k experts of largest p for each token, and their p"
SOFTMAX_ROUTER = (
    router_logits(),
    Stage("router.softmax", ("moe.router_probs",), "softmax", "p = softmax(r) over the E experts", "r [T, E]"),
    chosen_probs(f"{TOPK} (highest first)"),
    Stage("router.renorm", ("moe.gates",), "scale", "gates = top p / their sum  (= softmax over the k chosen r)",
          "p [T, k]"),
)  # fmt: skip
# Where the top k are not renormalised, the chosen experts' probabilities are the gates as they are.
UNNORMALISED_ROUTER = (*SOFTMAX_ROUTER[:2], chosen_probs(f"{TOPK}: the gates (not renormalised)"))


# ERNIE 4.5's choice: the probabilities plus a correction bias, which chooses and weighs nothing; its renormalisation
# divides by the sum or by a floor where the sum is smaller.
CORRECTED = chosen_probs(
    "the k experts of largest p + b for each token (b: the correction bias, for choosing only), "
    "and their p (highest p + b first)"
)
FLOORED = "gates = top p / max(their sum, moe_norm_min)"


@dataclass(frozen=True)
class SoftmaxRouter(Part):
    """r = h W_router [T, E], p = softmax(r) over the E experts, the k largest kept and, where it renormalises, divided
    by their sum (= a softmax over the k chosen logits; computed as transformers does, so that the floats agree): the
    gates. `renormalise`: always (Mixtral's, Qwen3.5's), or the config field that says (Qwen3-MoE's norm_topk_prob);
    `module`: where the mixture's checkpoint keeps W_router ([E, D]). ERNIE 4.5's options: `correction`, where the
    mixture's checkpoint keeps a correction bias b [1, E] added to p to choose the k (their gates are their p, without
    it: DeepSeek-V3's rule over a softmax), a Parameter that transformers counts; `floor`, the config field of the
    least sum the k are divided by (moe_norm_min)."""

    renormalise: bool | str = True
    module: str = "gate"
    correction: str | None = None
    floor: str | None = None

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        bias = "router's correction bias b [1, E] (chooses experts only; a parameter in transformers' count)"
        return {"router": "router weights W_router [E, D]", **({"router_bias": bias} if self.correction else {})}

    def renormalises(self, config: Any) -> bool:
        return self.renormalise if isinstance(self.renormalise, bool) else getattr(config, self.renormalise)

    def stages(self, config: Any) -> dict[str, Stage]:
        stages = list(SOFTMAX_ROUTER if self.renormalises(config) else UNNORMALISED_ROUTER)
        if self.correction:
            stages[2] = CORRECTED
        if self.floor and len(stages) > 3:
            stages[3] = replace(stages[3], equation=FLOORED)
        return by_op(*stages)

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        logits = at.matmul("router", h, getattr(p, self.module).weight.T, "T D, D E -> T E")
        probs = at.stage("router.softmax", softmax(logits), "T E")
        chosen, gates = choice(at, "router.topk", self.chosen(probs, p, config, at), config)
        if self.renormalises(config):
            total = gates.sum(axis=-1, keepdims=True)
            if self.floor:  # the sum, or the floor where it is smaller
                total = np.maximum(total, constant(total, getattr(config, self.floor)))
            gates = at.stage("router.renorm", gates / total, "T k")
        return chosen, gates

    def chosen(self, probs, p: SimpleNamespace, config: Any, at: Tape):
        """Each token's k experts and their p: the k largest p, or where there is a correction bias, of p + b."""
        if self.correction is None:
            return top_k(probs, config.top_k, at)
        bias = reduce(getattr, self.correction.split("."), p)
        chosen, _ = top_k(probs + bias.astype(probs.dtype), config.top_k, at)
        if isinstance(probs, ShapeOnly):
            return chosen, ShapeOnly(chosen.shape, probs.dtype)
        return chosen, np.take_along_axis(probs, chosen, axis=-1)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        bias = {self.correction: Tensor((1, config.n_experts), "router_bias")} if self.correction else {}
        return linear(self.module, config.n_experts, config.n_embd, False, "router") | bias

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return {"router": (B * T * config.n_experts, config.n_embd)}  # h [T, D] x W_router [D, E]


TOPK_SOFTMAX_ROUTER = (
    router_logits("r = h W_router + b_router  (one logit per expert)"),
    Stage("router.topk", ("moe.chosen", "moe.top_logits"), "select",
          "the k experts of largest r for each token, and their r (highest first)", "r [T, E]"),
    Stage("router.softmax", ("moe.gates",), "softmax", "gates = softmax of the k chosen r", "r [T, k]"),
)  # fmt: skip


TOPK_SIGMOID = Stage("router.sigmoid", ("moe.gates",), "activation",
                     "gates = sigmoid of each chosen r  (each on its own: no sum over the k)", "r [T, k]")  # fmt: skip


@dataclass(frozen=True)
class TopKSoftmaxRouter(Part):
    """gpt-oss's router: r = h W_router + b_router [T, E], each token's k largest logits chosen and weighed by a
    softmax over those k alone (Mixtral's takes a softmax over all E first, then the top k renormalised); `bias`
    False: no b_router (Granite's). `module`: where the mixture's checkpoint keeps W_router (a dotted path).
    `sigmoid`: each chosen logit's gate its own sigmoid, in place of the softmax over the k (Llama 4's Llama4Router)."""

    module: str = "router"
    bias: bool = True
    sigmoid: bool = False

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {"router": "router weights W_router [E, D]" + (" and bias [E]" if self.bias else "")}

    def stages(self, config: Any) -> dict[str, Stage]:
        logits, choice, gates = TOPK_SOFTMAX_ROUTER
        logits = logits if self.bias else router_logits("r = h W_router  (one logit per expert)")
        return by_op(logits, choice, TOPK_SIGMOID if self.sigmoid else gates)

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at, w = at.declaring(self.declared(config)), module_of(p, self.module)
        logits = at.matmul("router", h, w.weight.T, "T D, D E -> T E", bias=getattr(w, "bias", None))
        chosen, top = choice(at, "router.topk", top_k(logits, config.top_k, at), config)
        if self.sigmoid:
            return chosen, at.stage("router.sigmoid", sigmoid(top), "T k")
        return chosen, at.stage("router.softmax", softmax(top), "T k")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return linear(self.module, config.n_experts, config.n_embd, self.bias, "router", bias_kind="router")

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return {"router": (B * T * config.n_experts, config.n_embd)}  # h [T, D] x W_router [D, E]


CHOSEN_IN_GROUPS = " in the topk_group groups whose 2 largest s + b sum highest"


@dataclass(frozen=True)
class GroupLimitedRouter(Part):
    """The sigmoid router with a correction bias (transformers' DeepseekV3TopkRouter; Nemotron-H's, GLM-4.5's,
    MiniMax-M2's): scores s = sigmoid(h W_router) [T, E]; the choice adds the correction bias b (s + b, only to
    choose), keeps the topk_group of n_group groups whose two best s + b sum highest (where `groups`: DeepSeek-V3's;
    MiniMax-M2 has none), then the k best s + b in them; each chosen expert's gate is its s (unbiased), divided by
    their sum (+ `eps`) where `renormalise` (always, or the config field that says: norm_topk_prob), times the
    config's `scale` (routed_scaling_factor; None: none). b is a buffer, not a parameter, kept in `module` beside
    W_router, or at `bias` under the mixture (MiniMax-M2's e_score_correction_bias)."""

    module: str = "gate"
    groups: bool = True
    renormalise: bool | str = "norm_topk_prob"
    eps: float = 1e-20
    scale: str | None = "routed_scaling_factor"
    bias: str = ""  # the correction bias's name under the mixture ("": the router module's e_score_correction_bias)
    kinds = {
        "router": "router weights W_router [E, D]",
        "router_bias": "router's correction bias b [E] (a buffer: chooses experts only; not in transformers' count)",
    }
    buffers: ClassVar[tuple[str, ...]] = ("router_bias",)

    def stages(self, config: Any) -> dict[str, Stage]:
        groups = CHOSEN_IN_GROUPS if self.groups else ""
        renorm = f" / their sum ({self.renormalise})" if isinstance(self.renormalise, str) else " / their sum"
        renorm = renorm if self.renormalise else ""
        scale = f" x {self.scale}" if self.scale else ""
        return by_op(
            router_logits("r = h W_router  (one logit per routed expert)"),
            Stage("router.sigmoid", ("moe.scores",), "activation", "s = sigmoid(r)", "r [T, E]"),
            Stage("router.choose", ("moe.chosen",), "select", "the k experts of largest s + b (b: the correction bias, "
                  f"for choosing only){groups}", "s [T, E], b [E]"),
            Stage("router.weigh", ("moe.gates",), "scale", f"gates = the chosen s (no bias){renorm}{scale}",
                  "s [T, k]"),
        )  # fmt: skip

    score_op: ClassVar[str] = "router.sigmoid"  # the stage of the scores

    @staticmethod
    def score(logits):
        """Each expert's score s from its logit r."""
        return sigmoid(logits)

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        scores = self.scores(h, p, at)
        chosen = choice(at, "router.choose", self.choose(scores, self.correction_bias(p), config, at), config)
        return chosen, at.stage("router.weigh", self.weigh(scores, chosen, config), "T k")

    def scores(self, h, p: SimpleNamespace, at: Tape):
        """s [T, E]: each token's score of each expert, from its logit r = h W_router."""
        logits = at.matmul("router", h, getattr(p, self.module).weight.T, "T D, D E -> T E")
        return at.stage(self.score_op, self.score(logits), "T E")

    def correction_bias(self, p: SimpleNamespace):
        """b, where the mixture's weights `p` keep it."""
        return getattr(p, self.bias) if self.bias else getattr(p, self.module).e_score_correction_bias

    def choose(self, scores, correction_bias, config: Any, at: Tape):
        """The k experts of each token [..., k]: with s' = s + b, where it has groups the topk_group of the n_group
        groups (E / n_group experts each) whose two largest s' sum highest, then the k largest s' among those groups'
        experts. Both choices are the tape's top k, in the ledger as router.groups and router.choose."""
        k = config.top_k
        if isinstance(scores, ShapeOnly):
            return at.top_k("router.choose", scores, k)
        biased = scores + correction_bias.astype(scores.dtype)
        if not self.groups:
            return at.top_k("router.choose", biased, k)
        E, G = config.n_experts, config.n_group
        groups = biased.reshape(*biased.shape[:-1], G, E // G)
        best_two = -np.sort(-groups, axis=-1)[..., :2].sum(axis=-1)  # [..., G]
        kept = at.top_k("router.groups", best_two, config.topk_group)
        mask = np.zeros(best_two.shape, dtype=bool)
        np.put_along_axis(mask, kept, True, axis=-1)
        allowed = np.where(np.repeat(mask, E // G, axis=-1), biased, -np.inf)
        return at.top_k("router.choose", allowed, k)

    def weigh(self, scores, chosen, config: Any):
        """The chosen experts' sigmoid scores (without the correction bias), over their sum (+ eps) where it
        renormalises, times the scale where it has one."""
        if isinstance(scores, ShapeOnly):
            return ShapeOnly(chosen.shape, scores.dtype)
        w = np.take_along_axis(scores, chosen, axis=-1)
        renormalise = self.renormalise if isinstance(self.renormalise, bool) else getattr(config, self.renormalise)
        if renormalise:
            total = w.sum(axis=-1, keepdims=True)
            w = w / (total + constant(w, self.eps) if self.eps else total)
        return w * constant(w, getattr(config, self.scale)) if self.scale else w

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        E = config.n_experts
        bias = self.bias or f"{self.module}.e_score_correction_bias"
        return {f"{self.module}.weight": Tensor((E, config.n_embd), "router"), bias: Tensor((E,), "router_bias")}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return {"router": (B * T * config.n_experts, config.n_embd)}  # h [T, D] x W_router [D, E]


@dataclass(frozen=True)
class SigmoidRouter(GroupLimitedRouter):
    """DeepSeek-V3's sigmoid router without its groups (LFM2-MoE's Lfm2MoeTopKRouter): s = sigmoid(h W_router)
    [T, E]; the k largest s + b chosen, b the mixture's expert bias (`bias`, a buffer that only chooses; none where
    the config's use_expert_bias is false: the k largest s); each chosen expert's gate its s, over their sum + `eps`
    where norm_topk_prob, times routed_scaling_factor."""

    groups: bool = False
    bias: str = "expert_bias"  # the bias's name in the mixture's checkpoint
    eps: float = 1e-6
    kinds = {
        "router": "router weights W_router [E, D]",
        "router_bias": "router's expert bias b [E] (a buffer: chooses experts only; not in transformers' count)",
    }
    buffers: ClassVar[tuple[str, ...]] = ("router_bias",)

    def stages(self, config: Any) -> dict[str, Stage]:
        bias = " + b (b: the expert bias, for choosing only)" if config.use_expert_bias else ""
        renorm = f" / (their sum + {self.eps:g}) (norm_topk_prob)" if config.norm_topk_prob else ""
        return super().stages(config) | by_op(  # its own choice and weighing over the grouped router's stages
            Stage("router.choose", ("moe.chosen",), "select", f"the k experts of largest s{bias}", "s [T, E]"),
            Stage("router.weigh", ("moe.gates",), "scale", f"gates = the chosen s{renorm} x routed_scaling_factor",
                  "s [T, k]"),
        )  # fmt: skip

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at = at.declaring(self.declared(config))
        scores = self.scores(h, p, at)
        biased = scores + getattr(p, self.bias).astype(scores.dtype) if config.use_expert_bias else scores
        chosen = choice(at, "router.choose", at.top_k("router.choose", biased, config.top_k), config)
        return chosen, at.stage("router.weigh", self.weigh(scores, chosen, config), "T k")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        E = config.n_experts
        bias = {self.bias: Tensor((E,), "router_bias")} if config.use_expert_bias else {}
        return {f"{self.module}.weight": Tensor((E, config.n_embd), "router"), **bias}


def sqrt_softplus(x):
    """sqrt(softplus(x)), softplus(x) = ln(1 + e^x): DeepSeek-V4's expert scores (transformers' "sqrtsoftplus")."""
    return np.sqrt(np.logaddexp(constant(x, 0.0), x))


SQRT_SOFTPLUS = Stage(
    "router.score", ("moe.scores",), "activation", "s = sqrt(softplus(r))  (softplus(r) = ln(1 + e^r))", "r [T, E]"
)


@dataclass(frozen=True)
class SqrtSoftplusRouter(GroupLimitedRouter):
    """DeepSeek-V4's router (transformers' DeepseekV4TopKRouter): DeepSeek-V3's without groups, its scores
    s = sqrt(softplus(h W_router)) in place of the sigmoid; the k largest s + b chosen (b the correction bias, a buffer
    that only chooses); the gates their s over their sum + 1e-20 (always: norm_topk_prob is not read), times
    routed_scaling_factor."""

    groups: bool = False
    renormalise: bool | str = True

    bias: str = "gate.bias"  # where DeepSeek-V4's checkpoint keeps the correction bias (transformers': e_score_...)
    score_op = "router.score"
    score = staticmethod(sqrt_softplus)

    def stages(self, config: Any) -> dict[str, Stage]:
        stages = super().stages(config)
        return by_op(stages["router"], SQRT_SOFTPLUS, stages["router.choose"], stages["router.weigh"])

    def correction_bias(self, p: SimpleNamespace):
        return module_of(p, self.bias)


HASHED = Stage("router.hash", ("moe.chosen",), "select",
               "the k experts of each token are its id's row of a fixed table, tid2eid[id] (no choice: hash routing)",
               "ids [T], tid2eid [V, k]")  # fmt: skip


@dataclass(frozen=True)
class HashRouter(SqrtSoftplusRouter):
    """DeepSeek-V4's first layers' router (transformers' DeepseekV4HashRouter): which k experts a token goes to is its
    id's row of a fixed table, tid2eid [V, k] (a buffer of the checkpoint), whatever h; their gates are
    SqrtSoftplusRouter's, from the scores of the same product h W_router. It reads the pass's token ids (`by_ids`)."""

    by_ids: ClassVar[bool] = True
    kinds = {
        "router": "router weights W_router [E, D]",
        "router_table": "hash routing's table tid2eid [V, k]: each token id's k experts (integers; a buffer)",
    }
    buffers: ClassVar[tuple[str, ...]] = ("router_table",)

    def stages(self, config: Any) -> dict[str, Stage]:
        stages = super().stages(config)
        return by_op(stages["router"], SQRT_SOFTPLUS, HASHED, stages["router.weigh"])

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, ids=None):
        at = at.declaring(self.declared(config))
        scores = self.scores(h, p, at)
        if ids is None:  # a pass resumed from a stream without its ids (Model.run_from)
            raise UserError("this model routes some layers by token id (hash routing): run_from needs the ids")
        chosen = choice(at, "router.hash", getattr(p, self.module).tid2eid[ids], config)
        return chosen, at.stage("router.weigh", self.weigh(scores, chosen, config), "T k")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        E, table = config.n_experts, Tensor((config.vocab_size, config.top_k), "router_table")
        return {f"{self.module}.weight": Tensor((E, config.n_embd), "router"), f"{self.module}.tid2eid": table}


# --- routed experts -------------------------------------------------------------------------------------------------
def combine(names: tuple[str, ...] = ("moe.out",)) -> Stage:
    equation = "m = sum over each token's k experts of their weighted y  (added back to the tokens' rows)"
    return Stage("moe.combine", names, "scatter", equation, "each token's k weighted y [T, k*D]")


COMBINE = combine()  # the experts' sum is the mixture's output
ROUTED_COMBINE = combine(("moe.routed_out",))  # ... to which a shared expert's is added


@cache
def gathered_stages(x: str = "h", D: str = "D") -> tuple[Stage, Stage]:
    """The stages every routed expert runs before and after its own: its tokens' rows of what the experts read (x, D
    wide), and its outputs weighed by their gates."""
    return (
        Stage("expert.gather", ("moe.expert_in",), "select",
              f"h_e = {x}[the Te tokens routed to e]  (for each expert e)", f"{x} [T, {D}]"),
        Stage("expert.weigh", ("moe.expert_out",), "multiply", "y = y * gate of e for each of its tokens",
              f"y [T, k*{D}]"),
    )  # fmt: skip


def prescale_stage(D: str = "D") -> Stage:
    """The stage of experts whose gate scales their input, not their output (Llama 4's)."""
    equation = "h_e = h_e * gate of e for each of its tokens  (the input scaled, not the output)"
    return Stage("expert.prescale", ("moe.expert_in_scaled",), "multiply", equation, f"h_e [T, k*{D}]")


@dataclass(frozen=True)
class RoutedExperts(Part):
    """A layer's routed experts, each computing only its Te tokens' rows: h_e = h[its tokens] [Te, D],
    y = expert(its tape, e, h_e) [Te, D], weighted by the tokens' gates and added back to their rows; one record per
    op and layer, with the shapes of what the experts computed between them (`whole`: each token's rows in its k
    experts), each expert's share as its breakdown. A subclass is one kind of expert: its stages (`expert_stages`),
    its forward pass on one expert's rows (`expert`), its tensors and products. `combined`: the capture name of their
    sum; `x`, `D`: what they read, its symbol and its width's (Nemotron-H's experts read a latent of Dl);
    `prescaled`: each expert's input rows scaled by their gates, its output added as it is (Llama 4's)."""

    combined: tuple[str, ...] = ("moe.out",)
    x: str = "h"
    D: str = "D"
    prescaled: bool = False
    routed: ClassVar[tuple[str, ...]] = ()  # the parameter kinds of which a token's pass reads k of E

    def stages(self, config: Any) -> dict[str, Stage]:
        gather, weighing = gathered_stages(self.x, self.D)
        if self.prescaled:
            return by_op(gather, prescale_stage(self.D), *self.expert_stages(config), combine(self.combined))
        return by_op(gather, *self.expert_stages(config), weighing, combine(self.combined))

    def expert_stages(self, config: Any) -> tuple[Stage, ...]:
        raise NotImplementedError

    def whole(self) -> dict[str, str]:
        """The shapes of the layer's records: each token's rows in its k experts ("T D, D k*F -> T k*F")."""
        raise NotImplementedError

    def expert(self, ex: Tape, e: int, xe, p: SimpleNamespace, config: Any):
        """Expert e's output [Te, D] for its tokens' rows xe [Te, D], on its tape `ex`."""
        raise NotImplementedError

    def __call__(self, h, chosen, gates, p: SimpleNamespace, config: Any, at: Tape):
        """chosen and gates [T, k]: each token's k experts and their weights -> the experts' sum [T, D]."""
        at, D = at.declaring(self.declared(config)), self.D
        E, k = config.n_experts, chosen.shape[-1]
        x, n = h.reshape(-1, h.shape[-1]), h.size // h.shape[-1]  # the batch's tokens, one row each
        out = ShapeOnly(x.shape, x.dtype) if isinstance(x, ShapeOnly) else np.zeros_like(x)
        tapes = at.experts()
        first_of: dict[int, int] = {}  # shape-only: the first expert to compute each number of tokens
        for tokens in routed(chosen.reshape(n, k), E, at.routing):
            if tokens.rows is None and tapes.repeats(first_of.setdefault(tokens.tokens, tokens.expert), tokens):
                continue
            ex = tapes.expert(tokens)
            xe = ex.stage("expert.gather", tokens.gather(x), f"Te {D}")
            if self.prescaled:  # the gate scales what the expert reads
                xe = ex.stage("expert.prescale", xe * tokens.gates(gates.reshape(n, k)), f"Te {D}")
            y = self.expert(ex, tokens.expert, xe, p, config)
            if not self.prescaled:
                y = ex.stage("expert.weigh", y * tokens.gates(gates.reshape(n, k)), f"Te {D}")
            add_rows(out, tokens, y)
        whole = self.whole()
        if self.prescaled:
            whole = {("expert.prescale" if op == "expert.weigh" else op): spec for op, spec in whole.items()}
        at.record_gathered(tapes, whole, n_experts=E)
        return at.stage("moe.combine", out.reshape(h.shape), f"T {D}")


@cache
def swiglu_stages(gate: str, up: str, down: str) -> tuple[Stage, ...]:
    """A SwiGLU expert's stages, its matrices named gate, up and down in the equations."""
    return (
        Stage("expert.gate", ("moe.expert_gate",), "matmul", f"g = h_e {gate}  (expert e's gate, on its Te rows)",
              f"h_e [T, k*D] (each token in its k experts), {gate} [D, F]", MLP, product="expert"),
        Stage("expert.up", ("moe.expert_up",), "matmul", f"u = h_e {up}  (expert e's up, on its Te rows)",
              f"h_e [T, k*D], {up} [D, F]", MLP, product="expert"),
        Stage("expert.act", ("moe.expert_act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, k*F]"),
        Stage("expert.mul", ("moe.expert_mul",), "multiply", "a = a * u", "a, u [T, k*F]"),
        Stage("expert.down", ("moe.expert_down",), "matmul", f"y = a {down}  (expert e's down, on its Te rows)",
              f"a [T, k*F], {down} [F, D]", MLP, product="expert"),
    )  # fmt: skip


def swiglu_whole(F: str, gate_up: dict[str, str], clamp: str = "") -> dict[str, str]:
    """The shapes of a SwiGLU's experts' records (RoutedExperts.whole), each token's rows in its k experts: the gather,
    `gate_up` (its products that make g and u), the clamp of g and u where it has one (`clamp`, its shape), the
    activation, the gate, the down product (F its width's symbol) and the weighing."""
    clamping = {"expert.clamp": clamp} if clamp else {}
    return {
        "expert.gather": "T k*D",
        **gate_up,
        **clamping,
        "expert.act": f"T k*{F}",
        "expert.mul": f"T k*{F}",
        "expert.down": f"T {F}, {F} k*D -> T k*D",
        "expert.weigh": "T k*D",
    }


SWIGLU = ("W_gate,e", "W_up,e", "W_down,e")  # how the equations name an expert's matrices (Mixtral's: W1_e ...)
SWIGLU_EXPERTS = (gathered_stages()[0], *swiglu_stages(*SWIGLU), gathered_stages()[1])


@dataclass(frozen=True)
class SwiGLUExperts(RoutedExperts):
    """Each expert a SwiGLU MLP of width F on its tokens' rows: y = (act(h_e W_gate) * h_e W_up) W_down (Mixtral's,
    Qwen3-MoE's, DeepSeek-V3's). `names`: each matrix's module in an expert's checkpoint and its role (gate, up,
    down), in the checkpoint's order; `symbols`: how the equations name them; `width`: the config's field of F, and
    `F` its symbol in the shapes; `described`: what params says each role's kind is."""

    names: tuple[tuple[str, str], ...] = (("gate_proj", "gate"), ("up_proj", "up"), ("down_proj", "down"))
    symbols: tuple[str, str, str] = SWIGLU
    width: str = "d_ff"
    F: str = "F"
    described: tuple[str, str, str] = (
        "experts' gate weights [F, D], E a layer",
        "experts' up weights [F, D], E a layer",
        "experts' down weights [D, F], E a layer",
    )
    clamp: str = ""  # the config's field of the limit the gate and up are clamped to (DeepSeek-V4's swiglu_limit)
    routed = ("expert_gate", "expert_up", "expert_down")

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return dict(zip(self.routed, self.described))

    def expert_stages(self, config: Any) -> tuple[Stage, ...]:
        stages = swiglu_stages(*self.symbols)
        return (*stages[:2], clamp_stage("expert.clamp", self.clamp, self.F), *stages[2:]) if self.clamp else stages

    def whole(self) -> dict[str, str]:
        F = self.F
        gate_up = {"expert.gate": f"T D, D k*{F} -> T k*{F}", "expert.up": f"T D, D k*{F} -> T k*{F}"}
        return swiglu_whole(F, gate_up, f"T k*2*{F}" if self.clamp else "")

    def expert(self, ex: Tape, e: int, xe, p: SimpleNamespace, config: Any):
        w, F = getattr(p.experts, str(e)), self.F
        gate, up, down = (getattr(w, self.module_of(role)).weight for role in ("gate", "up", "down"))
        g = ex.matmul("expert.gate", xe, gate.T, f"Te D, D {F} -> Te {F}")
        u = ex.matmul("expert.up", xe, up.T, f"Te D, D {F} -> Te {F}")
        if self.clamp:  # one stage of both, side by side (an expert's stage holds one array a token)
            gu = ex.stage("expert.clamp", side_by_side(*clamped(g, u, getattr(config, self.clamp))), f"Te 2*{F}")
            g, u = gu[..., : gu.shape[-1] // 2], gu[..., gu.shape[-1] // 2 :]
        a = ex.stage("expert.act", ACTIVATIONS[config.hidden_act](g), f"Te {F}")
        a = ex.stage("expert.mul", np.multiply(a, u, out=ex.scratch(a)), f"Te {F}")
        return ex.matmul("expert.down", a, down.T, f"Te {F}, {F} D -> Te D")

    def module_of(self, role: str) -> str:
        return next(name for name, its in self.names if its == role)

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        """E experts of gate and up [F, D] and down [D, F], in the checkpoint's order."""
        D, F = config.n_embd, getattr(config, self.width)
        shape = {"gate": (F, D), "up": (F, D), "down": (D, F)}
        each = [(name, Tensor(shape[role], f"expert_{role}")) for name, role in self.names]
        return {f"experts.{e}.{name}.weight": tensor for e in range(config.n_experts) for name, tensor in each}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F, k = config.n_embd, getattr(config, self.width), config.top_k
        return {
            "expert.gate": (B * T * k * F, D),  # each token's h [D] x W_gate,e [D, F] in each of its k experts
            "expert.up": (B * T * k * F, D),  # ... x W_up,e [D, F]
            "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W_down,e [F, D] in each of its k experts
        }


CLAMPED = (
    Stage("expert.gate_up", ("moe.expert_gate_up",), "matmul",
          "gu = h_e W_gu_e + b_gu_e  (expert e's gate and up in one product: gate at even columns, up at odd)",
          "h_e [T, k*D] (each token in its k experts), W_gu_e [D, 2F]", MLP, product="expert"),
    Stage("expert.clamp", ("moe.expert_clamped",), "activation",
          "g = min(gate, limit), u = clip(up, -limit, limit)", "gu [T, k*2F]"),
    Stage("expert.act", ("moe.expert_act",), "activation", "a = g sigmoid(alpha g)  (alpha 1.702)", "g [T, k*F]"),
    Stage("expert.mul", ("moe.expert_mul",), "multiply", "a = (u + 1) * a", "a, u [T, k*F]"),
    Stage("expert.down", ("moe.expert_down",), "matmul", "y = a W_down_e + b_down_e  (expert e's down, on its rows)",
          "a [T, k*F], W_down_e [F, D]", MLP, product="expert"),
)  # fmt: skip


@dataclass(frozen=True)
class FusedClampedExperts(RoutedExperts):
    """gpt-oss's experts: each a clamped SwiGLU with biases, its gate and up one product with the fused W_gu [D, 2F]
    (gate at even columns, up at odd ones): g = min(g, limit), u = clip(u, -limit, limit), a = (u + 1) g
    sigmoid(alpha g), then W_down [F, D] (swiglu_limit, swiglu_alpha). The E experts' weights are 3-D tensors stored
    [in, out], unlike nn.Linear: gate_up_proj [E, D, 2F] and down_proj [E, F, D], with their biases."""

    kinds = {
        "expert_gate_up": "experts' fused gate and up weights W_gu [D, 2F], E a layer",
        "expert_down": "experts' down weights W_down [F, D], E a layer",
        "expert_biases": "experts' biases b_gu [2F] and b_down [D], E a layer",
    }
    routed = ("expert_gate_up", "expert_down", "expert_biases")

    def expert_stages(self, config: Any) -> tuple[Stage, ...]:
        return CLAMPED

    def whole(self) -> dict[str, str]:
        return swiglu_whole("F", {"expert.gate_up": "T D, D k*2F -> T k*2F"}, "T k*2F")

    def expert(self, ex: Tape, e: int, xe, p: SimpleNamespace, config: Any):
        w = p.experts
        gu = ex.matmul("expert.gate_up", xe, w.gate_up_proj[e], "Te D, D 2F -> Te 2F", bias=w.gate_up_proj_bias[e])
        gu = ex.stage("expert.clamp", clamp(gu, config.swiglu_limit), "Te 2F")
        a = ex.stage("expert.act", glu(gu[:, ::2], config.swiglu_alpha), "Te F")
        a = ex.stage("expert.mul", np.multiply(gu[:, 1::2] + constant(gu, 1.0), a, out=ex.scratch(a)), "Te F")
        return ex.matmul("expert.down", a, w.down_proj[e], "Te F, F D -> Te D", bias=w.down_proj_bias[e])

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, F, E = config.n_embd, config.d_ff, config.n_experts
        return {
            "experts.gate_up_proj": Tensor((E, D, 2 * F), "expert_gate_up"),
            "experts.gate_up_proj_bias": Tensor((E, 2 * F), "expert_biases"),
            "experts.down_proj": Tensor((E, F, D), "expert_down"),
            "experts.down_proj_bias": Tensor((E, D), "expert_biases"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F, k = config.n_embd, config.d_ff, config.top_k
        return {
            "expert.gate_up": (B * T * k * 2 * F, D),  # each token's h [D] x W_gu_e [D, 2F] in each of its k experts
            "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W_down_e [F, D] in each of its k experts
        }


def clamp(gate_up, limit: float):
    """The gate columns (even) capped at `limit` from above only, the up columns (odd) clipped to [-limit, limit]."""
    if isinstance(gate_up, ShapeOnly):
        return gate_up.copy()
    c = constant(gate_up, limit)
    out = np.minimum(gate_up, c)
    out[:, 1::2] = np.maximum(out[:, 1::2], -c)
    return out


def glu(gate, alpha: float):
    """g sigmoid(alpha g): SiLU with a gain alpha (1.702) inside the sigmoid."""
    with np.errstate(over="ignore"):  # exp(-alpha g) of a large negative g: inf, and a weight of exactly 0
        return gate * sigmoid(constant(gate, alpha) * gate)


def clamp_stage(op: str, limit: str, F: str) -> Stage:
    """The clamp of a SwiGLU's gate and up before the activation (DeepSeek-V4's experts and shared expert): the gate
    capped from above, the up clipped on both sides."""
    name, equation = f"moe.{op.split('.')[0]}_clamped", f"g = min(g, {limit}), u = clip(u, -{limit}, {limit})"
    return Stage(op, (name,), "activation", equation, f"[g u] [T, 2{F}]")


def side_by_side(a, b):
    """[a b] along the last axis."""
    if isinstance(a, ShapeOnly):
        return ShapeOnly((*a.shape[:-1], a.shape[-1] + b.shape[-1]), a.dtype)
    return np.concatenate([a, b], axis=-1)


def clamped(g, u, limit: float):
    """(g capped at `limit` from above, u clipped to [-limit, limit]): DeepSeek-V4's clamped SwiGLU."""
    c = constant(g, limit)
    return np.minimum(g, c), np.maximum(np.minimum(u, c), -c)


def fused_stages(F: str, w: str = "W_gu_e", activation: str = "SiLU: g sigmoid(g)") -> tuple[Stage, ...]:
    """An expert's stages whose gate and up are one product of 2F columns, the gate's first, cut apart (Granite's)."""
    return (
        Stage("expert.gate_up", ("moe.expert_gate_up",), "matmul",
              f"[g u] = h_e {w}  (expert e's gate and up in one product: the gate's {F} columns first)",
              f"h_e [T, k*D] (each token in its k experts), {w} [D, 2{F}]", MLP, product="expert"),
        Stage("expert.act", ("moe.expert_act",), "activation",
              f"a = act(g)  ({activation}; g the first {F} columns)", f"g [T, k*{F}]"),
        Stage("expert.mul", ("moe.expert_mul",), "multiply", f"a = a * u  (u the last {F} columns)",
              f"a, u [T, k*{F}]"),
        Stage("expert.down", ("moe.expert_down",), "matmul", "y = a W_down_e  (expert e's down, on its Te rows)",
              f"a [T, k*{F}], W_down_e [{F}, D]", MLP, product="expert"),
    )  # fmt: skip


@dataclass(frozen=True)
class FusedSwiGLUExperts(RoutedExperts):
    """Each expert a SwiGLU whose gate and up are one product, cut apart: [g u] = h_e W_gu_e [D, 2F], then
    (act(g) * u) W_down_e (Granite's). The E experts' weights are two 3-D tensors laid out as nn.Linear's, [E, 2F, D]
    (the gate's rows first) and [E, D, F], no biases; where `in_out`, stored [in, out] as a batched product reads
    them, without a `.weight` (Llama 4's Llama4TextExperts: gate_up_proj [E, D, 2F], the gate's columns first, and
    down_proj [E, F, D]); where `bare`, laid out as nn.Linear's but without a `.weight` (Gemma 4's Gemma4TextExperts:
    nn.Parameters gate_up_proj [E, 2F, D] and down_proj [E, D, F]). `module`, `names`: where the checkpoint keeps them;
    `width`: the config's field of F, `F` its symbol; `activation`: how its equation names the activation (the config's
    hidden_act computes it)."""

    module: str = "experts"
    names: tuple[str, str] = ("gate_up_proj", "down_proj")
    width: str = "d_ff"
    F: str = "F"
    in_out: bool = False
    bare: bool = False
    activation: str = "SiLU: g sigmoid(g)"
    kinds = {
        "expert_gate_up": "experts' fused gate and up weights W_gu [2F, D], E a layer",
        "expert_down": "experts' down weights W_down [D, F], E a layer",
    }
    routed = ("expert_gate_up", "expert_down")

    def expert_stages(self, config: Any) -> tuple[Stage, ...]:
        return fused_stages(self.F, activation=self.activation)

    def whole(self) -> dict[str, str]:
        return swiglu_whole(self.F, {"expert.gate_up": f"T D, D k*2*{self.F} -> T k*2*{self.F}"})

    def expert(self, ex: Tape, e: int, xe, p: SimpleNamespace, config: Any):
        w, F = module_of(p, self.module), self.F
        if self.in_out:  # stored [in, out]: seen as nn.Linear's [out, in] (views, no copies)
            gate_up, down = (getattr(w, name)[e].T for name in self.names)
        elif self.bare:
            gate_up, down = (getattr(w, name)[e] for name in self.names)
        else:
            gate_up, down = (getattr(w, name).weight[e] for name in self.names)
        gu = ex.matmul("expert.gate_up", xe, gate_up.T, f"Te D, D 2*{F} -> Te 2*{F}")
        width = gu.shape[-1] // 2  # the gate's columns, then the up's
        a = ex.stage("expert.act", ACTIVATIONS[config.hidden_act](gu[..., :width]), f"Te {F}")
        a = ex.stage("expert.mul", np.multiply(a, gu[..., width:], out=ex.scratch(a)), f"Te {F}")
        return ex.matmul("expert.down", a, down.T, f"Te {F}, {F} D -> Te D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, F, E, (gate_up, down) = config.n_embd, getattr(config, self.width), config.n_experts, self.names
        if self.in_out:
            return {
                f"{self.module}.{gate_up}": Tensor((E, D, 2 * F), "expert_gate_up"),
                f"{self.module}.{down}": Tensor((E, F, D), "expert_down"),
            }
        weight = "" if self.bare else ".weight"
        return {
            f"{self.module}.{gate_up}{weight}": Tensor((E, 2 * F, D), "expert_gate_up"),
            f"{self.module}.{down}{weight}": Tensor((E, D, F), "expert_down"),
        }

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F, k = config.n_embd, getattr(config, self.width), config.top_k
        return {
            "expert.gate_up": (B * T * k * 2 * F, D),  # each token's h [D] x W_gu_e [D, 2F] in each of its k experts
            "expert.down": (B * T * k * D, F),  # each token's a_e [F] x W_down_e [F, D] in each of its k experts
        }


# --- the shared expert and the mixture ------------------------------------------------------------------------------
@cache
def shared_stages(biased: bool = False) -> tuple[Stage, ...]:
    """The shared experts' stages, their products' biases in the equations where they have them (ERNIE 4.5's)."""
    b = lambda name: plus(biased, f"{name}_s")  # noqa: E731
    return (
        Stage("shared.gate", ("moe.shared_gate",), "matmul", f"g = h W_gate_s{b('gate')}  (the shared experts, on "
              "every token)", "h [T, D], W_gate_s [D, Fs]", MLP, product="expert"),
        Stage("shared.up", ("moe.shared_up",), "matmul", f"u = h W_up_s{b('up')}", "h [T, D], W_up_s [D, Fs]", MLP,
              product="expert"),
        Stage("shared.act", ("moe.shared_act",), "activation", "a = act(g)  (SiLU: g sigmoid(g))", "g [T, Fs]"),
        Stage("shared.mul", ("moe.shared_mul",), "multiply", "a = a * u", "a, u [T, Fs]"),
        Stage("shared.down", ("moe.shared_down",), "matmul", f"y_s = a W_down_s{b('down')}",
              "a [T, Fs], W_down_s [Fs, D]", MLP, product="expert"),
    )  # fmt: skip


SHARED_GATE = (
    Stage("shared.score", ("moe.shared_score",), "matmul", "s = h W_shared_gate  (one number a token)",
          "h [T, D], W_shared_gate [D, 1]", MLP, product="router"),
    Stage("shared.weigh", ("moe.shared_weighed",), "multiply", "y_s = y_s * sigmoid(s)", "y_s [T, D], s [T, 1]"),
)  # fmt: skip
SHARED_ADD = Stage("moe.shared_add", ("moe.out",), "add", "m = m + y_s", "m, y_s [T, D]")
# ... its gate and up one product of 2 Fs columns, cut apart (Granite's shared_mlp.input_linear)
SHARED_FUSED = (
    Stage("shared.gate_up", ("moe.shared_gate_up",), "matmul",
          "[g u] = h W_gu_s  (the shared expert's gate and up in one product, on every token: the gate's Fs columns "
          "first)", "h [T, D], W_gu_s [D, 2Fs]", MLP, product="expert"),
    Stage("shared.split", ("moe.shared_gate", "moe.shared_up"), "reshape", "g, u = the first Fs, the last Fs columns",
          "gu [T, 2Fs]"),
)  # fmt: skip


@dataclass(frozen=True)
class SharedExpert(Part):
    """The shared expert every token goes through (DeepSeek-V3's n_shared_experts as one, Qwen3.5's): a SwiGLU MLP of
    width Fs (the config's `width`; none where it is 0: ERNIE 4.5's moe_num_shared_experts 0), act(h W_gate) * h W_up,
    then W_down, with biases where the config field `bias` names says so (ERNIE 4.5's use_bias); where `gate` names
    one (Qwen3.5's shared_expert_gate [1, D]), its output weighed by sigmoid(h W_shared_gate), one number a token.
    `module`: where the mixture's checkpoint keeps it; `described`: what params says its kind is."""

    module: str = "shared_experts"
    gate: str | None = None
    width: str = "d_shared"
    described: str = "shared experts' weights W_gate_s, W_up_s [Fs, D], W_down_s [D, Fs]"
    bias: str | None = None
    fused: tuple[str, str] | None = None  # (gate and up [2Fs, D], the gate's rows first; down): Granite's
    clamp: str = ""  # the config's field of the limit its gate and up are clamped to (DeepSeek-V4's swiglu_limit)
    names: tuple[str, str, str] = (
        "gate_proj",
        "up_proj",
        "down_proj",
    )  # its gate, up and down (DeepSeek-V4: w1, w3, w2)

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {"shared_expert": self.described}

    def present(self, config: Any) -> bool:
        return getattr(config, self.width) > 0

    def biased(self, config: Any) -> bool:
        return self.bias is not None and bool(getattr(config, self.bias))

    def stages(self, config: Any) -> dict[str, Stage]:
        shared = shared_stages(self.biased(config))
        unfused = shared if self.fused is None else (*SHARED_FUSED, *shared[2:])
        if self.clamp:
            unfused = (*unfused[:2], clamp_stage("shared.clamp", self.clamp, "Fs"), *unfused[2:])
        return by_op(*unfused, *(SHARED_GATE if self.gate else ()))

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape):
        at, w = at.declaring(self.declared(config)), module_of(p, self.module)
        if self.fused is None:
            gate, up = getattr(w, self.names[0]), getattr(w, self.names[1])
            g = at.matmul("shared.gate", h, gate.weight.T, "T D, D Fs -> T Fs", bias=bias_of(gate))
            u = at.matmul("shared.up", h, up.weight.T, "T D, D Fs -> T Fs", bias=bias_of(up))
        else:
            gu = at.matmul("shared.gate_up", h, getattr(w, self.fused[0]).weight.T, "T D, D 2*Fs -> T 2*Fs")
            Fs = gu.shape[-1] // 2
            g, u = at.stage("shared.split", (gu[..., :Fs], gu[..., Fs:]), "T Fs")
        if self.clamp:
            gu = at.stage("shared.clamp", side_by_side(*clamped(g, u, getattr(config, self.clamp))), "T 2*Fs")
            g, u = gu[..., : gu.shape[-1] // 2], gu[..., gu.shape[-1] // 2 :]
        a = at.stage("shared.act", ACTIVATIONS[config.hidden_act](g), "T Fs")
        a = at.stage("shared.mul", np.multiply(a, u, out=at.scratch(a)), "T Fs")
        down = getattr(w, self.names[2]) if self.fused is None else getattr(w, self.fused[1])
        y = at.matmul("shared.down", a, down.weight.T, "T Fs, Fs D -> T D", bias=bias_of(down))
        if self.gate is None:
            return y
        score = at.matmul("shared.score", h, getattr(p, self.gate).weight.T, "T D, D 1 -> T 1")
        return at.stage("shared.weigh", y * sigmoid(score), "T D")

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        D, Fs, m, kind, b = (
            config.n_embd,
            getattr(config, self.width),
            self.module,
            "shared_expert",
            self.biased(config),
        )
        if self.fused is not None:
            gate_up, down = self.fused
            return linear(f"{m}.{gate_up}", 2 * Fs, D, False, kind) | linear(f"{m}.{down}", D, Fs, False, kind)
        gate, up, down = self.names
        tensors = {
            **linear(f"{m}.{gate}", Fs, D, b, kind),
            **linear(f"{m}.{up}", Fs, D, b, kind),
            **linear(f"{m}.{down}", D, Fs, b, kind),
        }
        return tensors | (linear(self.gate, 1, D, False, kind) if self.gate else {})

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, Fs = config.n_embd, getattr(config, self.width)
        if self.fused is not None:  # h [T, D] x W_gu_s [D, 2Fs], a [T, Fs] x W_down_s [Fs, D]
            return {"shared.gate_up": (B * T * 2 * Fs, D), "shared.down": (B * T * D, Fs)}
        products = {
            "shared.gate": (B * T * Fs, D),  # h [T, D] x W_gate_s [D, Fs]
            "shared.up": (B * T * Fs, D),  # h [T, D] x W_up_s [D, Fs]
            "shared.down": (B * T * D, Fs),  # a [T, Fs] x W_down_s [Fs, D]
        }
        return products | ({"shared.score": (B * T, D)} if self.gate else {})  # h [T, D] x W_shared_gate [D, 1]


@dataclass(frozen=True)
class Mixture(Part):
    """A sparse mixture of experts in an MLP's place: the router picks k of E experts for each token, each expert
    computes its tokens' rows, and a shared expert, where there is one, every token's, added: m = experts + shared.
    `note`: how count's comparison of attention and weights names the experts ("k experts of E")."""

    router: Any
    experts: Any
    shared: Any = None
    note: str = "k experts of E"

    def stages(self, config: Any) -> dict[str, Stage]:
        return by_op(SHARED_ADD) if self.shared_in(config) is not None else {}

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, ids=None):
        by_ids = getattr(self.router, "by_ids", False)  # a hash router reads the token ids, not h, to choose
        chosen, gates = self.router(h, p, config, at, ids) if by_ids else self.router(h, p, config, at)
        m = self.experts_in(config)(h, chosen, gates, p, config, at)
        shared = self.shared_in(config)
        if shared is None:
            return m
        y = shared(h, p, config, at)
        return at.declaring(self.declared(config)).stage("moe.shared_add", m + y, "T D")

    def shared_in(self, config: Any) -> Any:
        """Its shared expert in a config, None where it has none (or one of width 0)."""
        return self.shared if self.shared is not None and self.shared.present(config) else None

    def experts_in(self, config: Any) -> Any:
        """Its routed experts in a config: where a shared expert's output is added to their sum, the sum is captured as
        moe.routed_out and moe.out is the total (SHARED_ADD's), one stage a name: a hook on moe.out ran on both, a
        steering vector added twice, and a capture kept the total alone."""
        if self.shared_in(config) is None or self.experts.combined != COMBINE.names:
            return self.experts
        return replace(self.experts, combined=ROUTED_COMBINE.names)

    @property
    def parts(self) -> tuple[Any, ...]:
        return (self.router, self.experts) + ((self.shared,) if self.shared is not None else ())

    def parts_in(self, config: Any) -> tuple[Any, ...]:
        shared = (self.shared,) if self.shared_in(config) is not None else ()
        return (self.router, self.experts_in(config), *shared)

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {kind: text for part in self.parts for kind, text in part.kinds.items()}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return {name: tensor for part in self.parts_in(config) for name, tensor in part.tensors(config, layer).items()}

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return {op: n for part in self.parts_in(config) for op, n in part.products(config, T, t, B, layer).items()}

    def flops_terms(self, c: Any) -> tuple[str, str, str]:
        """Its products with weights in a decode step's FLOPs (the router's 2 D E, k experts' 6 D F, a shared expert's
        6 D Fs where it has one), against attention (GroupedQueryAttention.attention_vs_weights): the FLOPs, their
        share of a ratio's denominator, the sizes."""
        sizes = f"E = {c.n_experts}, k = {c.top_k}, F = {getattr(c, getattr(self.experts, 'width', 'd_ff')):,}"
        if self.shared is None:
            return f"2 D E + 6 k D F for the weights ({self.note})", "D E / 2 + 1.5 k D F", sizes
        return (
            f"2 D E + 6 k D F + 6 D Fs for the weights ({self.note}, and the shared experts)",
            "D E / 2 + 1.5 k D F + 1.5 D Fs",
            f"{sizes}, Fs = {getattr(c, self.shared.width):,}",
        )


@dataclass(frozen=True, eq=False)  # a part is itself: compared and hashed by identity (its parts are a dict)
class MlpByKind(Part):
    """The MLP of each kind of layer (config.layer_types[i]): a dense MLP in some layers, the experts in the others
    (Qwen3-MoE's mlp_only_layers, DeepSeek-V3's first dense layers). Its kinds are its parts', in their order. `by`:
    the config's field that names each layer's MLP, where not layer_types (DeepSeek-V4's mlp_layer_types); `ids`, the
    pass's token ids, go on to a part that reads them (a mixture with a hash router)."""

    parts: Mapping[str, Any]
    by: str = "layer_types"

    def __call__(self, h, p: SimpleNamespace, config: Any, at: Tape, ids=None):
        part = self.part(config, at.layer_index or 0)
        return part(h, p, config, at) if ids is None else part(h, p, config, at, ids)

    def part(self, config: Any, layer: int) -> Any:
        return self.parts[getattr(config, self.by)[layer]]

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        return {kind: text for part in self.parts.values() for kind, text in part.kinds.items()}

    def tensors(self, config: Any, layer: int = 0) -> Tensors:
        return self.part(config, layer).tensors(config, layer)

    def products(self, config: Any, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        return self.part(config, layer).products(config, T, t, B, layer)

    def flops_terms(self, c: Any) -> tuple[str, str, str]:
        """The first layer's (count compares its first layer): its part's own terms, or a gated MLP's three products."""
        terms = getattr(self.part(c, 0), "flops_terms", None)
        if terms is not None:
            return terms(c)
        return "6 D F for the weights (layer 0: a dense MLP)", "1.5 D F", f"F = {c.d_ff:,}"
