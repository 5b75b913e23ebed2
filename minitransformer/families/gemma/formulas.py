"""The Gemma family's arithmetic in closed form, written from its equations alone (nothing here runs the model), held
by the tests to the ledger of real and shape-only runs.

Its products are the Llama block's (q, k, v, out, a gated MLP, the logits): the scale, the soft-caps, the extra norms
and the embedding's scale are elementwise, with no dot products. What differs: a sliding layer attends to at most
W + T - 1 keys and a full layer to all t, and the parameters hold four norms a block (and Gemma 3's q and k norms).
"""

from __future__ import annotations

from ..llama.formulas import LlamaFormulas
from .config import GemmaConfig

_SLIDING = object()


class GemmaFormulas(LlamaFormulas):
    def products(
        self, config: GemmaConfig, T: int, t: int, R: int = 1, B: int = 1, window=_SLIDING
    ) -> dict[str, tuple[int, int]]:
        """(dot products, dot-product length) of each matrix product of one pass, per layer for the block ops: of a
        layer with this window (by default a sliding layer's, config.sliding_window; None: a full layer's)."""
        W = config.sliding_window if window is _SLIDING else window
        logits = {"logits": (B * R * config.vocab_size, config.n_embd)}
        return self.attention_products(config, T, t, B, W) | self.mlp_products(config, T, B) | logits

    def attention_parameters(self, config: GemmaConfig) -> int:
        """Llama's (attention_bias puts biases on q, k, v and o), and Gemma 3's q and k norms' gains, 2 dh."""
        return super().attention_parameters(config) + config.qk_norm * 2 * config.d_head

    def norm_parameters(self, config: GemmaConfig) -> int:
        """Four RMSNorm gains of D a layer: before and after the attention and the MLP."""
        return 4 * config.n_embd


FORMULAS = GemmaFormulas()
