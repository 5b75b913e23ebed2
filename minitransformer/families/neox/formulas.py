"""The GPT-NeoX family's arithmetic in closed form, written from its equations alone (nothing here runs the model),
held by the tests to the ledger of real and shape-only runs.

Against GPT-2 (families/gpt2/formulas.py): the same products (one fused qkv of 3D, out, a two-matrix MLP, per head
scores and mix), no position table, an untied unembedding by default, attention biases only where attention_bias
says. Partial rotary and the parallel residual change no product: they are stages with no dot products.
"""

from __future__ import annotations

from ..gpt2.formulas import GPT2Formulas
from .config import NeoXConfig


class NeoXFormulas(GPT2Formulas):
    """GPT-2's products (the unembedding is embed_out's: h [R, D] x W_out^T [D, V]), weights per position and
    attention against them; its own parameters."""

    def parameters(self, config: NeoXConfig) -> int:  # type: ignore[override]
        """V D (embed_in) + L (4 D^2 + 2 D F + F + 5 D + attention biases 4 D) + 2 D (final norm) [+ V D embed_out].

        Per layer: W_qkv 3 D^2 (+ 3 D), W_o D^2 (+ D), W_up D F + F, W_down F D + D, two LayerNorms 2 x 2 D.
        """
        L, D, F, V = config.n_layer, config.n_embd, config.d_ff, config.vocab_size
        head = 0 if config.tie_word_embeddings else V * D
        attention_biases = 4 * D if config.attention_bias else 0
        return V * D + L * (4 * D * D + 2 * D * F + F + 5 * D + attention_biases) + 2 * D + head


FORMULAS = NeoXFormulas()
