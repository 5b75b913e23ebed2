"""GPT-2's forward pass, one named stage per line, as GPT2LMHeadModel computes it at inference.

Each line is an equation of the model: its stage name (stages.py), the NumPy that computes it, and
its shape in symbols that the tape checks against the real sizes (T new positions, t attended
positions, D = d_model, H heads of dh, F = MLP width, V vocabulary; see stages.py). Every matrix
product goes through `tape.matmul`, which counts its dot products.

The same code runs on real arrays and on shape-only stand-ins (shapes.py): counting a model too
big for this machine is running this code without weights.
"""

from __future__ import annotations

from math import sqrt
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .config import GPT2Config
from .errors import UserError
from .hooks import ActivationCache, HookHandle, HookRegistry, breakpoint_hook, selector, stage_names
from .ids import as_token_ids
from .kvcache import KVCache, LayerCache
from .ledger import Phase
from .ops import ACTIVATIONS, layer_norm, mask_future, merge_heads, softmax, split_heads
from .shapes import ShapeOnly
from .tape import Dims, Tape, Watcher
from .weights import as_tree, expected_shapes


def gpt2(ids, p, config: GPT2Config, cache: KVCache | None, tape: Tape, all_positions: bool):
    """Token ids [T] (or [B, T]) -> logits [R, V]: for every position, or the last one only."""
    past = cache.length if cache is not None else 0
    T = ids.shape[-1]
    x = tape.stage("embed", p.wte.weight[ids] + p.wpe.weight[past : past + T], "T D")
    for i, block in enumerate(p.h):
        kv = cache.layer(i) if cache is not None else None
        x = transformer_block(x, block, config, i, kv, tape.layer(i))
    h = tape.stage("ln_f", layer_norm(x, p.ln_f.weight, p.ln_f.bias, config.layer_norm_epsilon), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(T)
    unembedding = p.wte.weight if config.tie_word_embeddings else p.lm_head.weight
    return tape.matmul("logits", h, unembedding.T, "R D, D V -> R V")  # .T is a view: no copy of W_te


def transformer_block(x, p, config: GPT2Config, layer: int, kv: LayerCache | None, at: Tape):
    """Pre-LayerNorm block: x + attention(LN(x)), then x + MLP(LN(x))."""
    eps = config.layer_norm_epsilon
    h = at.stage("ln_1", layer_norm(x, p.ln_1.weight, p.ln_1.bias, eps), "T D")
    x = at.stage("resid_mid", x + attention(h, p.attn, config, layer, kv, at), "T D")
    h = at.stage("ln_2", layer_norm(x, p.ln_2.weight, p.ln_2.bias, eps), "T D")
    return at.stage("resid_post", x + mlp(h, p.mlp, config, at), "T D")


def attention(h, p, config: GPT2Config, layer: int, kv: LayerCache | None, at: Tape):
    """Causal multi-head self-attention from the fused c_attn projection."""
    qkv = at.matmul("qkv", h, p.c_attn.weight, "T D, D 3D -> T 3D", bias=p.c_attn.bias)
    q, k, v = at.stage("split_heads", split_heads(qkv, config.n_head), "H T dh")
    K, V = at.stage("cache", kv.append(k, v) if kv is not None else (k, v), "H t dh")
    s = at.matmul("scores", q, K.swapaxes(-1, -2), "H T dh, H dh t -> H T t")
    s = at.stage("scale", scale_scores(s, config, layer, out=at.scratch(s)), "H T t")
    s = at.stage("mask", mask_future(s, at.dims.past, config.n_positions, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    z = at.matmul("mix", a, V, "H T t, H t dh -> H T dh")
    z = at.stage("merge_heads", merge_heads(z), "T D")
    return at.matmul("out", z, p.c_proj.weight, "T D, D D -> T D", bias=p.c_proj.bias)


def mlp(h, p, config: GPT2Config, at: Tape):
    u = at.matmul("mlp.up", h, p.c_fc.weight, "T D, D F -> T F", bias=p.c_fc.bias)
    g = at.stage("mlp.act", ACTIVATIONS[config.activation_function](u), "T F")
    return at.matmul("mlp.down", g, p.c_proj.weight, "T F, F D -> T D", bias=p.c_proj.bias)


def attention_scale(config: GPT2Config, layer: int) -> float:
    """1/sqrt(dh) (scale_attn_weights), further divided by layer + 1 (scale_attn_by_inverse_layer_idx)."""
    factor = 1.0 / sqrt(config.d_head) if config.scale_attn_weights else 1.0
    return factor / (layer + 1) if config.scale_attn_by_inverse_layer_idx else factor


def scale_scores(s, config: GPT2Config, layer: int, out=None):
    factor = attention_scale(config, layer)
    return s if factor == 1.0 else np.multiply(s, np.float32(factor), out=out)


class Model:
    """A GPT-2 with its weights (or shape-only stand-ins) and the GPT-2 tokenizer."""

    def __init__(self, config: GPT2Config, params: SimpleNamespace, source: str) -> None:
        self.config = config
        self.params = params
        self.source = source  # where the weights came from, for headers
        self.shape_only = isinstance(params.wte.weight, ShapeOnly)
        self.hooks = HookRegistry(lambda: stage_names(config.n_layer))  # add_hook, break_at (hooks.py)

    def __repr__(self) -> str:
        c = self.config
        return f"Model({c.name!r}: {c.n_layer} layers, d_model {c.n_embd}, {c.n_head} heads, from {self.source})"

    @classmethod
    def without_weights(cls, config: GPT2Config) -> "Model":
        """The same model with shape-only stand-ins for weights: counts everything, computes nothing."""
        stand_ins = {name: ShapeOnly(shape) for name, shape in expected_shapes(config).items()}
        return cls(config, as_tree(stand_ins, config.n_layer), source="shape-only")

    @property
    def tokenizer(self):
        from .tokenizer import load_tokenizer

        return load_tokenizer()

    @property
    def name(self) -> str:
        return self.config.name

    def new_cache(self, batch: tuple[int, ...] = (), capacity: int | None = None) -> KVCache:
        c = self.config
        capacity = c.n_positions if capacity is None else capacity
        return KVCache(c.n_layer, c.n_head, c.d_head, capacity, batch, shape_only=self.shape_only)

    def check_ids(self, token_ids, past: int = 0) -> np.ndarray:
        """Token ids as an int array [T] or [B, T], refused with a clear message if the model can't take them
        (see ids.py for what is taken)."""
        ids = as_token_ids(token_ids, self.config.vocab_size, vocabulary="this model's vocabulary")
        if ids.size == 0:
            raise UserError("token ids must be a non-empty list (or a [batch, tokens] array) of integers")
        if past + ids.shape[-1] > self.config.n_positions:
            raise UserError(
                f"{past + ids.shape[-1]} positions exceed this model's context of {self.config.n_positions}"
            )
        return ids

    def prompt_ids(self, prompt) -> list[int]:
        """A prompt, text or token ids, as the list of ids the model reads (maybe empty; not yet checked
        against the context). Text goes through the tokenizer, ids through the same check as check_ids."""
        if isinstance(prompt, str):
            return self.tokenizer.encode(prompt, what="the prompt")
        if prompt is None or isinstance(prompt, (bytes, bytearray)):
            raise UserError(f"the prompt must be text (a str) or a list of token ids, not {type(prompt).__name__}")
        return as_token_ids(prompt, self.config.vocab_size, batch=False, vocabulary="this model's vocabulary").tolist()

    def run(self, token_ids, *, cache: KVCache | None = None, all_positions: bool = False,
            phase: Phase | None = None, watcher: Watcher | None = None):  # fmt: skip
        """One forward pass over new token ids: logits [R, V] (R = T if all_positions else 1).

        With a cache, the ids are the positions after those already cached. `phase` collects the
        ledger of this pass; `watcher` sees every stage (see tape.py), after the model's hooks (add_hook).
        """
        past = cache.length if cache is not None else 0
        ids = self.check_ids(token_ids, past)
        c = self.config
        T = ids.shape[-1]
        dims = Dims(T=T, t=past + T, D=c.n_embd, H=c.n_head, F=c.d_ff, V=c.vocab_size,
                    R=T if all_positions else 1, batch=ids.shape[:-1])  # fmt: skip
        tape = Tape(dims, phase, self.hooks.watcher(then=watcher))  # None when nobody watches: no cost
        return gpt2(ids, self.params, c, cache, tape, all_positions)

    def run_with_cache(self, token_ids, names=None, *, all_positions: bool = True, kv_cache: KVCache | None = None,
                       phase: Phase | None = None):  # fmt: skip
        """(logits, ActivationCache): one forward pass that keeps its named intermediate tensors.

        `names` picks what to keep: None (everything), a name or glob ("blocks.*.attn.weights"), a
        list of them, or a predicate name -> bool. Hooks run first; the cache holds what they
        returned. Logits are for every position unless all_positions=False (then the cache also has
        `last`); with `kv_cache` this is one step of cached decoding; `phase` collects the pass's
        ledger, as for run(). See hooks.ActivationCache.
        """
        known = stage_names(self.config.n_layer)
        activations = ActivationCache(self.name, known, selector(names, known))
        logits = self.run(token_ids, cache=kv_cache, all_positions=all_positions, phase=phase,
                          watcher=activations.capture)  # fmt: skip
        return logits, activations

    def add_hook(self, name, fn) -> HookHandle:
        """Call fn(tensor, name) on each stage that `name` matches (a name, glob, list or predicate),
        in every forward pass (run, logits, generate, run_with_cache) until `.remove()` on the handle.

        fn returns None to leave the tensor alone, or an array of the same shape that replaces it.
        """
        return self.hooks.add(name, fn)

    def remove_hooks(self) -> None:
        """Remove every hook (and breakpoint) of this model."""
        self.hooks.clear()

    def break_at(self, name) -> HookHandle:
        """Open pdb when the forward pass reaches `name` (a name or glob), with `tensor`, `name` and
        `record` (its ledger entry) in scope; `c` continues. `.remove()` on the handle disarms it."""
        return self.hooks.add(name, breakpoint_hook, with_record=True)

    def logits(self, token_ids) -> np.ndarray:
        """float32 logits [T, vocab] (or [B, T, vocab]) at every position, computed without a cache."""
        return self.run(token_ids, all_positions=True)

    def generate(self, prompt, **options):
        """Continue `prompt` (a string or a list of token ids); see generate.generate for the options."""
        from .generate import generate

        return generate(self, prompt, **options)


def load_model(name_or_dir: str | Path | None = None) -> Model:
    """A GPT-2 by name ("gpt2", "gpt2-medium", ...) or from a Hugging Face-format directory."""
    from .registry import resolve

    return resolve(name_or_dir)
