"""validate's float64 truth for Mamba and Falcon-Mamba: transformers' own model, with what it computes in float32
whatever the model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else
imports this).

transformers' Mamba keeps in float32, in a float64 model: its RMSNorms (the input cast to float32), the residual
stream (residual_in_fp32), A = -exp(A_log.float()), D, dt_proj's bias, B and x where the scan forms Δ B x (`.float()`
of each), Falcon-Mamba's norms of dt, B and C, and the logits (`.float()` of them). Here, on the reference's instance
only: each RMSNorm computes in the model's dtype, and so does the residual stream; each mixer is the same steps
(in_proj, the depthwise conv with transformers' own F.conv1d, x_proj, the norms of dt, B and C where it has them,
dt_proj with its bias, softplus, the scan position by position, the D skip, the gate, out_proj) in float64; the
logits are returned as the lm_head computes them. A pass of the reference keeps no cache (validate and the tests
compare the logits of whole prompts).
"""

from __future__ import annotations

import types

from ..llama.reference import patched
from ..mamba2.reference import float64_backbone, whole_prompt

NOTE = (
    "  (transformers' float64 Mamba computes its norms, A, D, its scan's Δ B x and its logits in float32; its\n"
    "  reference here computes them in float64, the scan position by position, as families/mamba/reference.py\n"
    "  explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Float64 RMSNorms, mixers, residual stream and logits on this instance of transformers' MambaForCausalLM (or
    FalconMambaForCausalLM)."""
    float64_backbone(reference, model, torch, float64_mixers(reference, torch), float64_norms(reference, torch))


def float64_norms(reference, torch) -> int:
    """Every RMSNorm with gains (the blocks' and the final one, Jamba's norms of dt, B and C; not Falcon-Mamba's
    weightless ones, which the mixer computes) in its input's dtype; how many."""

    def rms_norm(module, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return module.weight * (hidden_states * torch.rsqrt(variance + module.variance_epsilon))

    found = 0
    for module in reference.modules():
        if type(module).__name__.endswith("RMSNorm") and hasattr(module, "variance_epsilon"):
            module.forward = types.MethodType(rms_norm, module)
            found += 1
    return found


def float64_mixers(reference, torch) -> int:
    """Every Mamba-1 mixer (MambaMixer, FalconMambaMixer, JambaMambaMixer) computing the slow path's steps in float64,
    its scan position by position; how many. Falcon-Mamba's norms dt, B and C without weights (its rms_eps), Jamba's
    with gains (its dt_layernorm, b_layernorm, c_layernorm)."""
    F = torch.nn.functional

    def mixer(module, hidden_states, cache=None, attention_mask=None, **_):
        hidden_states, mask = whole_prompt(hidden_states, cache, attention_mask)
        batch, T, _ = hidden_states.shape
        I, N, R = module.intermediate_size, module.ssm_state_size, module.time_step_rank  # noqa: E741 - the symbol
        x, z = module.in_proj(hidden_states).chunk(2, dim=-1)
        conv = F.conv1d(
            x.transpose(1, 2), module.conv1d.weight, module.conv1d.bias, padding=module.conv_kernel_size - 1, groups=I
        )[..., :T]
        x = module.act(conv).transpose(1, 2)
        if mask is not None:
            x = x * mask
        dt, B, C = module.x_proj(x).split([R, N, N], dim=-1)
        if hasattr(module, "rms_eps"):  # Falcon-Mamba's norms without weights
            dt, B, C = (v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + module.rms_eps) for v in (dt, B, C))
        elif hasattr(module, "dt_layernorm"):  # Jamba's, with gains (float64_norms makes them the model's dtype's)
            dt, B, C = module.dt_layernorm(dt), module.b_layernorm(B), module.c_layernorm(C)
        dt = F.softplus(module.dt_proj(dt))
        A = -torch.exp(module.A_log)
        h = x.new_zeros(batch, I, N)
        ys = []
        for t in range(T):
            h = torch.exp(dt[:, t, :, None] * A) * h + (dt[:, t] * x[:, t])[..., None] * B[:, t, None, :]
            ys.append((h * C[:, t, None, :]).sum(-1))  # h C: summed over N
        y = torch.stack(ys, dim=1) + module.D * x
        return module.out_proj(y * F.silu(z))

    return patched(reference, mixer, ("MambaMixer",))
