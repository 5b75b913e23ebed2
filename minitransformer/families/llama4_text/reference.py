"""validate's float64 truth for Llama 4's text model: transformers' own model, with what it computes in float32 even in
a float64 model recomputed in float64 on this instance (families/llama/reference.py says why): its RMSNorms
(`x.float()`), its L2 norm of q and k (an RMSNorm without gains, `x.float()` too), its rotary tables (complex64
e^(i p f) from float32 angles), the rotation (`xq.float()` viewed as complex64), the router's sigmoid (`.float()`) and
the temperature's log1p (of float32 positions). Everything else is transformers' own float64."""

from __future__ import annotations

import inspect
import types

import numpy as np

from ...errors import UserError
from ..llama.reference import float64_frequencies

NOTE = (
    "  (transformers' float64 Llama 4 computes its norms, rotary tables and rotation, the router's sigmoid and the\n"
    "  temperatures' log1p in float32; its reference here has them in float64, as families/llama4_text/reference.py "
    "explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, the forwards that compute in float32 (see above)."""
    frequencies = float64_frequencies(model.config)

    def rms_norm(module, x):
        normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.eps)
        return normed * module.weight if hasattr(module, "weight") else normed

    def rotary(module, x, position_ids):
        inv_freq = torch.from_numpy(np.array(frequencies(position_ids, None)))
        angles = position_ids[..., None].to(torch.float64) * inv_freq
        return torch.polar(torch.ones_like(angles), angles) * module.attention_scaling

    def apply_rotary_emb(xq, xk, freqs_cis):
        turned = []
        for x in (xq, xk):  # in x's own dtype: complex128 from float64
            pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
            turned.append(torch.view_as_real(pairs * freqs_cis[:, :, None, :]).flatten(3))
        return tuple(turned)

    def router(module, hidden_states):
        logits = torch.nn.functional.linear(hidden_states, module.weight)
        top, chosen = torch.topk(logits, module.top_k, dim=1)
        scores = torch.full_like(logits, float("-inf")).scatter_(1, chosen, top)
        return torch.sigmoid(scores), logits

    class Float64Log1p:  # torch, but log1p in float64 (the temperatures' positions are float32 there)
        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def log1p(x):
            return torch.log1p(x.to(torch.float64))

    replaced = {"norms": 0, "rotary": 0, "attention": 0, "router": 0}
    for module in reference.modules():
        name = type(module).__name__
        if name in ("Llama4TextRMSNorm", "Llama4TextL2Norm"):
            module.forward, replaced["norms"] = types.MethodType(rms_norm, module), replaced["norms"] + 1
        elif name == "Llama4TextRotaryEmbedding":
            module.forward, replaced["rotary"] = types.MethodType(rotary, module), replaced["rotary"] + 1
        elif name == "Llama4Router":
            module.forward, replaced["router"] = types.MethodType(router, module), replaced["router"] + 1
        elif name == "Llama4TextAttention":
            own = with_globals(type(module).forward, apply_rotary_emb=apply_rotary_emb, torch=Float64Log1p())
            module.forward, replaced["attention"] = types.MethodType(own, module), replaced["attention"] + 1
    moe = any(k.endswith("_moe") for k in model.config.layer_types)
    check_replaced(replaced, ["norms", "rotary", "attention"] + ["router"] * moe)


def with_globals(method, **names):
    """A method's function, run with some of its module's globals replaced (the rotation, torch for its log1p)."""
    forward = inspect.unwrap(method)
    own_globals = dict(forward.__globals__, **names)
    own = types.FunctionType(forward.__code__, own_globals, forward.__name__, forward.__defaults__, forward.__closure__)
    own.__kwdefaults__ = forward.__kwdefaults__
    return own


def check_replaced(replaced: dict, needed: list[str]) -> None:
    """Refuse a transformers whose Llama 4 has none of a kind of module this reference replaces."""
    missing = [what for what in needed if not replaced[what]]
    if missing:
        import transformers

        raise UserError(
            f"validate in float64 recomputes in float64 what transformers {transformers.__version__}'s "
            f"Llama 4 computes in float32, and found no {', '.join(missing)} to replace; upgrade "
            "transformers"
        )
