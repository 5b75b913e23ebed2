"""validate's float64 truth for the GPT-NeoX family: transformers' own model, with the one step it computes in float32
even in a float64 model recomputed in float64 (needs torch and transformers, as validate does; nothing else imports
this).

transformers' GPT-NeoX (modeling_gpt_neox.py) makes its rotary frequencies in float32 and its angles
`position_ids.float() * inv_freq.float()`, and their cos and sin, in float32, then casts the tables to the model's
dtype. Its LayerNorms are torch's, in the model's dtype (no cast, unlike the Llama family's RMSNorm), and SDPA (the
attention validate loads) computes in float64. So the float64 truth replaces the rotary module only, with angles
position x our float64 frequencies of the rotated share (rotary.inverse_frequencies), as families/llama/reference.py
does for the Llama family and explains.
"""

from __future__ import annotations

from ...errors import UserError
from ..llama.reference import float64_frequencies, float64_rotary

NOTE = (
    "  (transformers' float64 GPT-NeoX computes its rotary tables in float32; its reference here has them in "
    "float64,\n  as families/neox/reference.py explains)"
)


def float64_rotary_tables(reference, model, torch) -> None:
    """Replace, on this instance of transformers' GPTNeoXForCausalLM only, its rotary module's forward with a float64
    one."""
    if not float64_rotary(reference, float64_frequencies(model.config), torch):
        import transformers

        raise UserError(
            f"validate in float64 recomputes the rotary tables of transformers' {type(reference).__name__} "
            f"in float64, and transformers {transformers.__version__} does not lay them out as it expects "
            f"(rotary forward(x, position_ids)); upgrade transformers"
        )
