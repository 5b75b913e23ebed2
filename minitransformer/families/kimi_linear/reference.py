"""validate's float64 truth for Kimi Linear: transformers' own model, with every step it computes in float32 whatever
the model's dtype recomputed in float64 (needs torch and transformers, as validate does; nothing else imports this).

Those steps (modeling_kimi_linear.py): its RMSNorms (x.to(torch.float32)); in each KDA layer, the forget gate
(forget_gate.float(), A_log.float()), the delta rule (chunk_ and recurrent_kimi_delta_attention cast q, k, v, g and
beta to float32) and the gated RMSNorm (float32 throughout); the router (DeepSeek-V3's, in float32). The reference
replaces, on this instance only: the RMSNorms with float64 ones, each KDA layer's forward with the same equations in
float64, its delta rule in the recurrent form, one position at a time (the definition; our pass computes a prompt in
chunks, so the two agree only if the chunks are right), and the routers with float64 ones (and transformers' eager
loop over the experts, as torch's grouped_mm takes no float64). The MLA layers have no rotary tables (NoPE).
"""

from __future__ import annotations

from ..deepseek_v3.reference import float64_routers
from ..llama.reference import patched
from ..qwen35.reference import check_layout, convolved, recurrent_delta_rule, rms_normed
from .config import FULL

NOTE = (
    "  (transformers' float64 Kimi Linear computes its RMSNorms, the KDA layers' decay, delta rule and gated norm,\n"
    "  and the router, in float32; its reference here has them in float64, as families/kimi_linear/reference.py "
    "explains)"
)


def float64_throughout(reference, model, torch) -> None:
    """Replace, on this instance of transformers' model only, every step it computes in float32 with a float64 one."""
    config = model.config
    norms = patched(reference, float64_norm(torch), ("RMSNorm",))
    deltas = patched(reference, float64_kda(torch), ("DeltaAttention",))
    if hasattr(reference, "set_experts_implementation"):
        reference.set_experts_implementation("eager")
    routers = float64_routers(reference, torch)
    full = sum(kind.startswith(FULL) for kind in config.layer_types)
    latent_norms = full * (1 + (config.q_lora_rank is not None))  # kv_a_layernorm, and q_a_layernorm where q has a rank
    found = (norms, deltas, routers)
    expected = (2 * config.n_layer + latent_norms + 1, config.n_layer - full, config.expert_layers)
    check_layout(reference, found, expected, "RMSNorms, KDA layers and routers")


def float64_norm(torch):
    """An RMSNorm's forward in its input's dtype."""

    def rms_norm(module, x):
        return rms_normed(x, module, torch)

    return rms_norm


def float64_kda(torch):
    """A KDA layer's forward, its equations in its input's dtype, its delta rule position by position."""
    F = torch.nn.functional

    def kda(module, hidden_states, cache=None, attention_mask=None, **kwargs):
        if attention_mask is not None:
            hidden_states = hidden_states * attention_mask[:, :, None]
        h, (B, T, _) = hidden_states, hidden_states.shape
        H, dk = module.num_heads, module.head_dim
        mixed = convolved(module, torch.cat([module.q_proj(h), module.k_proj(h), module.v_proj(h)], dim=-1), torch)
        q, k, v = (x.reshape(B, T, H, dk) for x in torch.split(mixed, [H * dk] * 3, dim=-1))
        q, k = (x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6) for x in (q, k))
        q = q / dk**0.5
        gate = module.forget_gate
        f = gate.f_b_proj(gate.f_a_proj(h)) + gate.dt_bias
        g = (-gate.A_log.exp().reshape(H, 1) * F.softplus(f.reshape(B, T, H, dk))).exp()  # each channel's decay
        beta = module.b_proj(h).sigmoid()
        out = recurrent_delta_rule(q, k, v, beta, g[..., None], torch)  # each key channel's row decayed
        z = module.g_b_proj(module.g_a_proj(h)).reshape(B, T, H, dk)
        return module.o_proj((rms_normed(out, module.o_norm, torch) * z.sigmoid()).reshape(B, T, H * dk))

    return kda
