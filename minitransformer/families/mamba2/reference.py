"""validate's float64 truth for Mamba-2 (and Nemotron-H's Mamba layers): transformers' own model, with what it
computes in float32 whatever the model's dtype recomputed in float64 (needs torch and transformers, as validate
does; nothing else imports this).

transformers' Mamba2 keeps in float32, in a float64 model: its RMSNorms (the input cast to float32), the whole
chunked scan (mamba2_chunk_scan casts x, B, C, dt and A to float32), A = -exp(A_log.float()), the gated RMSNorm, and
the logits (Mamba2ForCausalLM returns `.float()` of them). Here, on the reference's instance only: each RMSNorm
computes in the model's dtype, and so does the residual stream; each mixer is the same torch_forward steps (in_proj, the depthwise conv with
transformers' own F.conv1d, softplus, the D skip, the gate and the grouped norm, out_proj) in float64, with the scan
computed in its recurrent form position by position (h = exp(dt A) h + dt x ⊗ B, y = h C): the definition the
chunked form of ours computes in another order, so the truth does not share our chunking; and the logits are
returned as the lm_head computes them. A pass of the reference keeps no cache (validate and the tests compare the
logits of whole prompts).
"""

from __future__ import annotations

import types

from ...errors import UserError
from ..llama.reference import patched

NOTE = (
    "  (transformers' float64 Mamba-2 computes its norms, its scan and its logits in float32; its reference here\n"
    "  computes them in float64, the scan position by position, as families/mamba2/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Float64 RMSNorms, mixers and logits on this instance of transformers' Mamba2ForCausalLM."""
    float64_backbone(reference, model, torch, float64_mixers(reference, torch), float64_norms(reference, torch))


def float64_backbone(reference, model, torch, mixers: int, norms: int) -> None:
    """With its `mixers` and `norms` already recomputed in float64 (one a layer, and the final norm): the residual
    stream and the logits too (Mamba-2's and Mamba-1's backbones alike)."""
    if mixers != model.config.n_layer or norms != model.config.n_layer + 1:
        raise UserError(
            f"validate in float64 recomputes the mixers and norms of transformers' "
            f"{type(reference).__name__} in float64, and found {mixers} mixers and {norms} norms for "
            f"{model.config.n_layer} layers"
        )
    for block in reference.backbone.layers:
        block.residual_in_fp32 = False  # it casts the residual stream to float32
    float64_logits(reference, reference.backbone, torch)


def float64_norms(reference, torch) -> int:
    """Every plain RMSNorm module (not a mixer's gated norm) computing in its input's dtype; how many."""

    def rms_norm(module, hidden_states):
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        return module.weight.to(hidden_states.dtype) * (hidden_states * torch.rsqrt(variance + module.variance_epsilon))

    return patched(reference, rms_norm, ("RMSNorm",))


def float64_logits(reference, base, torch) -> None:
    """The model's forward: the base model without a cache, then the lm_head's logits in the model's dtype."""

    def forward(module, input_ids=None, attention_mask=None, **_):
        hidden = base(input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
        return types.SimpleNamespace(logits=module.lm_head(hidden))

    reference.forward = types.MethodType(forward, reference)


def float64_mixers(reference, torch, classes: tuple[str, ...] = ("Mamba2Mixer",)) -> int:
    """Every Mamba-2 mixer (a module whose class's name ends with one of `classes`: Mamba2Mixer, and the hybrids'
    copies of it) computing torch_forward's steps in float64, its scan position by position; how many. Falcon-H1's
    options are its module's: its input times ssm_in_multiplier, in_proj's output times its mup_vector, the norm
    after the gate, before it (norm.norm_before_gate) or none (mamba_rms_norm false)."""
    F = torch.nn.functional

    def mixer(module, hidden_states, cache=None, attention_mask=None, **_):
        hidden_states, mask = whole_prompt(hidden_states, cache, attention_mask)
        batch, T, _ = hidden_states.shape
        Hs, P, N, Ng = module.num_heads, module.head_dim, module.ssm_state_size, module.n_groups
        I = module.intermediate_size  # noqa: E741 - the symbol
        projected = module.in_proj(hidden_states * getattr(module, "ssm_in_multiplier", 1.0))
        if getattr(module, "mup_vector", None) is not None:
            projected = projected * module.mup_vector
        z, xbc, dt = projected.split([I, module.conv_dim, Hs], dim=-1)
        conv = F.conv1d(
            xbc.transpose(1, 2),
            module.conv1d.weight,
            module.conv1d.bias,
            padding=module.conv_kernel_size - 1,
            groups=module.conv_dim,
        )[..., :T]
        xbc = module.act(conv).transpose(1, 2)
        if mask is not None:
            xbc = xbc * mask
        x, B, C = xbc.split([I, Ng * N, Ng * N], dim=-1)
        dt = F.softplus(dt + module.dt_bias).clamp(*module.time_step_limit)
        A = -torch.exp(module.A_log)
        x = x.reshape(batch, T, Hs, P)
        B = B.reshape(batch, T, Ng, N).repeat_interleave(Hs // Ng, dim=2)
        C = C.reshape(batch, T, Ng, N).repeat_interleave(Hs // Ng, dim=2)
        h = x.new_zeros(batch, Hs, P, N)
        ys = []
        for t in range(T):
            h = (
                torch.exp(dt[:, t] * A)[..., None, None] * h
                + (dt[:, t, :, None] * x[:, t])[..., None] * B[:, t, :, None]
            )
            ys.append((h * C[:, t, :, None, :]).sum(-1) + module.D[:, None] * x[:, t])  # h C: summed over N
        y = torch.stack(ys, dim=1).reshape(batch, T, I)
        normed, first = getattr(module, "mamba_rms_norm", True), getattr(module.norm, "norm_before_gate", False)
        if not (normed and first):
            y = y * F.silu(z)
        if normed:
            groups = y.reshape(batch, T, Ng, I // Ng)
            groups = groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + module.norm.variance_epsilon)
            y = module.norm.weight * groups.reshape(batch, T, I)
        return module.out_proj(y * F.silu(z) if normed and first else y)

    return patched(reference, mixer, classes)


def whole_prompt(hidden_states, cache, attention_mask):
    """A float64 mixer's input, refused with a cache (validate compares whole prompts), its padded positions zeroed;
    and the mask [B, T, 1] that zeroes them (None: none)."""
    if cache is not None:
        raise UserError("the float64 reference computes whole prompts, without a cache")
    mask = None if attention_mask is None else attention_mask[:, :, None].to(hidden_states.dtype)
    return (hidden_states if mask is None else hidden_states * mask), mask
