"""validate's float64 truth for Qwen3.5: transformers' own model, with every step it computes in float32 whatever the
model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

Those steps (modeling_qwen3_5.py, modeling_qwen3_5_moe.py): its RMSNorms (x.float(), times 1 + w.float()); the
rotary tables (float32 frequencies and angles); in each Gated DeltaNet layer, the decay g (A_log.float(),
a.float()), the delta rule (torch_chunk_gated_delta_rule and torch_recurrent_gated_delta_rule cast q, k, v, g and
beta to float32) and the gated RMSNorm (its input and the gate to float32); in the MoE models, the router's softmax
(dtype=torch.float). The reference replaces, on this instance only: the RMSNorms and the rotary module with float64
ones (families/llama/reference.py says why the tables are the config's, not float32 roundings), each DeltaNet layer's
forward with the same equations in float64, its delta rule in the recurrent form, one position at a time (the
definition; our pass computes a prompt in chunks, so the two agree only if the chunks are right), and the router with
a float64 one (and transformers' eager loop over the experts, as torch's grouped_mm takes no float64).
"""

from __future__ import annotations

import types

import numpy as np

from ...errors import UserError
from ..rotary import inverse_frequencies
from .config import FULL

NOTE = (
    "  (transformers' float64 Qwen3.5 computes its RMSNorms, the rotary tables, the DeltaNet's decay, delta rule and "
    "gated norm,\n  and a MoE's router softmax, in float32; its reference here has them in float64, as "
    "families/qwen35/reference.py explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, every step it computes in float32 with a float64 one."""
    config = model.config
    forwards = {
        "RMSNorm": float64_norm(torch),
        "RotaryEmbedding": float64_rotary(config, torch),
        "GatedDeltaNet": float64_deltanet(torch),
        "TopKRouter": float64_router(torch),
    }
    replaced = dict.fromkeys(forwards, 0)
    for module in reference.modules():
        name = type(module).__name__
        kind = next((k for k in forwards if name.endswith(k)), None)
        if kind is None or name.startswith(("Qwen3_5Vision", "Qwen3_5MoeVision")):
            continue
        module.forward = types.MethodType(forwards[kind], module)
        replaced[kind] += 1
    if config.is_moe and hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")
    full = sum(1 for kind in config.layer_types if kind.startswith(FULL))
    expected = {
        "RMSNorm": 2 * config.n_layer + 2 * full + 1,
        "RotaryEmbedding": 1,
        "GatedDeltaNet": config.n_layer - full,
        "TopKRouter": config.expert_layers,
    }
    check_layout(reference, replaced, expected)


def check_layout(reference, found, expected, what: str = "") -> None:
    """Refuse, naming transformers' version, a model whose float32 steps that float64_throughout `found` (and
    replaced) are not those it `expected`; `what`: the kinds `found` counts, where it does not name them itself (a
    tuple: Kimi Linear's)."""
    if found != expected:
        import transformers

        counted = f"{what} {found}" if what else f"{found}"
        raise UserError(
            f"validate in float64 recomputes transformers' {type(reference).__name__}'s float32 steps in "
            f"float64, and transformers {transformers.__version__} does not lay them out as it expects "
            f"(found {counted}, expected {expected}); upgrade transformers"
        )


def float64_norm(torch):
    """An RMSNorm's forward with gains 1 + w, in its input's dtype."""

    def rms_norm(module, x):
        return (1.0 + module.weight) * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + module.eps))

    return rms_norm


def float64_rotary(config, torch):
    """The rotary module's forward: the tables of every full-attention layer's rope (config.rope), in float64, times
    the module's attention factor (YaRN's; 1 for the default rope)."""
    rope = next(rope for rope in map(config.rope, range(config.n_layer)) if rope is not None)
    frequencies = torch.from_numpy(np.array(inverse_frequencies(rope, np.dtype(np.float64))))

    def rotary(module, x, position_ids):
        positions = position_ids[0] if position_ids.ndim == 3 else position_ids  # text: one position on every axis
        angles = positions[..., None].to(torch.float64) * frequencies
        angles = torch.cat((angles, angles), dim=-1)
        scaling = module.attention_scaling
        return (angles.cos() * scaling).to(x.dtype), (angles.sin() * scaling).to(x.dtype)

    return rotary


def float64_deltanet(torch):
    """A Gated DeltaNet layer's forward, its equations in its input's dtype, its delta rule position by position."""
    F = torch.nn.functional

    def deltanet(module, hidden_states, cache=None, attention_mask=None, **kwargs):
        if attention_mask is not None:
            hidden_states = hidden_states * attention_mask[:, :, None]
        B, T, _ = hidden_states.shape
        Hv, Hk, dk, dv = module.num_v_heads, module.num_k_heads, module.head_k_dim, module.head_v_dim
        mixed, z, b, a = projected(module, hidden_states, torch)
        mixed = convolved(module, mixed, torch)
        q, k, v = torch.split(mixed, [Hk * dk, Hk * dk, Hv * dv], dim=-1)
        q, k = (x.reshape(B, T, Hk, dk).repeat_interleave(Hv // Hk, dim=2) for x in (q, k))
        v = v.reshape(B, T, Hv, dv)
        q, k = (x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6) for x in (q, k))
        q = q / dk**0.5
        beta = b.sigmoid()
        g = -module.A_log.exp() * F.softplus(a + module.dt_bias)
        out = recurrent_delta_rule(q, k, v, beta, g.exp()[..., None, None], torch)  # one decay a head
        o = rms_normed(out.reshape(-1, dv), module.norm, torch)
        z = z.reshape(-1, dv)
        return module.out_proj((o * F.silu(z)).reshape(B, T, Hv * dv))

    return deltanet


def convolved(module, mixed, torch):
    """A linear-attention layer's [q k v] [B, T, Dc] through its depthwise causal conv (transformers' own F.conv1d,
    zeros before the prompt) and the conv's activation: Qwen3.5's Gated DeltaNet's, Kimi's KDA's."""
    from transformers.activations import ACT2FN

    T, K = mixed.shape[1], module.conv_kernel_size
    mixed = mixed.transpose(1, 2)
    mixed = torch.nn.functional.conv1d(mixed, module.conv1d.weight, padding=K - 1, groups=mixed.shape[1])[..., :T]
    return ACT2FN[module.activation](mixed).transpose(1, 2)


def recurrent_delta_rule(q, k, v, beta, decay, torch):
    """The delta rule in its recurrent form, one position at a time (the definition; our pass computes a prompt in
    chunks): decay the state, read it with k, correct it at k, read it with q. q, k [B, T, H, dk], v [B, T, H, dv],
    beta [B, T, H]; `decay` each position's factor on the state [B, H, dk, dv], broadcast from [B, T, H, ...] (one a
    head: Qwen3.5's; one a key channel: Kimi's); the outputs [B, T, H, dv]."""
    B, T, H, dv = v.shape
    S = torch.zeros(B, H, k.shape[-1], dv, dtype=v.dtype)
    out = torch.zeros(B, T, H, dv, dtype=v.dtype)
    for t in range(T):
        S = S * decay[:, t]
        delta = (v[:, t] - (S * k[:, t, ..., None]).sum(-2)) * beta[:, t, :, None]
        S = S + k[:, t, ..., None] * delta[..., None, :]
        out[:, t] = (S * q[:, t, ..., None]).sum(-2)
    return out


def rms_normed(x, norm, torch):
    """x normed by an RMSNorm module's gains and variance_epsilon, in x's dtype (a gated norm's, Kimi's RMSNorms)."""
    return norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon))


def projected(module, hidden_states, torch):
    """[q k v] [B, T, Dc], z, b and a of a DeltaNet layer: Qwen3.5's four projections, or Qwen3-Next's two (in_proj_qkvz,
    in_proj_ba) cut apart by its own fix_query_key_value_ordering."""
    h = hidden_states
    if not hasattr(module, "in_proj_qkvz"):
        return module.in_proj_qkv(h), module.in_proj_z(h), module.in_proj_b(h), module.in_proj_a(h)
    q, k, v, z, b, a = module.fix_query_key_value_ordering(module.in_proj_qkvz(h), module.in_proj_ba(h))
    return torch.cat([x.reshape(*x.shape[:2], -1) for x in (q, k, v)], dim=-1), z, b, a


def float64_router(torch):
    """A MoE layer's router: its softmax in the model's dtype, the top k renormalised (where norm_topk_prob: always in
    Qwen3.5)."""

    def router(module, hidden_states):
        hidden_states = hidden_states.reshape(-1, module.hidden_dim)
        logits = torch.nn.functional.linear(hidden_states, module.weight)
        top, indices = torch.topk(torch.softmax(logits, dim=-1), module.top_k, dim=-1)  # in the model's dtype
        if getattr(module, "norm_topk_prob", True):
            top = top / top.sum(dim=-1, keepdim=True)
        return logits, top, indices

    return router
