"""Direct logit attribution: the logit difference logit(A) - logit(B) at the last position, split among what wrote the
residual stream the final norm reads.

The stream the final norm reads is the sum of its parts: the embedding, and each block's branches (the attention's or
mixer's, resid_mid - resid_pre; the MLP's, resid_post - resid_mid; a block of one branch, resid_post - resid_pre).
With the final norm's scale frozen at its value on the whole stream (sigma: LayerNorm's sqrt(var + eps), centring
each part; RMSNorm's sqrt(mean(x^2) + eps)), the norm is affine, so each part's contribution is its own product
(gamma * part / sigma) W_U^T at the columns A and B, and the norm's bias and the logits' bias are one more part: the
parts sum to the difference (to rounding: 1e-10 in float64). No fold_ln, no centring of the weights: TransformerLens's
`logit_attrs` on its bridge applies the same frozen scale (`apply_ln_to_stack`) but leaves the norm's gain out unless
its weights are folded (fold_ln): we apply the gain, as the model does.

Where a block adds its attention's output o = Z W_o + b_o to the stream as it is (a pre-norm block, unscaled), that
part is split into its heads, head h's z_h W_o[h] (its dh rows of W_o) at the last position, and the bias b_o; where
it adds a mixture of experts' output as it is, the MLP's part is split into the experts the last token was routed to
(each one's gated output) and the shared expert's: each split sums to its part. TransformerLens's
`stack_head_results` under `apply_ln_to_stack` gives the same heads.

Its bill (bill.py): the forward pass, the heads' products z_h W_o[h] (a dh x D product a head), and the attribution's
products, each part and each piece of a split against the two columns of W_U.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..engine.kvcache import KeysValues
from ..engine.ledger import Phase
from ..engine.stages import UNEMBEDDING, Stage
from ..engine.tape import Dims, Tape
from ..errors import UserError
from ..families.parts.blocks import PreNorm
from ..families.parts.decoder import Decoder
from ..families.parts.norms import LayerNorm, RMSNorm
from ..families.parts.part import module_of
from ..models.model import Model
from ..models.options import switch
from .bill import Bill
from .count import check_pass
from .lens import check_analysed, two_tokens


def _product(op: str, equation: str, reads: str) -> Stage:
    """The attribution's products: each captured under its op, counted with the unembedding."""
    return Stage(op, (op,), "matmul", equation, reads, UNEMBEDDING)


ATTRIBUTION = _product(
    "attribution", "a = (gamma * part / sigma) W_U[[A, B]]^T  (sigma frozen)", "parts [T, D], W_U[[A, B]]^T [D, R]"
)
HEAD_OUTPUT = _product(
    "attribution.heads", "r_h = z_h W_o[h]  (each head's output at the last position)", "z [H, 1, dz], W_o [H, dz, D]"
)
ATTRIBUTION_CONVENTIONS = (
    "final norm's scale frozen at the whole stream's, its gain applied; no fold_ln, no centring of weights "
    "(TransformerLens's fold_ln, center_writing_weights, center_unembed not applied)"
)


def conventions(fold_ln: bool = False, center_writing_weights: bool = False) -> str:
    """What the attribution applied, in TransformerLens's words where it applied its options."""
    if not (fold_ln or center_writing_weights):
        return ATTRIBUTION_CONVENTIONS
    folded = "fold_ln: the final norm's gain folded into W_U, its bias into the logits' bias"
    unfolded = "no fold_ln: the final norm's gain applied to each part"
    centred = "center_writing_weights: each part centred over d_model"
    applied = [folded if fold_ln else unfolded, centred if center_writing_weights else "no centring of the parts"]
    return (
        f"final norm's scale frozen at the whole stream's; {'; '.join(applied)} (TransformerLens's options of "
        f"the same names; center_unembed not applied)"
    )


@dataclass
class Attribution:
    prompt: list[int]
    target: int
    versus: int
    difference: float  # the model's own logit(A) - logit(B) at the last position
    parts: list[tuple[str, float]]  # (what, its share of the difference), summing to the difference
    bill: Bill
    # (the part it splits, what, its share): a block's attention by head (and b_o), its mixture by expert, each
    # part's pieces summing to its share
    pieces: list[tuple[str, str, float]] = field(default_factory=list)
    conventions: str = ATTRIBUTION_CONVENTIONS

    def to_dict(self, decode=None) -> dict:
        text = (lambda i: decode([i])) if decode else (lambda i: None)
        return {
            "prompt": self.prompt,
            "target": {"id": self.target, "text": text(self.target)},
            "versus": {"id": self.versus, "text": text(self.versus)},
            "conventions": self.conventions,
            "difference": self.difference,
            "parts": [
                {
                    "part": what,
                    "attribution": value,
                    **(
                        {"pieces": [{"piece": p, "attribution": v} for of, p, v in self.pieces if of == what]}
                        if any(of == what for of, _, _ in self.pieces)
                        else {}
                    ),
                }
                for what, value in self.parts
            ],
            "bill": self.bill.to_dict(),
        }


def branches(model: Model, cache, last: int) -> list[tuple[str, np.ndarray]]:
    """(label, [D]) of each part of the final stream at position `last`: the embedding, then each block's branches."""
    c = model.config
    stream = lambda name: cache[name][0, last]  # noqa: E731 - TransformerLens's layout, one prompt
    parts = [("embed", stream("blocks.0.hook_resid_pre"))]
    for i in range(c.n_layer):
        before, after = stream(f"blocks.{i}.hook_resid_pre"), stream(f"blocks.{i}.hook_resid_post")
        mixer = "attn" if isinstance(c.layer_cache(i), KeysValues) else "mixer"
        if f"blocks.{i}.hook_resid_mid" in cache:
            middle = stream(f"blocks.{i}.hook_resid_mid")
            parts += [(f"block {i} {mixer}", middle - before), (f"block {i} mlp", after - middle)]
        else:  # one part: a layer of one branch, or both branches added in one sum (a parallel block)
            both = getattr(block_of(model, i), "mlp", None) is not None
            parts.append((f"block {i} {mixer}{'+mlp' if both else ''}", after - before))
    return parts


def block_of(model: Model, i: int):
    """Layer i's block (its kind's, where the layers differ)."""
    decoder = model.architecture.forward
    assert isinstance(decoder, Decoder), "attribute refuses a model that is not a Decoder before it splits a part"
    block = decoder.block
    block = block.blocks[model.config.layer_types[i]] if hasattr(block, "blocks") else block
    wired = getattr(block, "wired", None)  # a block whose config chooses its wiring (GPT-NeoX's): the one it runs
    return block if wired is None else wired(model.config)


def as_added(model: Model, i: int) -> PreNorm | None:
    """Layer i's block where it adds its branches' outputs to the stream as they are (a pre-norm block, unscaled): only
    there is a branch's split (by head, by expert) a split of its part."""
    block = block_of(model, i)
    return block if isinstance(block, PreNorm) and not block.residual else None


def splits_heads(model: Model, i: int) -> bool:
    """Layer i's attention part is split into heads: its block adds the attention's output as it is, and its attention
    says its W_o (output_projection)."""
    block = as_added(model, i)
    named = f"blocks.{i}.attn.hook_z" in model.lens_aliases
    return block is not None and named and hasattr(block.mixer, "output_projection")


def output_projection_of(model: Model, i: int):
    """(W_o [H dz, D], b_o or None) of layer i's attention (splits_heads), as its attention reads them."""
    block = as_added(model, i)
    assert block is not None
    layer = getattr(model.params, model.architecture.forward.layers)[i]  # type: ignore[attr-defined]  # a Decoder's
    return block.mixer.output_projection(module_of(layer, block.names[1]))


def head_outputs(model: Model, z, i: int, tape: Tape):
    """([H, D] each head's output z_h W_o[h] at the last position, b_o or None) of layer i's attention (splits_heads),
    z [H, dz] what its W_o reads there."""
    w_o, b_o = output_projection_of(model, i)
    H, dz = z.shape
    heads = tape.with_sizes(dz=dz).matmul(HEAD_OUTPUT, z[:, None, :], w_o.reshape(H, dz, -1), "H T dz, H dz D -> H T D")
    return heads[:, 0], b_o


def expert_outputs(model: Model, cache, i: int) -> list[tuple[str, np.ndarray]] | None:
    """(label, [D]) of each expert the last token was routed to in layer i (its gated output) and the shared expert's,
    or None where layer i has no experts or its block does not add their sum as it is."""
    at = lambda name: cache[f"blocks.{i}.{name}"][-1] if f"blocks.{i}.{name}" in cache else None  # noqa: E731
    chosen, weighed = at("moe.chosen"), at("moe.expert_out")
    if as_added(model, i) is None or chosen is None or weighed is None:
        return None
    pieces = [(f"expert {int(e)}", y) for e, y in zip(chosen, weighed.reshape(len(chosen), -1), strict=True)]
    routed, out = at("moe.routed_out"), at("moe.out")
    if routed is not None and out is not None:  # a shared expert's output added to the routed experts' sum (a layer
        pieces.append(("shared expert", out - routed))  # without one, ERNIE's at no shared experts, names no moe.out)
    return pieces


def attribute(
    model: Model, prompt, target, versus, fold_ln: bool = False, center_writing_weights: bool = False
) -> Attribution:
    """The direct logit attribution of logit(target) - logit(versus) at the last position of `prompt`. `fold_ln`: the
    final norm's gain folded into the two columns of W_U and its bias into the logits' bias, as TransformerLens's
    fold_ln does, in place of the gain applied to each part (the same shares, to rounding); `center_writing_weights`:
    each part centred over d_model before the norm, as centring every weight that writes to the stream makes it (a
    LayerNorm centres them anyway; refused for an RMSNorm, whose outputs it would change)."""
    check_analysed(model, "attribute", "count_attribute")
    switch("fold_ln", fold_ln), switch("center_writing_weights", center_writing_weights)
    ids = model.prompt_ids(prompt)
    if not ids:
        raise UserError('the prompt is empty; give some text, e.g. "The capital of France is"')
    model.check_ids(ids)
    target_id, versus_id = two_tokens(model, target, versus)
    decoder, norm = _final_norm(model, center_writing_weights)
    c = model.config
    forward, products = Phase("prefill", 0, len(ids), len(ids), cached=False), Phase("prefill", 0, 0, 0, cached=False)
    heads_phase = Phase("prefill", 0, 0, 0, cached=False)
    logits, cache = model.run_with_cache(ids, _captured(model), all_positions=False, phase=forward)
    parts = branches(model, cache, len(ids) - 1)
    split = _split(model, cache, Tape(Dims.of(c, 1, 0, R=2), heads_phase, None, precision=model.precision))
    x = cache[f"blocks.{c.n_layer - 1}.hook_resid_post"][0, -1]  # the stream the final norm reads
    rows = [p for _, p in parts] + [p for _, _, p in split]
    scaled, gains, bias = _through_final_norm(model, decoder, norm, x, rows, fold_ln, center_writing_weights)
    unembedding = getattr(model.params, decoder.embedding if c.tie_word_embeddings else decoder.unembedding).weight
    columns = unembedding[[target_id, versus_id]].T  # [D, 2]
    # The tape's symbols: a row a part (T of them), a column a token (R = 2)
    tape = Tape(Dims.of(c, len(scaled) + 1, 0, R=2), products, None, precision=model.precision)
    two = _against_columns(tape, scaled, bias, gains, columns, fold_ln, x.dtype)  # [P + 1, 2]
    logits_bias = decoder.biased(c) and getattr(model.params, decoder.unembedding).bias
    constant = float(two[-1, 0] - two[-1, 1])
    if logits_bias is not False:
        constant += float(logits_bias[target_id] - logits_bias[versus_id])
    shares = [(what, float(a - b)) for (what, _), (a, b) in zip(parts, two[: len(parts)], strict=True)]
    pieces = [(of, what, float(a - b)) for (of, what, _), (a, b) in zip(split, two[len(parts) : -1], strict=True)]
    shares.append(("final norm's bias and the logits' bias", constant))
    bill = _bill(forward, heads_phase, products, len(parts), split)
    difference = float(logits[-1, target_id] - logits[-1, versus_id])
    told = conventions(fold_ln, center_writing_weights)
    return Attribution(ids, target_id, versus_id, difference, shares, bill, pieces, told)


def _final_norm(model: Model, center_writing_weights: bool) -> tuple[Decoder, LayerNorm | RMSNorm]:
    """The decoder and its final norm, refused where the unembedding does not read that norm straight (so that,
    its scale frozen, it is affine), and for --center-writing-weights where the norm does not centre."""
    decoder, c = model.architecture.forward, model.config
    norm = getattr(decoder, "norm", None)
    if not isinstance(decoder, Decoder) or not isinstance(norm, (LayerNorm, RMSNorm)) or decoder.steps_after_logits(c):
        raise UserError(
            f"attribute knows a final LayerNorm or RMSNorm read straight by the unembedding; {c.name}'s "
            f"readout is not that (a scale or soft-cap after the logits); lens and patch analyse it"
        )
    if decoder.head is not None:  # DeepSeek-V4's: the streams mixed by weights they compute themselves
        raise UserError(
            f"attribute splits one residual stream into what wrote it; {c.name} carries several, mixed into one "
            f"before the final norm by weights computed from the streams themselves (hyper-connections); lens and "
            "patch analyse it"
        )
    if center_writing_weights and not isinstance(norm, LayerNorm):
        raise UserError(
            f"--center-writing-weights centres what writes to the stream, which changes what {c.name}'s "
            f"RMSNorm reads (TransformerLens applies it to LayerNorm models only); leave it out"
        )
    return decoder, norm


def _captured(model: Model) -> list[str]:
    """What the forward pass keeps for the attribution: each block's streams, its heads' z where the lens names them,
    its mixture's routing where it has one."""
    L = model.config.n_layer
    names = [f"blocks.{i}.hook_resid_{w}" for i in range(L) for w in ("pre", "mid", "post")]
    names = [n for n in names if n in model.lens_aliases]
    names += [f"blocks.{i}.attn.hook_z" for i in range(L) if f"blocks.{i}.attn.hook_z" in model.lens_aliases]
    known = set(model.stage_names)
    routing = [f"blocks.{i}.moe.{what}" for i in range(L) for what in ("chosen", "expert_out", "routed_out", "out")]
    names += [n for n in routing if n in known]
    return names


def _split(model: Model, cache, head_tape: Tape) -> list[tuple[str, str, np.ndarray]]:
    """The splits: (the part split, what, [D]) for each piece, read or computed at the last position: a block's
    attention by head (and b_o), its mixture by expert (and the shared expert), the heads' products on `head_tape`."""
    split: list[tuple[str, str, np.ndarray]] = []
    for i in range(model.config.n_layer):
        if splits_heads(model, i):
            outputs, b_o = head_outputs(model, cache[f"blocks.{i}.attn.hook_z"][0, -1], i, head_tape)
            split += [(f"block {i} attn", f"head {h}", r) for h, r in enumerate(outputs)]
            if b_o is not None:
                split.append((f"block {i} attn", "bias b_o", b_o))
        experts = expert_outputs(model, cache, i)
        if experts is not None:
            split += [(f"block {i} mlp", what, y) for what, y in experts]
    return split


def _through_final_norm(
    model: Model, decoder: Decoder, norm: LayerNorm | RMSNorm, x, rows, fold_ln: bool, center_writing_weights: bool
):
    """Each row [D] as the final norm, its scale frozen at the stream x's, makes it: gamma * part / sigma ([P, D]; a
    LayerNorm centres the part first; no gamma where fold_ln gives it to W_U); and the norm's gain and bias (zeros
    where it has none)."""
    final = getattr(model.params, decoder.final_norm)
    gains = final.weight + 1 if getattr(norm, "one_plus", False) else final.weight
    centred = isinstance(norm, LayerNorm)
    sigma = np.sqrt((x.var() if centred else np.mean(x * x)) + model.config.norm_eps)
    centre = lambda p: p - p.mean()  # noqa: E731 - over d_model
    writing = centre if center_writing_weights else (lambda p: p)  # what centring the writing weights makes a part
    gained = 1.0 if fold_ln else gains  # folded: the gain is W_U's
    through_norm = lambda p: gained * (centre(writing(p)) if centred else p) / sigma  # noqa: E731 - frozen: affine
    scaled = np.stack([through_norm(p) for p in rows])  # [P + S, D]
    bias = final.bias if isinstance(norm, LayerNorm) and norm.bias else np.zeros_like(x)
    return scaled, gains, bias


def _against_columns(tape: Tape, scaled, bias, gains, columns, fold_ln: bool, dtype) -> np.ndarray:
    """[P + 1, 2]: each scaled part, then the norm's bias, against W_U's columns of A and B, in the stream's dtype."""
    if fold_ln:  # the parts against gamma * W_U; the norm's bias against W_U itself (b_U' = b_U + b W_U)
        folded = tape.with_sizes(T=len(scaled)).matmul(
            ATTRIBUTION, scaled.astype(dtype), (gains[:, None] * columns).astype(dtype), "T D, D R -> T R"
        )
        folded_bias = tape.with_sizes(T=1).matmul(ATTRIBUTION, bias[None].astype(dtype), columns, "T D, D R -> T R")
        return np.concatenate([folded, folded_bias])
    rows = np.concatenate([scaled, bias[None]]).astype(dtype)
    return tape.matmul(ATTRIBUTION, rows, columns, "T D, D R -> T R")


def _bill(forward: Phase, heads_phase: Phase, products: Phase, parts: int, split: list) -> Bill:
    """What the attribution cost: the forward pass, the heads' products where it split heads, its own products."""
    bill = Bill()
    bill.add("forward pass", [forward])
    n_heads = sum(what.startswith("head ") for _, what, _ in split)
    if n_heads:
        bill.add(f"each head's output z_h W_o[h]: {n_heads} heads", [heads_phase])
    bill.add(_attribution_line(parts + 1, len(split)), [products])
    return bill


def _attribution_line(parts: int, pieces: int) -> str:
    return f"attribution: {parts} parts{f' and {pieces} pieces' if pieces else ''} x 2 columns of W_U"


def count_attribute(config, tokens: int) -> Bill:
    """The attribution's bill from shapes alone, for any config attribute runs on: a shape-only pass of `tokens` positions, each split
    layer's head products, and the parts' and pieces' products against two columns of W_U (a layer with experts: the
    k the last token goes to, and the shared one)."""
    from ..engine.shapes import ShapeOnly

    check_pass(config, tokens)
    model = Model.without_weights(config)
    _final_norm(model, center_writing_weights=False)  # refused as the real attribution refuses it, before any bill
    L, D = config.n_layer, config.n_embd
    forward, heads_phase = Phase("prefill", 0, tokens, tokens, cached=False), Phase("prefill", 0, 0, 0, cached=False)
    products = Phase("prefill", 0, 0, 0, cached=False)
    model.run_with_cache(np.zeros(tokens, dtype=np.int64), _captured(model), all_positions=False, phase=forward)
    known = set(model.stage_names)
    head_tape = Tape(Dims.of(config, 1, 0, R=2), heads_phase, None)
    parts, pieces, n_heads = 1, 0, 0
    for i in range(L):
        parts += 2 if f"blocks.{i}.resid_mid" in known else 1
        if splits_heads(model, i):
            H, (w_o, b_o) = config.n_head, output_projection_of(model, i)
            head_outputs(model, ShapeOnly((H, w_o.shape[0] // H)), i, head_tape)
            n_heads, pieces = n_heads + H, pieces + H + (b_o is not None)
        if {f"blocks.{i}.moe.chosen", f"blocks.{i}.moe.expert_out"} <= known and as_added(model, i) is not None:
            pieces += config.top_k + ({f"blocks.{i}.moe.routed_out", f"blocks.{i}.moe.out"} <= known)  # a shared one
    rows = parts + 1
    Tape(Dims.of(config, rows + pieces, 0, R=2), products, None).matmul(
        ATTRIBUTION, ShapeOnly((rows + pieces, D)), ShapeOnly((D, 2)), "T D, D R -> T R"
    )
    bill = Bill()
    bill.add("forward pass", [forward])
    if n_heads:
        bill.add(f"each head's output z_h W_o[h]: {n_heads} heads", [heads_phase])
    bill.add(_attribution_line(rows, pieces), [products])
    return bill
