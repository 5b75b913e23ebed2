"""run_with_cache, hooks and breakpoints: every named tensor can be read or replaced, and off costs nothing."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import ROOT, write_gpt2
from minitransformer import UserError, load_model
from minitransformer.engine.hooks import stage_names
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY

GPT2 = GPT2_FAMILY.stage_table(GPT2Config())  # GPT-2's stages: every GPT-2 has the same
BLOCK = GPT2.block

IDS = np.array([464, 3139, 286, 4881, 318])  # "The capital of France is"


@pytest.fixture(autouse=True)
def no_hooks_left_behind(small_gpt2):
    """small_gpt2 is shared by the whole session: a failing test must not leave a hook on it."""
    yield
    small_gpt2.remove_hooks()


def test_run_with_cache_holds_every_named_stage_in_order_with_per_example_shapes(small_gpt2):
    logits, cache = small_gpt2.run_with_cache(IDS)
    assert np.array_equal(logits, small_gpt2.logits(IDS))
    assert list(cache) == [n for n in stage_names(2, GPT2) if n != "last"]  # `last` exists in generation passes only
    assert len(cache) == 1 + 2 * sum(len(s.names) for s in BLOCK) + 2
    T, D, H, dh, F, V = 5, 16, 2, 8, 64, 50257
    expected = {
        "embed": (T, D), "blocks.0.ln_1": (T, D), "blocks.0.attn.qkv": (T, 3 * D),
        "blocks.0.attn.q": (H, T, dh), "blocks.0.attn.k": (H, T, dh), "blocks.0.attn.v": (H, T, dh),
        "blocks.0.attn.keys": (H, T, dh), "blocks.0.attn.values": (H, T, dh), "blocks.0.attn.qk": (H, T, T),
        "blocks.0.attn.scaled": (H, T, T), "blocks.0.attn.scores": (H, T, T), "blocks.1.attn.weights": (H, T, T),
        "blocks.1.attn.mix": (H, T, dh), "blocks.1.attn.z": (T, D), "blocks.1.attn.out": (T, D),
        "blocks.1.resid_mid": (T, D), "blocks.1.ln_2": (T, D), "blocks.1.mlp.up": (T, F), "blocks.1.mlp.act": (T, F),
        "blocks.1.mlp.down": (T, D), "blocks.1.resid_post": (T, D), "ln_f": (T, D), "logits": (T, V),
    }  # fmt: skip
    assert {name: cache[name].shape for name in expected} == expected
    assert all(cache[name].dtype == np.float32 for name in cache)
    # The values are what the equations say they are:
    weights, scores = cache["blocks.0.attn.weights"], cache["blocks.0.attn.scores"]
    assert np.allclose(weights.sum(-1), 1, atol=1e-6) and np.all(np.triu(weights[0], k=1) == 0)
    assert np.isneginf(scores[0, 0, 1]) and np.allclose(
        cache["blocks.0.attn.scaled"], cache["blocks.0.attn.qk"] / np.sqrt(dh)
    )
    assert np.array_equal(cache["blocks.0.resid_mid"], cache["embed"] + cache["blocks.0.attn.out"])
    assert np.array_equal(cache["blocks.0.attn.q"][1], cache["blocks.0.attn.qkv"][:, dh : 2 * dh])
    assert "ActivationCache(small-gpt2: 43 tensors" in repr(
        cache
    ) and "blocks.0.attn.weights  [2, 5, 5] float32" in repr(cache)


def test_names_filter_by_list_glob_and_predicate(small_gpt2):
    _, by_glob = small_gpt2.run_with_cache(IDS, names="blocks.*.attn.weights")
    assert list(by_glob) == ["blocks.0.attn.weights", "blocks.1.attn.weights"]
    _, by_list = small_gpt2.run_with_cache(IDS, names=["embed", "blocks.1.mlp.*", "logits"])
    assert list(by_list) == ["embed", "blocks.1.mlp.up", "blocks.1.mlp.act", "blocks.1.mlp.down", "logits"]
    _, by_predicate = small_gpt2.run_with_cache(IDS, names=lambda name: name.endswith((".q", ".k")))
    assert list(by_predicate) == ["blocks.0.attn.q", "blocks.0.attn.k", "blocks.1.attn.q", "blocks.1.attn.k"]
    _, one = small_gpt2.run_with_cache(IDS, names="ln_f")
    assert list(one) == ["ln_f"]
    _, everything = small_gpt2.run_with_cache(IDS)
    assert np.array_equal(by_glob["blocks.1.attn.weights"], everything["blocks.1.attn.weights"])

    with pytest.raises(KeyError, match="outside the names= filter"):
        one["embed"]
    with pytest.raises(KeyError, match="all_positions=False"):
        everything["last"]
    with pytest.raises(
        UserError, match="no stage is named 'blocks.0.attn.pattern'; did you mean blocks.0.attn.weights"
    ):
        small_gpt2.run_with_cache(IDS, names="blocks.0.attn.pattern")
    with pytest.raises(UserError, match=r"\(model.stage_names lists them all\)$"):  # a list that exists
        small_gpt2.add_hook("blocks.0.attn.nothing", lambda x, name: None)
    with pytest.raises(UserError, match="blocks.7.attn.q"):  # a 2-layer model has no block 7
        small_gpt2.run_with_cache(IDS, names=["embed", "blocks.7.attn.q"])


def test_a_generation_step_and_a_decode_step_capture_their_own_shapes(small_gpt2):
    kv = small_gpt2.new_cache()
    logits, prefill = small_gpt2.run_with_cache(IDS, all_positions=False, kv_cache=kv)
    assert logits.shape == (1, 50257) and prefill["last"].shape == (1, 16)
    assert np.array_equal(prefill["last"], prefill["ln_f"][-1:])
    _, decode = small_gpt2.run_with_cache([13], all_positions=False, kv_cache=kv)
    assert decode["blocks.0.attn.q"].shape == (2, 1, 8)
    assert decode["blocks.0.attn.keys"].shape == (2, 6, 8)
    assert decode["blocks.0.attn.weights"].shape == (2, 1, 6)
    assert np.array_equal(decode["blocks.1.attn.keys"][:, :5], prefill["blocks.1.attn.keys"])
    full = small_gpt2.logits(np.append(IDS, 13))
    assert np.abs(decode["logits"][0] - full[-1]).max() <= 1e-5
    _, batch = small_gpt2.run_with_cache(np.stack([IDS, IDS]), names="blocks.0.attn.weights")
    assert batch["blocks.0.attn.weights"].shape == (2, 2, 5, 5)  # a batch of ids puts B in front


def test_hooks_read_every_pass_of_run_logits_generate_and_run_with_cache(small_gpt2):
    seen = []
    handle = small_gpt2.add_hook("blocks.*.attn.weights", lambda tensor, name: seen.append((name, tensor.shape)))
    try:
        small_gpt2.run(IDS)
        small_gpt2.logits(IDS)
        small_gpt2.run_with_cache(IDS, names="embed")
        small_gpt2.generate(IDS.tolist(), max_new_tokens=3, stop_at_eos=False)  # prefill + 2 decode steps
    finally:
        handle.remove()
    per_pass = [("blocks.0.attn.weights",), ("blocks.1.attn.weights",)]
    assert [name for name, _ in seen] == [n for _ in range(6) for (n,) in per_pass]
    assert [shape for _, shape in seen[-6:]] == [(2, 5, 5)] * 2 + [(2, 1, 6)] * 2 + [(2, 1, 7)] * 2
    small_gpt2.run(IDS)
    assert len(seen) == 12  # removed: called no more


def test_replacing_the_attention_output_is_the_same_as_zeroing_its_weights(small_gpt2, small_gpt2_dir, tmp_path):
    tensors = load_file(str(small_gpt2_dir / "model.safetensors"))
    for key in ("transformer.h.0.attn.c_proj.weight", "transformer.h.0.attn.c_proj.bias"):
        tensors[key] = np.zeros_like(tensors[key])
    (tmp_path / "config.json").write_text((small_gpt2_dir / "config.json").read_text())
    save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
    without_attention_0 = load_model(tmp_path)

    original = small_gpt2.logits(IDS)
    handle = small_gpt2.add_hook("blocks.0.attn.out", lambda tensor, name: np.zeros_like(tensor))
    try:
        hooked = small_gpt2.logits(IDS)
        _, cache = small_gpt2.run_with_cache(IDS, names=["blocks.0.attn.out", "blocks.0.resid_mid", "embed"])
        generated = small_gpt2.generate(IDS.tolist(), max_new_tokens=4, stop_at_eos=False).new_tokens
    finally:
        handle.remove()
    assert np.array_equal(hooked, without_attention_0.logits(IDS))
    assert np.abs(hooked - original).max() > 0.01  # the experiment changed something
    assert not cache["blocks.0.attn.out"].any() and np.array_equal(cache["blocks.0.resid_mid"], cache["embed"])
    assert generated == without_attention_0.generate(IDS.tolist(), max_new_tokens=4, stop_at_eos=False).new_tokens
    assert np.array_equal(small_gpt2.logits(IDS), original)  # removal restores the exact logits


def test_hooks_chain_in_order_and_come_off_by_handle_or_all_at_once(small_gpt2):
    original = small_gpt2.logits(IDS)
    calls = []
    first = small_gpt2.add_hook("ln_f", lambda t, n: calls.append("double") or t * np.float32(2))
    second = small_gpt2.add_hook(["ln_f"], lambda t, n: calls.append("sees doubled") or None)
    assert repr(first).endswith("active)") and len(small_gpt2.hooks) == 2
    doubled = small_gpt2.logits(IDS)
    assert calls == ["double", "sees doubled"]
    # ln_f feeds the logits linearly (tied unembedding, no bias): doubling it doubles them.
    assert np.allclose(doubled, 2 * original, rtol=1e-5, atol=1e-6) and doubled.dtype == np.float32
    first.remove()
    first.remove()  # harmless
    assert repr(first).endswith("removed)")
    assert np.array_equal(small_gpt2.logits(IDS), original)
    with small_gpt2.add_hook(lambda name: name.startswith("blocks.1.mlp."), lambda t, n: np.zeros_like(t)):
        assert not np.array_equal(small_gpt2.logits(IDS), original)
    small_gpt2.add_hook("embed", lambda t, n: t + 1)
    small_gpt2.remove_hooks()
    assert len(small_gpt2.hooks) == 0 and np.array_equal(small_gpt2.logits(IDS), original)
    second.remove()  # already gone with remove_hooks: harmless


def test_bad_hooks_are_refused_with_a_reason(small_gpt2):
    with pytest.raises(UserError, match="did you mean blocks.0.attn.weights"):
        small_gpt2.add_hook("blocks.0.attn.pattern", print)
    with pytest.raises(
        UserError, match="TransformerLens's name 'blocks.0.attn.hook_patern'; did you mean blocks.0.attn.hook_pattern"
    ):
        small_gpt2.add_hook("blocks.0.attn.hook_patern", print)
    with pytest.raises(UserError, match="fn\\(tensor, name\\)"):
        small_gpt2.add_hook("embed", "not a function")
    for which in (5, None, ["embed", 5]):  # names are text: a number or None is no stage's
        with pytest.raises(UserError, match="hook names must be a name, a glob, a list of them or a predicate"):
            small_gpt2.add_hook(which, print)
        with pytest.raises(UserError, match="names= must be a name, a glob, a list of them or a predicate"):
            small_gpt2.run_with_cache(IDS, names=which if which is not None else 5)
    assert len(small_gpt2.hooks) == 0
    small_gpt2.add_hook("blocks.0.attn.qkv", lambda t, n: t[:, :4])
    try:
        with pytest.raises(UserError, match=r"returned shape \[5, 4\] for blocks.0.attn.qkv, which is \[5, 48\]"):
            small_gpt2.logits(IDS)
    finally:
        small_gpt2.remove_hooks()
    # numbers the pass cannot continue with: objects became NaN logits, a complex array lost its imaginary part
    for given, says in ((lambda t, n: np.full(t.shape, None), "an array of object"), (lambda t, n: (t, n), "a tuple"),
                        (lambda t, n: np.full(t.shape, "a"), "an array of <U1"),
                        (lambda t, n: t.astype(np.complex64), "an array of complex64")):  # fmt: skip
        with small_gpt2.add_hook("blocks.0.attn.out", given), pytest.raises(UserError, match=f"returned {says} for"):
            small_gpt2.logits(IDS)
        lens_name = "blocks.0.hook_attn_out"  # TransformerLens's name of it: the same refusal (a NumPy ValueError)
        with small_gpt2.add_hook(lens_name, given), pytest.raises(UserError, match=f"returned {says} for {lens_name}"):
            small_gpt2.logits(IDS)
    # one hook under both names: our name's result is checked before TransformerLens's name reads it (a reshape error)
    cut = lambda t, name: t[..., :-1] if name == "blocks.0.attn.z" else None  # noqa: E731
    with (
        small_gpt2.add_hook(["blocks.0.attn.z", "blocks.0.attn.hook_z"], cut),
        pytest.raises(UserError, match="for blocks.0.attn.z, which is"),
    ):
        small_gpt2.logits(IDS)


def test_every_switch_of_the_api_is_true_or_false(small_gpt2):
    """ "no" was read as on: run and run_with_cache gave every position's logits, the lens read every position, patch
    swept the heads (review). Each switch now refuses what is not True or False, by its name."""
    from minitransformer import load_model
    from minitransformer.verbs.lens import count_lens, logit_lens
    from minitransformer.verbs.patch import count_patch, patch

    demo = load_model("demo")
    calls = {
        "all_positions": (lambda: small_gpt2.run(IDS, all_positions="no"),
                          lambda: small_gpt2.run_with_cache(IDS, all_positions="no"),
                          lambda: small_gpt2.run_from(1, np.zeros((5, small_gpt2.config.n_embd), np.float32),
                                                      all_positions="no"),
                          lambda: logit_lens(demo, "The capital of France is", " Paris", all_positions="no"),
                          lambda: count_lens(demo.config, 5, all_positions="no")),
        "heads": (lambda: patch(demo, "The capital of France is", "The capital of Germany is", " Paris", " Berlin",
                                heads="no"),
                  lambda: count_patch(demo.config, 5, heads="no")),
    }  # fmt: skip
    from minitransformer.html_report import count_data
    from minitransformer.verbs.count import count_generation

    calls["all_steps"] = (lambda: count_data(count_generation(demo.config, 5, 12), all_steps="no"),)  # the page's
    for option, refused in calls.items():
        for call in refused:
            with pytest.raises(UserError, match=f"{option} must be True or False, not 'no'"):
                call()


def test_a_shape_only_model_s_hook_may_return_a_stand_in():
    """A hook on a model without weights sees shape-only stand-ins; t * 2 is one too, of the same shape, taken as it
    is (np.asarray of it was a TypeError traceback)."""
    from minitransformer.engine.shapes import ShapeOnly
    from minitransformer.families.gpt2.config import GPT2Config
    from minitransformer.models.model import Model

    model = Model.without_weights(GPT2Config(n_layer=2, n_head=2, n_embd=8, vocab_size=50, n_positions=16))
    for name in ("blocks.0.attn.out", "blocks.0.hook_attn_out"):  # ours, and TransformerLens's (review)
        with model.add_hook(name, lambda t, name: t * 2):
            logits = model.logits([1, 2, 3])
        assert isinstance(logits, ShapeOnly) and logits.shape == (3, 50), (name, logits)


def test_with_nothing_asked_the_tape_has_no_watcher(small_gpt2, monkeypatch):
    watchers = []
    forward = small_gpt2.architecture.forward

    def spy(ids, p, config, cache, tape, all_positions, pads=None, choices=None):
        watchers.append(tape.watcher)
        return forward(ids, p, config, cache, tape, all_positions, pads, choices)

    monkeypatch.setattr(small_gpt2, "architecture", replace(small_gpt2.architecture, forward=spy))
    small_gpt2.run(IDS)
    small_gpt2.generate(IDS.tolist(), max_new_tokens=2, stop_at_eos=False, ledger=False)
    assert watchers == [None, None, None]
    handle = small_gpt2.add_hook("embed", lambda t, n: None)
    small_gpt2.run(IDS)
    assert callable(watchers[-1])
    handle.remove()
    small_gpt2.logits(IDS)
    assert watchers[-1] is None
    small_gpt2.run_with_cache(IDS)
    assert callable(watchers[-1])


def test_a_capture_keeps_the_forward_pass_own_arrays_and_nothing_overwrites_them(small_gpt2):
    produced, at_the_time = {}, {}

    def look(tensor, name):
        produced[name] = tensor
        at_the_time[name] = tensor.copy()

    kv = small_gpt2.new_cache()
    with small_gpt2.add_hook("*", look):
        _, prefill = small_gpt2.run_with_cache(IDS, all_positions=False, kv_cache=kv)
        prefill_copies = dict(at_the_time)
        _, step = small_gpt2.run_with_cache([13], all_positions=False, kv_cache=kv)  # writes the KV cache again
        _, other = small_gpt2.run_with_cache(IDS[::-1].copy())
    assert list(prefill) == stage_names(2, GPT2) and len(other) == len(stage_names(2, GPT2)) - 1
    # The cache holds the very arrays the stages made (the last run's are still in `produced`): nothing copied.
    assert all(other[name] is produced[name] for name in other)
    assert np.shares_memory(other["blocks.0.attn.q"], other["blocks.0.attn.qkv"])  # q is a view of qkv, as computed
    # ... and nothing the later passes did (the decode step writes the KV cache) changed what was captured.
    for name, kept in prefill_copies.items():
        assert np.array_equal(prefill[name], kept), name
    assert step["blocks.0.attn.keys"].shape == (2, 6, 8) and np.shares_memory(step["blocks.0.attn.keys"], kv.keys[0])


def test_break_at_opens_pdb_with_the_tensor_its_name_and_record_in_scope(small_gpt2, monkeypatch):
    import pdb

    scopes = []
    monkeypatch.setattr(pdb, "set_trace", lambda: scopes.append(dict(sys._getframe(1).f_locals)))
    handle = small_gpt2.break_at("blocks.*.attn.weights")
    small_gpt2.logits(IDS)
    handle.remove()
    small_gpt2.logits(IDS)
    assert [s["name"] for s in scopes] == ["blocks.0.attn.weights", "blocks.1.attn.weights"]
    assert scopes[0]["tensor"].shape == (2, 5, 5) and scopes[0]["record"].op == "softmax"
    assert scopes[1]["record"].layer == 1


def test_break_at_in_a_real_debugger_session_can_inspect_and_replace(small_gpt2_dir):
    script = (
        "import numpy as np\nfrom minitransformer import load_model\n"
        f"m = load_model({str(small_gpt2_dir)!r})\nids = np.array({IDS.tolist()})\n"
        "m.break_at('blocks.0.attn.out')\nbroken = m.logits(ids)\nm.remove_hooks()\n"
        "m.add_hook('blocks.0.attn.out', lambda t, n: np.zeros_like(t))\n"
        "print('same as zeroing:', np.array_equal(broken, m.logits(ids)))\n"
    )
    commands = "p tensor.shape, name, record.op, record.macs\ntensor = tensor * 0\nc\n"
    done = subprocess.run([sys.executable, "-c", script], input=commands, capture_output=True, text=True, timeout=60,
                          cwd=ROOT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "stopped at blocks.0.attn.out [5, 16]" in done.stdout
    assert "((5, 16), 'blocks.0.attn.out', 'out', 1280)" in done.stdout
    assert "same as zeroing: True" in done.stdout


def test_hooks_belong_to_one_model(small_gpt2_dir, tmp_path):
    a, b = load_model(small_gpt2_dir), load_model(write_gpt2(tmp_path / "other", seed=1))
    a.add_hook("embed", lambda t, n: t * 0)
    assert len(a.hooks) == 1 and len(b.hooks) == 0
    assert np.array_equal(b.logits(IDS), load_model(tmp_path / "other").logits(IDS))


def _first_preset_of_each_family() -> list[str]:
    from minitransformer.families.table import PRESETS

    return list({config.family: name for name, config in reversed(PRESETS.items())}.values())


@pytest.mark.parametrize("preset", _first_preset_of_each_family())
def test_a_shape_only_model_of_every_family_answers_captures_and_hooks(preset):
    """A shape-only model's stages are shapes: captured as such, every one of layer 0's, and a hook reads them. The
    stages a computation makes in pieces (a scan's chunks, lightning attention's blocks) keep no values without
    weights: the whole's shape stands in (Qwen3.5, Qwen3-Next, Kimi Linear and MiniMax-01 ended in an IndexError)."""
    from minitransformer.engine.shapes import ShapeOnly
    from minitransformer.families.table import PRESETS
    from minitransformer.models.model import Model

    model = Model.without_weights(PRESETS[preset])
    names = stage_names(model.config.n_layer, model.stage_table)
    seen = []
    with model.add_hook("blocks.0.*", lambda tensor, name: seen.append(name)):
        logits, cache = model.run_with_cache([1, 2, 3], names="blocks.0.*")
    assert isinstance(logits, ShapeOnly) and logits.shape == (3, model.config.vocab_size), logits
    captured = [name for name in cache.keys() if name.startswith("blocks.0.")]
    assert captured and all(isinstance(cache[name], ShapeOnly) for name in captured), captured
    assert seen == captured, (seen, captured)
    assert set(captured) <= set(names), set(captured) - set(names)


def test_a_lens_name_s_replacement_must_keep_its_shape_not_only_its_size(small_gpt2):
    """hook_z is [batch, pos, head, d_head]: handed back as [batch, head, pos, d_head] it was read back scrambled."""
    z = small_gpt2.run_with_cache(IDS, names="blocks.0.attn.hook_z")[1]["blocks.0.attn.hook_z"]
    with small_gpt2.add_hook("blocks.0.attn.hook_z", lambda tensor, name: tensor.transpose(0, 2, 1, 3)):
        with pytest.raises(
            UserError,
            match=re.escape(
                f"returned shape {list(z.shape[:1] + z.shape[2:3] + z.shape[1:2] + z.shape[3:])} for blocks.0.attn.hook_z, which is {list(z.shape)}"
            ),
        ):
            small_gpt2.logits(IDS)
    with small_gpt2.add_hook("blocks.0.attn.hook_z", lambda tensor, name: tensor * 1):  # the same shape: taken
        assert np.allclose(small_gpt2.logits(IDS), small_gpt2.logits(IDS))


def test_run_from_refuses_a_block_or_a_stream_it_cannot_resume_from(small_gpt2):
    """run_from(-1, s) ran block 3 then 0..3, run_from(99, s) no block at all, both silently."""
    L, D = small_gpt2.config.n_layer, small_gpt2.config.n_embd
    _, cache = small_gpt2.run_with_cache(IDS, names=[f"blocks.{L - 1}.hook_resid_post", "blocks.1.hook_resid_pre"])
    stream = cache["blocks.1.hook_resid_pre"]
    for layer in (-1, L + 1, 1.0, True, "1"):
        with pytest.raises(UserError, match=re.escape(f"layer must be a block number 0..{L} ({L}: the final norm")):
            small_gpt2.run_from(layer, stream)
    for bad, needle in ((stream[0, 0], f"[..., T, {D}]"), (stream[..., :-1], f"ndarray [1, 5, {D - 1}] float32"),
                        (stream.astype(np.float64), "float64"), (stream.tolist(), "not list")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(needle)):
            small_gpt2.run_from(1, bad)
    context = small_gpt2.config.n_positions  # no position (a NumPy error), more than the context (taken): refused
    for positions in (0, context + 1):
        with pytest.raises(
            UserError, match=f"must hold 1 to {context} positions .this model's context., not {positions}"
        ):
            small_gpt2.run_from(1, np.zeros((1, positions, D), np.float32))
    last = small_gpt2.run_from(L, cache[f"blocks.{L - 1}.hook_resid_post"])  # the final norm and the logits alone
    assert np.allclose(last, small_gpt2.logits(IDS)[-1:], atol=1e-5), abs(last - small_gpt2.logits(IDS)[-1:]).max()


def test_a_hybrid_s_names_are_each_block_s_own_and_a_stage_its_layer_lacks_is_refused():
    """Qwen3.5's linear-attention layers compute no attention weights: blocks.0.attn.weights was accepted (the table's
    names were every kind's, in every block), its hook never called and its capture empty, the cache then refusing
    the name it had accepted. Now refused at once; the full-attention layer's and the scan's own names are offered."""
    from minitransformer.families.table import PRESETS
    from minitransformer.models.model import Model

    model = Model.without_weights(PRESETS["qwen3.5-9b"])
    kinds = model.config.layer_types
    linear, full = kinds.index("linear_attention"), kinds.index("full_attention")
    assert (
        f"blocks.{linear}.attn.weights" not in model.stage_names and f"blocks.{full}.attn.weights" in model.stage_names
    )
    assert any(n.startswith(f"blocks.{linear}.linear_attn.") for n in model.stage_names)
    assert not any(n.startswith(f"blocks.{full}.linear_attn.") for n in model.stage_names)
    for ask in (lambda: model.add_hook(f"blocks.{linear}.attn.weights", lambda t, n: None),
                lambda: model.run_with_cache([1, 2, 3], names=f"blocks.{linear}.attn.weights")):  # fmt: skip
        with pytest.raises(UserError, match=f"no stage is named 'blocks.{linear}.attn.weights'"):
            ask()
    seen = []
    with model.add_hook(f"blocks.{full}.attn.weights", lambda tensor, name: seen.append(name)):
        _, cache = model.run_with_cache([1, 2, 3], names="blocks.*.attn.weights")
    fulls = [f"blocks.{i}.attn.weights" for i, kind in enumerate(kinds) if kind == "full_attention"]
    assert seen == [f"blocks.{full}.attn.weights"] and list(cache) == fulls, (seen, list(cache))
    lens = model.lens_aliases
    assert f"blocks.{linear}.attn.hook_pattern" not in lens and f"blocks.{full}.attn.hook_pattern" in lens


def test_a_capture_asked_for_a_key_that_is_no_name_answers_as_a_mapping(small_gpt2):
    """`5 in cache` and cache[5] raised a TypeError from the TransformerLens name check: a Mapping answers False and a
    KeyError."""
    _, cache = small_gpt2.run_with_cache(IDS, names="embed")
    for key in (5, None, ("embed",)):
        print(f"{key!r} in cache: {key in cache}")
        assert key not in cache and cache.get(key) is None
        with pytest.raises(KeyError, match="stage names are str"):
            cache[key]
    assert "embed" in cache


def test_run_and_run_from_refuse_a_phase_watcher_or_choices_that_is_none_of_them(small_gpt2):
    """phase="x" ended in an AttributeError in the first stage, watcher=5 in a TypeError, choices=5 (run_from) in one
    deep in the blocks; a cached pass left its cache marked spoilt."""
    _, cache = small_gpt2.run_with_cache(IDS, names="blocks.1.hook_resid_pre")
    stream = cache["blocks.1.hook_resid_pre"]
    wrong = {"phase": ("x", "phase must be a ledger Phase"), "watcher": (5, "watcher must be a function"),
             "choices": (5, "choices must be a dict")}  # fmt: skip
    for option, (value, says) in wrong.items():
        kv = small_gpt2.new_cache()
        for call, args in ((small_gpt2.run, dict(token_ids=IDS, cache=kv)),
                           (small_gpt2.run_from, dict(layer=1, stream=stream))):  # fmt: skip
            with pytest.raises(UserError) as refused:
                call(**args, **{option: value})
            print(f"{call.__name__}({option}={value!r}): {refused.value}")
            assert says in str(refused.value), str(refused.value)
        assert not kv.spoilt and kv.length == 0
    with pytest.raises(UserError) as refused:
        small_gpt2.run([IDS[:2], IDS[:2]], pads=[[0], [1, 2]])  # ragged: a ValueError from NumPy
    print(refused.value)
    assert "pads must be one whole number >= 0 per row" in str(refused.value)
