"""A family is its difference: a made-up third family, registered in the one table, runs, counts and reports
through the same engine, count, trace and views as GPT-2 and the Llama family, none of which is told about it.

"toy" is a Llama block whose layers alternate a sliding window (even layers) and full attention (odd layers),
as Gemma's and gpt-oss's do: its layers differ, so count must group them rather than take one for all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import numpy as np
import pytest

from minitransformer import UserError
from minitransformer.engine.ops import attention_bias, rms_norm, rotary_tables, slot_positions
from minitransformer.engine.shapes import ShapeOnly
from minitransformer.families.architecture import Architecture
from minitransformer.families.llama import formulas as llama_formulas
from minitransformer.families.llama import layout as llama_layout
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.llama.forward import decoder_block, inverse_frequencies
from minitransformer.families.llama.stages import llama_family
from minitransformer.families.table import ARCHITECTURES, architecture_of, config_from_hf_dict, register, unregister
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes
from minitransformer.views.count_report import count_report
from minitransformer.views.html_report import count_data, generation_data
from minitransformer.views.report import ledger_report

WINDOW = 5


@dataclass(frozen=True)
class ToyConfig(LlamaConfig):
    """The Llama config, its even layers windowed and its odd ones not."""

    family = "toy"
    model_type: str = "toy"

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(self.n_layer))

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if layer % 2 == 0 else None


def toy_forward(ids, p, config: ToyConfig, cache, tape, all_positions: bool, pads=None):
    """llama.forward, with the mask of each layer's own window."""
    d = tape.dims
    x = tape.stage("embed", p.embed_tokens.weight[ids], "T D")
    shape_only = isinstance(x, ShapeOnly)
    if shape_only:
        cos = sin = ShapeOnly((d.T, d.dh))
    else:
        at = slot_positions(d.past, d.T, pads)
        cos, sin = rotary_tables(at if pads is None else at[:, None], inverse_frequencies(config, x.dtype))
    for i, block in enumerate(p.layers):
        layer = tape.layer(i)  # its dims carry its window
        e = layer.dims
        bias = None if shape_only else attention_bias(e.past, e.start, e.T, e.t, e.window, x.dtype, pads)
        x = decoder_block(x, block, config, layer, cache.layer(i) if cache is not None else None, bias, (cos, sin))
    h = tape.stage("ln_f", rms_norm(x, p.norm.weight, config.rms_norm_eps), "T D")
    if not all_positions:
        h = tape.stage("last", h[..., -1:, :], "R D")
    if cache is not None:
        cache.advance(d.T)
    return tape.matmul("logits", h, p.lm_head.weight.T, "R D, D V -> R V")


TOY = Architecture(
    name="toy", model_types=("toy",), config=ToyConfig, presets={"toy-tiny": None}, forward=toy_forward,
    stages=lambda config: llama_family(window=True), every_stage=llama_family(window=True),
    weight_shapes=llama_layout.llama_shapes, prefix=llama_layout.PREFIX, layers=llama_layout.LAYERS,
    embedding=llama_layout.EMBEDDING, ignored=llama_layout.IGNORED, kinds=llama_layout.KINDS,
    kind_of=llama_layout.KIND_OF, formulas=llama_formulas, reference_classes={}, label="made-up family",
)  # fmt: skip


def toy_config(n_layer: int = 4, **options) -> ToyConfig:
    return ToyConfig(n_layer=n_layer, n_head=4, n_kv_head=2, n_embd=16, n_inner=24, vocab_size=97, n_positions=200,
                     sliding_window=WINDOW, name="toy-tiny", **options)  # fmt: skip


@pytest.fixture
def toy():
    register(replace(TOY, presets={"toy-tiny": toy_config()}))
    yield
    unregister("toy")


def random_model(config, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return Model(config, as_tree(tensors, config), source="memory")


def test_the_table_refuses_what_it_does_not_know():
    assert "toy" not in ARCHITECTURES
    families = ", ".join(ARCHITECTURES)  # gpt2, llama, ...: every family the table holds, in its order
    assert families.startswith("gpt2, llama")
    with pytest.raises(UserError, match=rf"no family 'toy' in the table \(families: {families}\)$"):
        architecture_of(toy_config())
    supported = ", ".join(t for a in ARCHITECTURES.values() for t in a.model_types)
    assert supported.startswith("gpt2, llama, mistral, qwen2")
    with pytest.raises(UserError, match=rf"model_type='toy' is not supported \(supported: {supported}\)$"):
        config_from_hf_dict({"model_type": "toy", "hidden_size": 16}, "x")
    with pytest.raises(ValueError, match="already in the table"):
        register(replace(TOY, name="llama2", model_types=("llama",)))


def test_a_registered_family_runs_with_each_layer_its_own_window(toy):
    config = toy_config()
    model = random_model(config)
    assert model.architecture.name == "toy" and model.family.name == "llama"
    ids = np.random.default_rng(1).integers(0, 97, 150)  # past the row chunk (128) and far past the window
    logits = model.logits(ids)
    # The same weights as a Llama whose every layer has the window, or none has: both differ from the toy.
    for window in (WINDOW, None):
        uniform = LlamaConfig(**{k: getattr(config, k) for k in LlamaConfig.__dataclass_fields__ if k != "model_type"}
                              | {"sliding_window": window})  # fmt: skip
        other = Model(uniform, model.params, source="memory").logits(ids)
        assert np.abs(other[WINDOW + 2 :] - logits[WINDOW + 2 :]).max() > 1e-3
        assert np.abs(other[:WINDOW] - logits[:WINDOW]).max() < 1e-5  # within the window all three agree
    # A watched pass runs attention dense; unwatched, in row chunks; cached, one row at a time: the same logits, up to
    # float32's rounding in another order of sums (a few units in the last place of the largest logit, which the
    # BLAS's kernel for this CPU decides: an AMD EPYC's came to 1.08e-5 on logits up to 5.5).
    tolerance = 1e-5 * np.abs(logits).max()
    watched, _ = model.run_with_cache(ids, names="blocks.1.attn.weights")
    assert np.abs(watched - logits).max() < tolerance
    cache = model.new_cache()
    steps = [model.run(ids[:140], cache=cache, all_positions=True)]
    steps += [model.run(ids[i : i + 1], cache=cache, all_positions=True) for i in range(140, 150)]
    assert np.abs(np.concatenate(steps) - logits).max() < tolerance
    weights = model.run_with_cache(ids[:12], names="blocks.*.attn.weights")[1]
    assert (weights["blocks.0.attn.weights"][:, 11, : 12 - WINDOW] == 0).all()  # a windowed layer: 5 keys
    assert (weights["blocks.1.attn.weights"][:, 11, :] > 0).all()  # a full layer: all 12


def test_count_groups_the_kinds_of_layer_and_equals_a_real_run_and_the_closed_form(toy):
    config = toy_config(n_layer=7)
    counted = count_generation(config, 150, 4)  # it checks the folded prefill and step against the whole model
    prefill = counted.prefill
    assert [n for _, n in prefill.groups] == [4, 3] and prefill.twin.n_layers == 2  # one block of each kind ran
    real = count_passes(random_model(config), 150, 4)
    assert [p.expand().records for p in counted.passes] == [p.records for p in real.phases]
    assert counted.totals.macs == real.totals.macs == formulas.generation_macs(config, 150, 4)
    assert count_generation(config, 150, 4, use_cache=False).totals.macs == formulas.generation_macs(
        config, 150, 4, use_cache=False
    )
    # The scores of a windowed layer see at most the window, a full layer's every position.
    windowed, full = (next(r for r in records if r.op == "scores") for records, _ in counted.decodes[-1].groups)
    assert windowed.out_shape[-1] == WINDOW and full.out_shape[-1] == 153
    assert windowed.window == WINDOW and full.window is None


def test_the_reports_show_a_made_up_family(toy):
    config = toy_config(n_layer=6)
    counted = count_generation(config, 20, 3)
    text = count_report(counted, 10.0)
    assert "the 6 blocks are of 2 kinds: sliding_attention, full_attention" in text
    assert "sliding_attention (3)" in text and "each of layers 1, 3, 5" in text
    assert "toy (made-up family)" in text
    page = count_data(counted)
    assert page["document"]["model"]["family"] == "toy"
    model = random_model(config)
    out = model.generate(list(range(1, 9)), max_new_tokens=3, stop_at_eos=False)
    assert "Where the dot products live" in ledger_report(out.ledger)
    data = generation_data(out)
    json.dumps(data)  # the page's data is plain JSON
    assert data["document"]["totals"]["macs"] == out.ledger.totals.macs


def test_validate_refuses_a_family_newer_than_the_transformers_installed(toy):
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from minitransformer.verbs.validate import load_reference

    unregister("toy")
    register(replace(TOY, presets={}, reference_classes={"toy": "ToyForCausalLM"}))
    message = f"transformers {transformers.__version__} has no ToyForCausalLM, which validate compares with; upgrade"
    with pytest.raises(UserError, match=message):
        load_reference(random_model(toy_config()))
