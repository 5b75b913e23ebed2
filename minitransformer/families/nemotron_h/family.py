"""Nemotron-H in the table of families (transformers' NemotronHForCausalLM): every layer x + Mixer(RMSNorm(x)), a
layer of one branch (parts/blocks.py's Residual), the mixer of the layer's kind (config.layer_types, from its pattern):

- mamba: the Mamba-2 mixer (parts/mamba2.py), its conv and scan states in the cache;
- full_attention: grouped-query attention with no rotation at all (the Mamba layers before it carry the order),
  scale dh^-0.5, no biases; its keys and values in the cache;
- mlp: m = relu(h W_up)^2 W_down, two products (no gate);
- moe: DeepSeek-V3's router (parts/moe.py: sigmoid scores, a correction bias to choose, group-limited top k, the
  chosen scores as weights, renormalised and scaled), k of E squared-ReLU experts on their tokens (in a latent of Dl
  where moe_latent_size is set: h W_fc1 before them, W_fc2 after), and a shared squared-ReLU expert on every token.

Its stage table lists every kind's stages whatever the config's pattern (a dry run of one layer of each kind).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from ...engine.ops import ACTIVATIONS
from ...engine.stages import MLP, Stage, by_op
from ...engine.tape import Tape
from ..mamba2.family import SYMBOLS as MAMBA2_SYMBOLS
from ..parts.attention import GroupedQueryAttention, bias_of
from ..parts.blocks import ByKind, Residual
from ..parts.decoder import Decoder, TokenEmbedding
from ..parts.family import composed
from ..parts.hybrid import HybridFormulas
from ..parts.mamba2 import Mamba2Mixer
from ..parts.moe import SHARED_ADD, GroupLimitedRouter, RoutedExperts
from ..parts.norms import RMSNorm
from ..parts.part import Part, Products, Tensor, Tensors, linear
from . import reference
from .config import PRESETS, NemotronHConfig

KINDS = ("mamba", "full_attention", "mlp", "moe")  # in the order its table lists their stages


def squared_relu(
    op: str, capture: str, up: tuple[str, str], F: str, down: tuple[str, str], product: str = ""
) -> tuple[Stage, ...]:
    """A squared-ReLU MLP's stages, u = x W_up, a = relu(u)^2, then W_down: `op` and `capture` begin their ops and
    capture names, `up` and `down` are each product's equation and what it reads, F the activation's width."""
    return (
        Stage(f"{op}.up", (f"{capture}up",), "matmul", *up, MLP, product=product),
        Stage(f"{op}.act", (f"{capture}act",), "activation", "a = relu(u)^2", f"u [T, {F}]"),
        Stage(f"{op}.down", (f"{capture}down",), "matmul", *down, MLP, product=product),
    )


MLP_LAYER = squared_relu(
    "mlp", "mlp.", ("u = h W_up", "h [T, D], W_up [D, F]"), "F", ("m = a W_down", "a [T, F], W_down [F, D]")
)
SHARED = squared_relu(
    "shared",
    "moe.shared_",
    ("u = h W_up_s  (the shared expert, on every token)", "h [T, D], W_up_s [D, Fs]"),
    "Fs",
    ("y_s = a W_down_s", "a [T, Fs], W_down_s [Fs, D]"),
    "expert",
)
EXPERT = squared_relu(
    "expert",
    "moe.expert_",
    ("u = h_e W_up_e  (expert e's up, on its Te rows)", "h_e [T, k*Dl] (each token in its k experts), W_up_e [Dl, Fe]"),
    "k*Fe",
    ("y = a W_down_e  (expert e's down, on its Te rows)", "a [T, k*Fe], W_down_e [Fe, Dl]"),
    "expert",
)


@dataclass(frozen=True)
class SquaredReLU(Part):
    """u = h W_up, a = act(u) (relu2: relu(u)^2, the config's mlp_act), then W_down, biases where mlp_bias: an MLP
    layer's (width F), or (`shared`) the mixture's shared expert on every token (width Fs)."""

    shared: bool = False

    @property
    def kinds(self) -> dict[str, str]:  # type: ignore[override]
        if self.shared:
            return {"shared_expert": "shared expert's weights W_up_s [Fs, D], W_down_s [D, Fs]"}
        return {"mlp": "MLP layers' weights W_up [F, D], W_down [D, F]"}

    def stages(self, config: NemotronHConfig) -> dict[str, Stage]:
        return by_op(*(SHARED if self.shared else MLP_LAYER))

    def __call__(self, h, p: SimpleNamespace, config: NemotronHConfig, at: Tape):
        at, op, F = at.declaring(self.declared(config)), "shared" if self.shared else "mlp", self.F
        w = p.shared_experts if self.shared else p
        u = at.matmul(f"{op}.up", h, w.up_proj.weight.T, f"T D, D {F} -> T {F}", bias=bias_of(w.up_proj))
        a = at.stage(f"{op}.act", ACTIVATIONS[config.mlp_act](u), f"T {F}")
        return at.matmul(f"{op}.down", a, w.down_proj.weight.T, f"T {F}, {F} D -> T D", bias=bias_of(w.down_proj))

    @property
    def F(self) -> str:  # noqa: N802 - the symbol
        return "Fs" if self.shared else "F"

    def tensors(self, config: NemotronHConfig, layer: int = 0) -> Tensors:
        D, F, b = config.n_embd, config.shared_inner if self.shared else config.d_ff, config.mlp_bias
        kind, at = ("shared_expert", "shared_experts.") if self.shared else ("mlp", "")
        return {**linear(f"{at}up_proj", F, D, b, kind), **linear(f"{at}down_proj", D, F, b, kind)}

    def products(self, config: NemotronHConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        D, F, op = (
            config.n_embd,
            config.shared_inner if self.shared else config.d_ff,
            "shared" if self.shared else "mlp",
        )
        return {f"{op}.up": (B * T * F, D), f"{op}.down": (B * T * D, F)}  # h [T, D] x W_up [D, F], a x W_down [F, D]


@dataclass(frozen=True)
class SquaredReLUExperts(RoutedExperts):
    """Each routed expert on its Te tokens' rows of the latent h_l (h itself without one): y = act(h_e W_up_e)
    W_down_e, Fe wide, reading and writing Dl."""

    combined: tuple[str, ...] = ("moe.routed_out",)
    x: str = "h_l"
    D: str = "Dl"
    kinds = {
        "expert_up": "routed experts' up weights [Fe, Dl], E a layer",
        "expert_down": "routed experts' down weights [Dl, Fe], E a layer",
    }
    routed = ("expert_up", "expert_down")

    def expert_stages(self, config: NemotronHConfig) -> tuple[Stage, ...]:
        return EXPERT

    def whole(self) -> dict[str, str]:
        """Each token's rows in its k experts, reading and writing Dl."""
        return {
            "expert.gather": "T k*Dl",
            "expert.up": "T Dl, Dl k*Fe -> T k*Fe",
            "expert.act": "T k*Fe",
            "expert.down": "T Fe, Fe k*Dl -> T k*Dl",
            "expert.weigh": "T k*Dl",
        }

    def expert(self, ex: Tape, e: int, xe, p: SimpleNamespace, config: NemotronHConfig):
        w = getattr(p.experts, str(e))
        u = ex.matmul("expert.up", xe, w.up_proj.weight.T, "Te Dl, Dl Fe -> Te Fe")
        a = ex.stage("expert.act", ACTIVATIONS[config.mlp_act](u), "Te Fe")
        return ex.matmul("expert.down", a, w.down_proj.weight.T, "Te Fe, Fe Dl -> Te Dl")

    def tensors(self, config: NemotronHConfig, layer: int = 0) -> Tensors:
        Dl, Fe = config.d_latent, config.moe_inner
        up, down = Tensor((Fe, Dl), "expert_up"), Tensor((Dl, Fe), "expert_down")
        return {
            name: tensor
            for e in range(config.n_experts or 0)
            for name, tensor in ((f"experts.{e}.up_proj.weight", up), (f"experts.{e}.down_proj.weight", down))
        }

    def products(self, config: NemotronHConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        Dl, Fe, k = config.d_latent, config.moe_inner, config.top_k or 0
        return {"expert.up": (B * T * k * Fe, Dl), "expert.down": (B * T * k * Dl, Fe)}  # each token in its k experts


LATENT = by_op(
    Stage(
        "moe.latent_in",
        ("moe.latent_in",),
        "matmul",
        "h_l = h W_fc1  (down to the experts' latent, Dl)",
        "h [T, D], W_fc1 [D, Dl]",
        MLP,
        product="expert",
    ),
    Stage(
        "moe.latent_out",
        ("moe.latent_out",),
        "matmul",
        "m = m W_fc2  (back up from the latent to D)",
        "m [T, Dl], W_fc2 [Dl, D]",
        MLP,
        product="expert",
    ),
    SHARED_ADD,
)


@dataclass(frozen=True)
class LatentMixture(Part):
    """The router picks k of E experts for each token; the experts compute their tokens' rows of h, or of its latent
    h W_fc1 (moe_latent_size: Dl wide), brought back up by W_fc2; the shared expert every token's, added."""

    router: Any = GroupLimitedRouter()
    experts: Any = SquaredReLUExperts()
    shared: Any = SquaredReLU(shared=True)
    kinds = {
        **GroupLimitedRouter.kinds,
        **SquaredReLUExperts.kinds,
        "moe_latent": "the mixture's latent projections W_fc1 [Dl, D], W_fc2 [D, Dl]",
        **SquaredReLU(shared=True).kinds,
    }

    def stages(self, config: NemotronHConfig) -> dict[str, Stage]:
        return LATENT

    def __call__(self, h, p: SimpleNamespace, config: NemotronHConfig, at: Tape):
        chosen, gates = self.router(h, p, config, at)
        at, latent = at.declaring(LATENT), config.moe_latent is not None
        x = (
            at.matmul(
                "moe.latent_in", h, p.fc1_latent_proj.weight.T, "T D, D Dl -> T Dl", bias=bias_of(p.fc1_latent_proj)
            )
            if latent
            else h
        )
        m = self.experts(x, chosen, gates, p, config, at)
        if latent:
            m = at.matmul(
                "moe.latent_out", m, p.fc2_latent_proj.weight.T, "T Dl, Dl D -> T D", bias=bias_of(p.fc2_latent_proj)
            )
        return at.stage("moe.shared_add", m + self.shared(h, p, config, at), "T D")

    def tensors(self, config: NemotronHConfig, layer: int = 0) -> Tensors:
        """The router's, the experts', the shared expert's, then the latent projections where there are some."""
        tensors = {**self.router.tensors(config), **self.experts.tensors(config), **self.shared.tensors(config)}
        if config.moe_latent is None:
            return tensors
        D, Dl, b = config.n_embd, config.d_latent, config.mlp_bias
        return (
            tensors
            | linear("fc1_latent_proj", Dl, D, b, "moe_latent")
            | linear("fc2_latent_proj", D, Dl, b, "moe_latent")
        )

    def products(self, config: NemotronHConfig, T: int, t: int, B: int = 1, layer: int = 0) -> Products:
        """The router's, the latent's way in, the experts', its way out, the shared expert's: in the order they run."""
        router, experts, shared = (
            part.products(config, T, t, B, layer) for part in (self.router, self.experts, self.shared)
        )
        if config.moe_latent is None:
            return router | experts | shared
        D, Dl = config.n_embd, config.d_latent  # h [T, D] x W_fc1 [D, Dl], m [T, Dl] x W_fc2 [Dl, D]
        return router | {"moe.latent_in": (B * T * Dl, D)} | experts | {"moe.latent_out": (B * T * D, Dl)} | shared


def every_kind(config: NemotronHConfig) -> NemotronHConfig:
    """The config whose dry run gives a Nemotron-H's stage table: a layer of each kind, whatever its pattern (its
    latent projections where moe_latent_size is set); two experts, one a token, where it has no mixture."""
    if "moe" in config.layer_types:
        return replace(config, layer_types=KINDS)
    return replace(config, layer_types=KINDS, n_experts=2, top_k=1, n_group=1, topk_group=1)


MIXER = Mamba2Mixer()
ATTENTION = GroupedQueryAttention()  # no positions (its config has no rope), no q or k norms
NORM = RMSNorm(description="RMSNorm gains (the Mamba layers' gated norm's [I] too)")
SYMBOLS = MAMBA2_SYMBOLS + (
    "; attention: H query heads of dh over Hkv key/value heads (G = H/Hkv), t attended; F the MLP's width; E "
    "experts, k a token, Te routed to expert e, Fe an expert's width, Dl the width they read and write, Fs the shared "
    "expert's"
)
NEMOTRON_H = Decoder(
    ByKind(
        {
            "mamba": Residual(MIXER, NORM),
            "full_attention": Residual(ATTENTION, NORM),
            "mlp": Residual(SquaredReLU(), NORM, takes_inputs=False),
            "moe": Residual(LatentMixture(), NORM, takes_inputs=False),
        }
    ),
    NORM,
    TokenEmbedding("embeddings", "x = W_te[ids]  (no positions: the scan is in order)"),
    embedding="embeddings",
    final_norm="norm_f",
    prefix="backbone.",
    ignored=r"mtp\..*",  # the multi-token-prediction layers transformers skips
    symbols=SYMBOLS,
    kind_order=KINDS,
    dry_run=every_kind,
    decode_first=True,
)


class NemotronHFormulas(HybridFormulas):
    """Each layer one kind: a scan in the Mamba layers, attention in the attention layers only, a generation summed
    pass by pass."""

    sums_generation = True

    def attention_vs_weights(self, c: NemotronHConfig) -> tuple[str, str, str]:
        """An attention layer's scores and mix against its products with weights, in a decode step at t keys."""
        return (
            "2 (2 H dh t) FLOPs against 2 (2 D H dh + 2 D Hkv dh) for the weights (an attention layer)",
            "2 H dh t / (2 D H dh + 2 D Hkv dh)",
            f"D = {c.n_embd:,}, H = {c.n_head}, Hkv = {c.n_kv_head}, dh = {c.d_head}",
        )

    def count_notes(self, config: NemotronHConfig, n_prompt: int, n_new: int) -> list[str]:
        """The Mamba layers' scan, beside the attention layers' cache."""
        mamba = config.layer_types.count("mamba")
        if not mamba:
            return []
        kv = 2 * config.n_kv_head * config.d_head if "full_attention" in config.layer_types else 0
        return MIXER.scan_notes(config, mamba, n_prompt, n_new, kv)


# Its variant: a model of experts in a latent (moe_latent_size), whose stages no preset has.
ARCHITECTURE = composed(
    "nemotron_h",
    NEMOTRON_H,
    NemotronHFormulas,
    config=NemotronHConfig,
    presets=PRESETS,
    label="Nemotron-H",
    variants=(replace(PRESETS["nemotron-3-nano-30b-a3b"], moe_latent=1024),),
    reference=reference,
)
