"""The GPT-NeoX family's forward pass (GPT-NeoX-20B, Pythia), as transformers' GPTNeoXForCausalLM computes it.

Read it beside gpt2/forward.py and llama/forward.py: LayerNorms with biases and biased products as GPT-2's,
rotary positions as the Llama family's, and these differences, each on its own line below:

- q, k and v come from one fused product (query_key_value), as GPT-2's, but its 3D outputs are laid out head by
  head, [H, 3, dh] (each head's q, k and v side by side), where GPT-2's are [3, H, dh]: the split is a reshape;
- partial rotary: only the first r = rotary_pct x dh numbers of each head's q and k are turned, the other dh - r
  pass through unchanged (Pythia: a quarter);
- the parallel residual (use_parallel_residual, the default): attention and MLP both read the block's input,
  x + attn(ln1(x)) + mlp(ln2(x)), in one sum; serial when false, x + attn(ln1(x)), then x + mlp(ln2(x));
- an untied unembedding (embed_out) unless tie_word_embeddings.

The scores, mask, softmax and mix are the Llama family's (llama.attend), every head its own key/value head; the
rotary tables are made by the decoder (families/rotary.py) for the share of each head the config turns.
Weights are stored as transformers' nn.Linear holds them, [out, in]; `W.T` is a view, no copy.
"""

from __future__ import annotations

from types import SimpleNamespace

from ...engine.ops import ACTIVATIONS, merge_heads, ungroup_heads
from ...engine.tape import Tape
from ..blocks import LayerInputs, ln
from ..decoder import Decoder
from ..llama.forward import attend, bias_of
from ..rotary import rotate_partial
from .config import NeoXConfig


def neox_block(x, p: SimpleNamespace, config: NeoXConfig, at: Tape, inputs: LayerInputs):
    """Parallel: x + attn(LN_1(x)) + mlp(LN_2(x)), both norms of the block's input. Serial (use_parallel_residual
    false): x + attn(LN_1(x)), then x + mlp(LN_2(x)), as GPT-2's block."""
    h = at.stage("ln_1", ln(x, p.input_layernorm, config), "T D")
    o = attention(h, p.attention, config, at, inputs)
    if not config.use_parallel_residual:
        x = at.stage("resid_mid", o + x, "T D")
    h = at.stage("ln_2", ln(x, p.post_attention_layernorm, config), "T D")
    m = mlp(h, p.mlp, config, at)
    # In transformers' order: (m + o) + x in parallel, m + (o + x) in series.
    return at.stage("resid_post", m + o + x if config.use_parallel_residual else m + x, "T D")


def attention(h, p: SimpleNamespace, config: NeoXConfig, at: Tape, inputs: LayerInputs):
    """Causal multi-head attention from the fused, head-by-head query_key_value, with partial rotary positions."""
    qkv = at.matmul("qkv", h, p.query_key_value.weight.T, "T D, D 3D -> T 3D", bias=bias_of(p.query_key_value))
    q, k, v = at.stage("split_heads", split_heads_by_head(qkv, config.n_head), "H T dh")
    q, k = at.stage("rope", (rotate_partial(q, *inputs.rotary), rotate_partial(k, *inputs.rotary)), "H T dh")
    K, V = at.stage("cache", inputs.cache.append(k, v) if inputs.cache is not None else (k, v), "H t dh")
    # In chunks of query rows, each against the keys it can see (a long prompt skips most of its future).
    z = at.in_row_chunks(lambda q, K, V, bias, at: attend(q, K, V, bias, config, at), q, K, V, inputs.mask)
    z = at.stage("merge_heads", merge_heads(ungroup_heads(z)), "T D")
    return at.matmul("out", z, p.dense.weight.T, "T D, D D -> T D", bias=bias_of(p.dense))


def mlp(h, p: SimpleNamespace, config: NeoXConfig, at: Tape):
    u = at.matmul("mlp.up", h, p.dense_h_to_4h.weight.T, "T D, D F -> T F", bias=p.dense_h_to_4h.bias)
    g = at.stage("mlp.act", ACTIVATIONS[config.hidden_act](u), "T F")
    return at.matmul("mlp.down", g, p.dense_4h_to_h.weight.T, "T F, F D -> T D", bias=p.dense_4h_to_h.bias)


def split_heads_by_head(qkv, n_head: int):
    """[..., T, 3D] laid out [H, 3, dh] -> Q, K, V each [..., H, T, dh]: views, no copies (GPT-2's split_heads
    reads [3, H, dh])."""
    *lead, T, three_d = qkv.shape
    heads = qkv.reshape(*lead, T, n_head, 3, three_d // (3 * n_head))
    return tuple(heads[..., i, :].swapaxes(-3, -2) for i in range(3))


# Token ids [T] (or [B, T]) -> logits [R, V]: the decoder (LayerNorms, embed_in and embed_out) around these blocks.
neox = Decoder(neox_block, ln, embedding="embed_in", final_norm="final_layer_norm", unembedding="embed_out")
