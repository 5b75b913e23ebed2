"""DeepSeek-V4 in the table of families (transformers' DeepseekV4ForCausalLM), composed of parts:
- the embedding copied into hc_mult residual streams, each layer a block of manifold-constrained hyper-connections
  around its two branches (families/parts/hyper.py), and the head that collapses the streams before the final norm;
- attention (families/parts/compressed.py): a sliding window of one key-value head (K = V) in every layer, per-head
  sinks (gpt-oss's, families/parts/sinks.py), the grouped low-rank output; the compressed layers' entries (a 4:1
  compressor with its lightning indexer, which chooses index_topk of them for each query; a 128:1 one, all read);
- in every layer experts (families/parts/moe.py): sqrt(softplus) scores with a correction bias that only chooses, or,
  in the hash_moe layers, a fixed table of each token id's experts; clamped SwiGLU experts (their gate and up one
  3-D tensor) beside a clamped shared expert.

Its checkpoint: transformers 5's names (model.layers.i.self_attn.{q_a_proj, q_a_norm, q_b_proj, kv_proj, kv_norm,
o_a_proj, o_b_proj, sinks, compressor.*}, attn_hc / ffn_hc.{fn, base, scale}, mlp.gate.{weight, e_score_correction_bias
or tid2eid}, mlp.experts.{gate_up_proj, down_proj}, mlp.shared_experts.*, model.hc_head.*); the multi-token-prediction
layers (mtp.*) are not the model's, as in transformers."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

from ...engine.row_chunks import computed_pairs
from ..deepseek_v32.config import PRESETS as V32_PRESETS
from ..deepseek_v32.family import DECODER as V32_DECODER
from ..parts.compressed import CompressedAttention
from ..parts.decoder import Decoder
from ..parts.family import DecoderFormulas, composed
from ..parts.hyper import HyperConnected, HyperHead, StreamsEmbedding
from ..parts.moe import HashRouter, Mixture, MlpByKind, SharedExpert, SqrtSoftplusRouter, SwiGLUExperts
from ..parts.part import Products
from . import reference
from .config import CSA, HCA, PRESETS, SLIDING, DeepseekV4Config

# The model card's claims at a context of 1,000,000: a decode step's FLOPs and the KV cache against DeepSeek-V3.2's
CARD = {"deepseek-v4-pro": ("27%", "10%"), "deepseek-v4-flash": ("10%", "7%")}

SYMBOLS = (
    "T new positions, t the window's keys attended, D d_model, N streams (hc_mult), H heads of dh, dq query rank, "
    "dr rotary numbers, m a compressor's rate, Nw windows a pass closes, S a window's slots (m, or 2m at 4:1), c "
    "entries so far, kc entries a query reads at 4:1 (min(index_topk, c)), Hi index heads of di, g output groups of "
    "Hg = H dh / g to dg, E experts of Fe (k a token), Fs the shared expert's width, V vocabulary"
)
NAMES, SYMBOLS_E = (("w1", "gate"), ("w3", "up"), ("w2", "down")), ("W1_e", "W3_e", "W2_e")
EXPERTS = SwiGLUExperts(names=NAMES, symbols=SYMBOLS_E, width="moe_inner", F="Fe", clamp="swiglu_limit")
SHARED = SharedExpert(clamp="swiglu_limit", names=("w1", "w3", "w2"))
MIXTURES = {"hash_moe": Mixture(HashRouter(), EXPERTS, SHARED), "moe": Mixture(SqrtSoftplusRouter(), EXPERTS, SHARED)}
MLP = MlpByKind(MIXTURES, by="mlp_layer_types")
HEAD = HyperHead()
DECODER = Decoder(
    HyperConnected(CompressedAttention(), MLP),
    embed=StreamsEmbedding(),
    head=HEAD,
    unembedding="head",
    biases="",
    ignored=r"mtp\..*",
    symbols=SYMBOLS,
    kind_order=tuple(kind + hashed for kind in (SLIDING, CSA, HCA) for hashed in ("+hash", "")),
)
# The products whose B is no weight: attention's over the window and the entries, the indexer's, the compressors'
# pooled sums, the hyper-connections' collapse and mixing of the streams
ATTENDING = ("scores", "mix", "compressed.scores", "compressed.mix", "index.scores", "index.sum", "compressor.pool")
ACTIVATIONS = (*ATTENDING, "index.compressor.pool", "attn_hc.collapse", "attn_hc.mix", "ffn_hc.collapse", "ffn_hc.mix")


ATTENTION_OPS = ("scores", "mix", "compressed.scores", "compressed.mix", "index.scores", "index.sum")  # grow with t
POOLS = ("compressor.pool", "index.compressor.pool")  # the compressors' sums over a window's slots (neither)


class DeepseekV4Formulas(DecoderFormulas):
    activations = ACTIVATIONS

    def decode_attention(self, config: Any, t: int) -> tuple[Fraction, str]:
        """Layer 0's decode step at context t: its attention (the window's min(t, W) keys; its entries, t // m of them,
        all or the kc chosen, and the indexer's scores of every one) against its products with weights."""
        ops = self.decoder.block.products(config, 1, t, 1, 0)
        attention = sum(n * length for op, (n, length) in ops.items() if op in ATTENTION_OPS)
        weights = sum(n * length for op, (n, length) in ops.items() if op not in (*ATTENTION_OPS, *POOLS))
        ratio = Fraction(attention, weights)
        return ratio, f"at t = {t:,}: {float(ratio):.3g} (no t / X law: the window caps at W, the entries grow t / m)"

    def count_notes(self, config: Any, n_prompt: int, n_new: int) -> list[str]:
        """count's lines: a decode step and the KV cache at the count's last context beside DeepSeek-V3.2-Exp's at the
        same context, both in closed form (the model card's comparison)."""
        t = n_prompt + n_new - 1
        v32 = replace(V32_PRESETS["deepseek-v3.2-exp"], n_positions=max(t, 1))
        ours, theirs = self.pass_macs(config, 1, t - 1), v32_decode_macs(v32, t)
        cache = sum(config.layer_cache(i).numbers_held(t) for i in range(config.n_layer))
        latent = v32.n_layer * t * (v32.kv_lora_rank + v32.qk_rope_head_dim + v32.index_head_dim)
        card = CARD.get(config.name)
        said = (lambda i: f" (the model card: {card[i]})") if card else (lambda i: "")
        return [
            f"DeepSeek-V4 beside DeepSeek-V3.2-Exp at a context of {t:,} (both in closed form; the card compares them at "
            "1,000,000)",
            f"  a decode step: {ours:,} MACs here, {theirs:,} for deepseek-v3.2-exp: {ours / theirs:.1%}{said(0)}",
            f"  the KV cache: {cache:,} numbers here (window, entries, indexer; the compressors' state apart), "
            f"{latent:,} in V3.2's latent cache (c and k_r, {v32.kv_lora_rank + v32.qk_rope_head_dim}, and the "
            f"indexer's key, {v32.index_head_dim}, a layer and position): {cache / latent:.1%}{said(1)}",
            "  (docs/families/deepseek_v4.md says where each number differs from the card's, and why)",
        ]

    def attention_vs_weights(self, c: Any) -> tuple[str, str, str]:
        return (
            "2 H dh (min(t, W) + e) + 2 Hi (di + 1) c' FLOPs (e the entries a query reads: t // m at 128:1, "
            "min(t // m, kc) at 4:1; c' = t // m the indexer scores, 4:1 only) against its products with weights",
            "",
            f"H = {c.n_head}, dh = {c.head_dim}, W = {c.sliding_window}, m = {c.csa_rate} or {c.hca_rate}, "
            f"kc = {c.compressed_topk:,}, Hi = {c.index_n_heads}, di = {c.index_head_dim}",
        )

    def products(self, config: Any, T: int, t: int, R: int = 1, B: int = 1) -> Products:
        """The last layer's products (a pass of T positions at context t), the head's and the logits'."""
        head = HEAD.products(config, T, t, B)
        return self.decoder.products(config, T, t, B, config.n_layer - 1, R) | head

    def pass_macs(self, config: Any, T: int, past: int, R: int = 1, B: int = 1) -> int:
        """Every layer's MACs in a pass of T positions after `past`, the head's and the logits': each product's dot
        products x their length, but the window's mix, H dh MACs a (query, key) pair of the row chunks' computed_pairs."""
        t, total = past + T, 0
        for layer in range(config.n_layer):
            ops = self.decoder.block.products(config, T, t, B, layer)
            pairs = computed_pairs(T, t, config.sliding_window)
            total += (
                sum(n * length for op, (n, length) in ops.items() if op != "mix")
                + B * config.n_head * config.head_dim * pairs
            )
        head = sum(n * length for n, length in HEAD.products(config, T, t, B).values())
        return total + head + B * R * config.vocab_size * config.n_embd

    def generation_macs(
        self, config: Any, n_prompt: int, n_new: int, use_cache: bool = True, B: int = 1, windows: bool = True
    ) -> int:
        """A prefill and n_new - 1 decode steps with the cache (each step 1 position after the earlier ones), or each
        step the whole sequence again from position 0 without it, pass by pass (the compressors close a window every m
        positions: the passes differ)."""
        if use_cache:
            passes = [(n_prompt, 0)] + [(1, n_prompt + k) for k in range(n_new - 1)]
        else:
            passes = [(n_prompt + k, 0) for k in range(n_new)]
        return sum(self.pass_macs(config, T, past, 1, B) for T, past in passes)


def v32_decode_macs(config: Any, t: int) -> int:
    """DeepSeek-V3.2's decode step at context t in closed form: each layer's products (its scores and mix over
    min(t, index_topk) keys, its indexer's over all t) and the logits."""
    layers = sum(
        n * length
        for i in range(config.n_layer)
        for n, length in V32_DECODER.block.products(config, 1, t, 1, i).values()
    )
    return layers + config.vocab_size * config.n_embd


ARCHITECTURE = composed(
    "deepseek_v4",
    DECODER,
    DeepseekV4Formulas,
    config=DeepseekV4Config,
    presets=PRESETS,
    label="DeepSeek-V4",
    reference=reference,
)
