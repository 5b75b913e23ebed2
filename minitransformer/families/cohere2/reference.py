"""validate's float64 truth for Cohere2: transformers' own model, with the steps it computes in float32 whatever the
model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

Those steps (modeling_cohere2.py): its LayerNorms (Cohere2LayerNorm: the input and the gains to float32), the rotary
tables (float32 frequencies and angles, each frequency repeated in place) and the rotation (apply_rotary_pos_emb turns
q.float() and k.float()). The reference replaces, on this instance only, the norms and the rotary module with float64
ones (the rope's frequencies in float64, families/llama/reference.py says why) and each attention's rotation with one
in its dtype (its own forward otherwise).
"""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from .. import rotary
from ..llama.config import LlamaConfig
from ..llama.reference import float64_rotary, float64_rotation, patched

NOTE = (
    "  (transformers' float64 Cohere2 computes its LayerNorms, the rotary tables and the rotation in float32; its\n"
    "  reference here has them in float64, as families/cohere2/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Float64 LayerNorms, rotary tables and rotation, on this instance only."""
    config = model.config

    def layer_norm(module, x):
        centred = x - x.mean(-1, keepdim=True)
        return module.weight * (centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + module.variance_epsilon))

    norms = patched(reference, layer_norm, ("Cohere2LayerNorm",))
    rope = LlamaConfig.rope(config)  # the sliding layers' rope (the rotary module computes it for every layer)
    frequencies = rotary.inverse_frequencies(rope, np.dtype(np.float64))
    rotaries = float64_rotary(reference, lambda position_ids, layer_type: frequencies, torch, repeated=True)
    turned = float64_rotation(reference, torch, halved=False)
    if (norms, rotaries, turned) != (config.n_layer + 1, 1, config.n_layer):
        import transformers

        raise UserError(
            f"validate in float64 recomputes the LayerNorms and rotary of transformers' {type(reference).__name__} in "
            f"float64, and transformers {transformers.__version__} does not lay them out as it expects (found "
            f"{norms} norms, {rotaries} rotary modules, {turned} attentions); upgrade transformers"
        )
