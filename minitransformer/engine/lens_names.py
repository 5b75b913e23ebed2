"""TransformerLens's names for our stages: `blocks.3.attn.hook_pattern` is `blocks.3.attn.weights`, in its shape.

TransformerLens (its TransformerBridge, 4.3) names the activations it hooks `hook_*`; people who use it write those
names in their notebooks. A name here that contains "hook_" is one of these, and reaches the stage it names in
captures (`cache["blocks.0.attn.hook_z"]`), in `run_with_cache(names=...)` and in hooks, in TransformerLens's shape:
the batch axis always first (1 for one prompt), then positions, then heads where there are heads
(`[batch, pos, head, d_head]`). A hook under such a name reads and returns that shape; its replacement goes back into
our layout before the pass continues.

The names are derived from our stage names by one table (`RULES`), written once for every family: a rule names a
TransformerLens hook and the stage of ours that holds the same value in each way a block can compute it (the first of
them the model's stage table has; `a|b` where a block computes one or the other, as a dense MLP or experts). What
TransformerLens does not hook (a scan's states, a router's logits and choices, an indexer's chosen keys) is named in
the same style by one rule (`lens_style`): `blocks.0.linear_attn.state` is `blocks.0.linear_attn.hook_state`, in our
shape with the batch axis in front. `lens_table(model)` lists every name a model answers to, for docs/api.md.

GPT-2's `embed` adds the learned positions in the same stage, so TransformerLens's `hook_embed` and `hook_pos_embed`
(the two apart) have no stage of ours there; the other families' `embed` is TransformerLens's `hook_embed`, or the
stage that says it is (Stage.lens: Gemma's `embed_scale`, as transformers' embedding module scales).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .shapes import ShapeOnly
from .stages import StageTable

LENS_MARK = "hook_"  # a name that contains it is TransformerLens's (or one in its style)


@dataclass(frozen=True)
class Layout:
    """How a stage of ours (with a batch axis in front) is laid out under TransformerLens's name, and back."""

    shape: str  # TransformerLens's shape, for the docs
    to_lens: Callable[[np.ndarray], np.ndarray]  # ours [B, ...] -> theirs
    from_lens: Callable[[np.ndarray, tuple[int, ...]], np.ndarray]  # theirs -> ours [B, ...] of the given shape


def _heads_last(x: np.ndarray) -> np.ndarray:  # [B, (Hkv, G | H), T, d] -> [B, T, H, d]
    return x.reshape(x.shape[0], -1, *x.shape[-2:]).swapaxes(1, 2)


def _head_positions(x: np.ndarray) -> np.ndarray:  # [B, (Hkv, G | H), T] -> [B, T, H]
    return x.reshape(x.shape[0], -1, x.shape[-1]).swapaxes(1, 2)


def _same(x: np.ndarray) -> np.ndarray:
    return x


def _back(tensor: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(tensor).reshape(shape)


def _swapped_back(tensor: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return np.asarray(tensor).swapaxes(1, 2).reshape(shape)


AS_IS = Layout("ours, batch first", _same, _back)  # [B, T, D] stays [B, T, D]; every shape gains its batch axis
HEADS_LAST = Layout("[batch, pos, head, d_head]", _heads_last, _swapped_back)  # ours are heads first
# A q or k norm's output, heads first as ours; a norm over all of a projection's heads at once ([B, T, H*dh]: OLMo 2's)
# as it is, as TransformerLens hooks it
NORMED = Layout(
    "[batch, head, pos, d_head], or [batch, pos, head*d_head] where one norm reads every head",
    lambda x: x if x.ndim == 3 else x.reshape(x.shape[0], -1, *x.shape[-2:]),
    _back,
)
HEAD_POSITIONS = Layout("[batch, pos, head]", _head_positions, _swapped_back)


def split_heads(width: str) -> Callable[[object], Layout]:
    """[B, T, heads x d] cut into [B, T, heads, d], d the config's `width` (a product's output, heads merged)."""

    def layout(config) -> Layout:
        d = getattr(config, width)
        return Layout("[batch, pos, head, d_head]", lambda x: x.reshape(*x.shape[:-1], -1, d), _back)

    return layout


def heads_of_n_head(config) -> Layout:
    """[B, T, H x dz] cut into the config's H heads, dz wide whatever it is: what W_O reads, whose heads are as wide as
    the values (a latent attention's v_head_dim, not its queries' and keys' d_head)."""
    H = config.n_head
    return Layout("[batch, pos, head, d_head]", lambda x: x.reshape(*x.shape[:-1], H, -1), _back)


STREAM = Layout("[batch, pos, d_model]", _same, _back)  # the residual stream and what is added to it
STREAMS = Layout("[batch, pos, streams, d_model]", _same, _back)  # DeepSeek-V4's N streams (hyper-connections)
STREAMS_IN = "embed.streams"  # the stage that makes them (families/parts/hyper.py)

# TransformerLens's hook -> the stage of ours with its value, in each way our blocks compute it (the first the table
# has; "a|b": a layer computes a or b) and its layout. Names inside a block are relative to "blocks.{i}.".
Candidate = tuple[str, "Layout | Callable[[object], Layout]"]
RULES: dict[str, tuple[Candidate, ...]] = {
    "hook_resid_mid": (("resid_mid", STREAM),),
    "hook_resid_post": (("resid_post", STREAM),),
    # A norm's output, its gain (and bias) applied: TransformerLens's `hook_normalized` is before them, no stage of ours
    "ln1.hook_out": (("ln_1", STREAM),),
    "ln2.hook_out": (("ln_2", STREAM),),
    # Each head's q, k and v as the projection made them (Qwen3.5's q with its output gate, interleaved per head)
    "attn.hook_q": (("attn.q_proj", split_heads("d_head")), ("attn.q", HEADS_LAST)),
    "attn.hook_k": (("attn.k_proj", split_heads("d_head")), ("attn.k", HEADS_LAST)),
    "attn.hook_v": (("attn.v_proj", split_heads("d_head")), ("attn.v", HEADS_LAST)),
    "attn.hook_q_normed": (("attn.q_normed", NORMED), ("attn.q_norm", NORMED)),  # Gemma's are q_norm, k_norm
    "attn.hook_k_normed": (("attn.k_normed", NORMED), ("attn.k_norm", NORMED)),
    "attn.hook_rot_q": (("attn.q_rot", HEADS_LAST),),
    "attn.hook_rot_k": (("attn.k_rot", HEADS_LAST),),
    "attn.hook_attn_scores": (("attn.scores", AS_IS),),
    "attn.hook_pattern": (("attn.weights", AS_IS),),
    "attn.hook_q_gate": (("attn.gate", AS_IS),),
    "attn.hook_z": (("attn.gated", heads_of_n_head), ("attn.z", heads_of_n_head)),  # what W_O reads
    "attn.hook_out": (("attn.out", STREAM),),
    # What the branch adds to the stream: after its own norm where it has one (OLMo 2's and Gemma's post-norms)
    "hook_attn_out": (("attn.normed|post_attn_norm", STREAM), ("attn.out", STREAM)),
    "mlp.hook_pre": (("mlp.gate", AS_IS), ("mlp.up", AS_IS)),  # before the activation: the gate's, where gated
    "mlp.hook_pre_linear": (("mlp.up", AS_IS),),  # the gated MLP's up projection (GATED_ONLY)
    "mlp.hook_post": (("mlp.mul", AS_IS), ("mlp.act", AS_IS)),  # what the down projection reads
    "mlp.hook_out": (("moe.out|mlp.down", STREAM),),
    "hook_mlp_out": (("mlp.normed|post_mlp_norm", STREAM), ("moe.out|mlp.down", STREAM)),
    # The Gated DeltaNet (Qwen3.5's linear attention)
    "linear_attn.hook_q": (("linear_attn.q", HEADS_LAST),),
    "linear_attn.hook_k": (("linear_attn.k", HEADS_LAST),),
    "linear_attn.hook_v": (("linear_attn.v", HEADS_LAST),),
    "linear_attn.hook_ssm_C": (("linear_attn.q", HEADS_LAST),),  # the scan's C and B are q and k, as a state space
    "linear_attn.hook_ssm_B": (("linear_attn.k", HEADS_LAST),),
    "linear_attn.hook_beta_logit": (("linear_attn.in_proj_b", AS_IS),),
    "linear_attn.hook_beta": (("linear_attn.beta", HEAD_POSITIONS),),
    "linear_attn.hook_ssm_write": (("linear_attn.beta", HEAD_POSITIONS),),
    "linear_attn.hook_log_decay": (("linear_attn.g", HEAD_POSITIONS),),
    "linear_attn.hook_ssm_decay": (("linear_attn.g", HEAD_POSITIONS),),
    "linear_attn.hook_recurrence_out": (("linear_attn.core_out", HEADS_LAST),),
    "linear_attn.hook_gate_input": (("linear_attn.in_proj_z", split_heads("linear_value_dim")),),
    "linear_attn.hook_out": (("linear_attn.out", STREAM),),
    "linear_attn.hook_linear_attn_out": (("linear_attn.out", STREAM),),
    "linear_attn.hook_ssm_out": (("linear_attn.out", STREAM),),
    # Mamba-2's mixer
    "norm.hook_out": (("ln_1", STREAM),),  # a block of one norm: TransformerLens calls it `norm`
    "hook_mixer_in": (("ln_1", STREAM),),
    "mixer.hook_in_proj": (("mixer.in_proj", AS_IS),),
    "mixer.inner_norm.hook_gate": (("mixer.z", AS_IS),),
    "mixer.hook_inner_norm": (("mixer.normed", AS_IS),),
    "mixer.hook_out": (("mixer.out", STREAM),),
    "mixer.hook_ssm_out": (("mixer.out", STREAM),),
    "hook_mixer_out": (("mixer.out", STREAM),),
}
GATED_ONLY = {"mlp.hook_pre_linear": "mlp.gate"}  # a rule that applies only where the block has this stage
ONE_NORM_ONLY = {"norm.hook_out", "hook_mixer_in"}  # blocks without ln_2 (a mixer and its norm)
FINAL: dict[str, tuple[Candidate, ...]] = {
    "ln_final.hook_out": (("ln_f", STREAM),),
    "hook_unembed": (("logits", AS_IS),),
    "unembed.hook_out": (("logits", AS_IS),),
}


@dataclass(frozen=True)
class Alias:
    """One name in TransformerLens's style: the stage(s) of ours it reads (alternatives: one layer computes one) and
    how it lays them out."""

    name: str
    ours: tuple[str, ...]
    layout: Layout


def lens_style(name: str) -> str:
    """Our stage's name in TransformerLens's style: `blocks.0.moe.chosen` -> `blocks.0.moe.hook_chosen`."""
    head, _, leaf = name.rpartition(".")
    return f"{head}.{LENS_MARK}{leaf}" if head else f"{LENS_MARK}{leaf}"


def lens_aliases(table: StageTable, config) -> dict[str, Alias]:
    """Every TransformerLens name of a model (`table` of `config.n_layer` blocks), in the order of its stages."""
    embed = [name for stage in table.embed for name in stage.names]
    final = [name for stage in table.final for name in stage.names]

    def resolved(rules: dict[str, tuple[Candidate, ...]], present: list[str], prefix: str) -> dict[str, Alias]:
        found = {}
        for lens, candidates in rules.items():
            if lens in GATED_ONLY and GATED_ONLY[lens] not in present:
                continue
            if lens in ONE_NORM_ONLY and "ln_2" in present:
                continue
            for ours, layout in candidates:
                names = tuple(n for n in ours.split("|") if n in present)
                if names:
                    made = layout if isinstance(layout, Layout) else layout(config)
                    found[prefix + lens] = Alias(prefix + lens, tuple(prefix + n for n in names), made)
                    break
        return found

    aliases: dict[str, Alias] = {}
    token_only = " + " not in table.stages["embed"].equation if "embed" in table.stages else False
    claimed = [name for stage in table.embed if stage.lens == "hook_embed" for name in stage.names]
    if token_only or claimed:
        aliases["hook_embed"] = Alias("hook_embed", ((claimed or ["embed"])[-1],), STREAM)
    # the stream block 0 reads: the embedding's last stage (embed, embed_scale, DeepSeek-V4's embed.streams, Gemma 4's
    # embed.stream after its per-layer inputs are made)
    embedded = [name for name in embed if name.startswith("embed")][-1]
    streams = STREAMS if embedded == STREAMS_IN else STREAM  # DeepSeek-V4's: N streams a position
    for i in range(config.n_layer):
        stream_in = f"blocks.{i - 1}.resid_post" if i else embedded
        aliases[f"blocks.{i}.hook_resid_pre"] = Alias(f"blocks.{i}.hook_resid_pre", (stream_in,), streams)
        found = resolved(RULES, table.block_names(config.layer_types[i]), f"blocks.{i}.")
        for name, alias in found.items():
            if name.split(".")[-1].startswith("hook_resid_"):
                found[name] = Alias(alias.name, alias.ours, streams)
        aliases.update(found)
    aliases.update(resolved(FINAL, final, ""))
    reserved = {*RULES, *FINAL, "hook_embed", "hook_pos_embed", "hook_resid_pre"}  # TransformerLens's own meanings
    for name in table.stage_names(config.n_layer, config.layer_types):
        styled = lens_style(name)
        relative = styled.split(".", 2)[2] if styled.startswith("blocks.") else styled
        if relative not in reserved and styled not in aliases:
            aliases[styled] = Alias(styled, (name,), AS_IS)
    return aliases


def is_lens_name(pattern: str) -> bool:
    return LENS_MARK in pattern


def lens_matches(pattern: str, aliases: dict[str, Alias]) -> list[str]:
    """TransformerLens names a name or glob matches."""
    return [name for name in aliases if fnmatch.fnmatchcase(name, pattern)]


def as_lens(tensor: np.ndarray, alias: Alias, batched: bool) -> np.ndarray:
    """Our stage's tensor under TransformerLens's name: the batch axis in front, then its layout."""
    return alias.layout.to_lens(tensor if batched else tensor[None])


def from_lens(replacement, alias: Alias, shape: tuple[int, ...], batched: bool) -> np.ndarray | ShapeOnly:
    """A hook's replacement under TransformerLens's name, back in our shape `shape` (a shape-only stand-in: one of
    that shape)."""
    if isinstance(replacement, ShapeOnly):
        return ShapeOnly(shape, replacement.dtype)
    ours = alias.layout.from_lens(np.asarray(replacement), shape if batched else (1, *shape))
    return ours if batched else ours[0]


def lens_table() -> str:
    """The rules as the Markdown table docs/api.md shows (a test holds the page to it)."""
    rows = ["| TransformerLens's name | our stage (the first a model has) | its shape there |", "|---|---|---|"]
    rows.append(
        "| `hook_embed` | `embed` (not GPT-2's: its positions are added in the same stage), or Gemma's `embed_scale` "
        "(transformers' embedding module scales) | [batch, pos, d_model] |"
    )
    rows.append(
        "| `blocks.{i}.hook_resid_pre` | `embed` (or `embed_scale`; DeepSeek-V4's `embed.streams`, Gemma 4's "
        "`embed.stream`) for i = 0, else "
        "`blocks.{i-1}.resid_post` | [batch, pos, d_model] ([batch, pos, streams, d_model] of DeepSeek-V4's streams) |"
    )
    for prefix, rules in (("blocks.{i}.", RULES), ("", FINAL)):
        for lens, candidates in rules.items():
            ours = ", or ".join(" or ".join(f"`{n}`" for n in name.split("|")) for name, _ in candidates)
            layouts = {(layout if isinstance(layout, Layout) else layout(_Widths())).shape for _, layout in candidates}
            only = {"mlp.hook_pre_linear": " (a gated MLP's)"}.get(
                lens, " (a block of one norm)" * (lens in ONE_NORM_ONLY)
            )
            rows.append(f"| `{prefix}{lens}` | {ours}{only} | {'; '.join(sorted(layouts))} |")
    rows.append(
        "| any other `a.b.hook_c` | our `a.b.c` (`blocks.0.linear_attn.hook_state`, `blocks.0.moe.hook_chosen`)"
        " | ours, batch first |"
    )
    return "\n".join(rows)


class _Widths:
    """Any config, for the table: a layout's shape does not depend on the widths."""

    def __getattr__(self, name: str) -> int:
        return 1
