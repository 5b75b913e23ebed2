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

Its bill (bill.py): the forward pass, and the attribution's products, each part against the two columns of W_U.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.kvcache import KeysValues
from ..engine.ledger import Phase
from ..engine.stages import UNEMBEDDING, Stage
from ..engine.tape import Dims, Tape
from ..errors import UserError
from ..families.parts.decoder import Decoder
from ..families.parts.norms import LayerNorm, RMSNorm
from ..models.model import Model
from .bill import Bill
from .lens import one_token

ATTRIBUTION = Stage(
    "attribution", ("attribution",), "matmul", "a = (gamma * part / sigma) W_U[[A, B]]^T  (sigma frozen)",
    "parts [T, D], W_U[[A, B]]^T [D, R]", UNEMBEDDING,
)  # fmt: skip
ATTRIBUTION_CONVENTIONS = (
    "final norm's scale frozen at the whole stream's, its gain applied; no fold_ln, no centring of weights "
    "(TransformerLens's fold_ln, center_writing_weights, center_unembed not applied)"
)


@dataclass
class Attribution:
    prompt: list[int]
    target: int
    versus: int
    difference: float  # the model's own logit(A) - logit(B) at the last position
    parts: list[tuple[str, float]]  # (what, its share of the difference), summing to the difference
    bill: Bill

    def to_dict(self, decode=None) -> dict:
        text = (lambda i: decode([i])) if decode else (lambda i: None)
        return {
            "prompt": self.prompt,
            "target": {"id": self.target, "text": text(self.target)},
            "versus": {"id": self.versus, "text": text(self.versus)},
            "conventions": ATTRIBUTION_CONVENTIONS,
            "difference": self.difference,
            "parts": [{"part": what, "attribution": value} for what, value in self.parts],
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
        else:
            parts.append((f"block {i} {mixer}", after - before))
    return parts


def attribute(model: Model, prompt, target, versus) -> Attribution:
    """The direct logit attribution of logit(target) - logit(versus) at the last position of `prompt`."""
    ids = model.prompt_ids(prompt)
    if not ids:
        raise UserError('the prompt is empty; give some text, e.g. "The capital of France is"')
    model.check_ids(ids)
    target_id, versus_id = one_token(model, target), one_token(model, versus, "--versus")
    decoder, c = model.architecture.forward, model.config
    norm = getattr(decoder, "norm", None)
    if not isinstance(decoder, Decoder) or not isinstance(norm, (LayerNorm, RMSNorm)) or decoder.after_logits:
        raise UserError(f"attribute knows a final LayerNorm or RMSNorm read straight by the unembedding; {c.name}'s "
                        f"readout is not that (a scale or soft-cap after the logits)")  # fmt: skip
    L = c.n_layer
    names = [f"blocks.{i}.hook_resid_{w}" for i in range(L) for w in ("pre", "mid", "post")]
    names = [n for n in names if n in model.lens_aliases]
    forward, products = Phase("prefill", 0, len(ids), len(ids), cached=False), Phase("prefill", 0, 0, 0, cached=False)
    logits, cache = model.run_with_cache(ids, names, all_positions=False, phase=forward)
    parts = branches(model, cache, len(ids) - 1)
    x = cache[f"blocks.{L - 1}.hook_resid_post"][0, -1]
    final = getattr(model.params, decoder.final_norm)
    gains = final.weight + 1 if getattr(norm, "one_plus", False) else final.weight
    centred = isinstance(norm, LayerNorm)
    sigma = np.sqrt((x.var() if centred else np.mean(x * x)) + c.norm_eps)
    scaled = np.stack([gains * ((p - p.mean()) if centred else p) / sigma for _, p in parts])  # [P, D]
    bias = final.bias if isinstance(norm, LayerNorm) and norm.bias else np.zeros_like(x)
    unembedding = getattr(model.params, decoder.embedding if c.tie_word_embeddings else decoder.unembedding).weight
    columns = unembedding[[target_id, versus_id]].T  # [D, 2]
    rows = np.concatenate([scaled, bias[None]]).astype(x.dtype)
    # The tape's symbols: a row a part (T of them), a column a token (R = 2)
    tape = Tape(Dims.of(c, len(rows), 0, R=2), products, None, precision=model.precision)
    two = tape.matmul(ATTRIBUTION, rows, columns, "T D, D R -> T R")  # [P + 1, 2]
    logits_bias = decoder.biased(c) and getattr(model.params, decoder.unembedding).bias
    constant = float(two[-1, 0] - two[-1, 1])
    if logits_bias is not False:
        constant += float(logits_bias[target_id] - logits_bias[versus_id])
    shares = [(what, float(a - b)) for (what, _), (a, b) in zip(parts, two[:-1], strict=True)]
    shares.append(("final norm's bias and the logits' bias", constant))
    bill = Bill()
    bill.add("forward pass", [forward])
    bill.add(f"attribution: {len(parts) + 1} parts x 2 columns of W_U", [products])
    difference = float(logits[-1, target_id] - logits[-1, versus_id])
    return Attribution(ids, target_id, versus_id, difference, shares, bill)
