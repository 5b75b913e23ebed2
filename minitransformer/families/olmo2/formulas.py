"""OLMo 2's arithmetic in closed form: the Llama family's (families/llama/formulas.py), whose products it computes
unchanged (its norms are not products), with other norms among the parameters."""

from __future__ import annotations

from ..llama.formulas import LlamaFormulas
from .config import Olmo2Config


class Olmo2Formulas(LlamaFormulas):
    def attention_parameters(self, config: Olmo2Config) -> int:
        """Llama's (biases on q, k, v and o when attention_bias) + H dh + Hkv dh: the q and k norms' gains over the
        whole projections. (Its two norms of D a layer stand after the branches, not before: as many as Llama's.)"""
        return super().attention_parameters(config) + (config.n_head + config.n_kv_head) * config.d_head


FORMULAS = Olmo2Formulas()
