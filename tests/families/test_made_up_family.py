"""A family is its difference: a made-up third family, registered in the one table, runs, counts and reports
through the same engine, count, trace and views as GPT-2 and the Llama family, none of which is told about it.

"toy" is the Llama family's parts with an attention core of its own: grouped-query attention whose scores are
soft-capped (c tanh(S / c), as Gemma 2's) after their scale where the config sets a cap, in the pre-norm block of the
decoder, composed into the family's record as Llama's is. Its config makes its layers alternate a sliding window (even
layers) and full attention (odd layers), as Gemma's and gpt-oss's do, so count must group them rather than take one
for all. Its stage table, layout and closed forms are derived from its parts: the soft-cap is in a config's table only
where its dry run meets it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace

import numpy as np
import pytest

from minitransformer import UserError
from minitransformer.engine.ops import add_mask, group_heads, softmax, ungroup_heads
from minitransformer.engine.stages import ATTENTION_PROJECTIONS, Stage, by_op
from minitransformer.engine.tape import Tape
from minitransformer.families.gemma.family import softcap
from minitransformer.families.llama.config import LlamaConfig
from minitransformer.families.llama.family import SYMBOLS
from minitransformer.families.parts.attention import GroupedQueryAttention, core_stages, mask_equation, scale_scores
from minitransformer.families.parts.blocks import ByKind, PreNorm, Residual
from minitransformer.families.parts.decoder import Decoder
from minitransformer.families.parts.family import composed
from minitransformer.families.parts.mlps import GatedMLP
from minitransformer.families.table import ARCHITECTURES, architecture_of, config_from_hf_dict, register, unregister
from minitransformer.models.model import Model
from minitransformer.models.weights import as_tree, expected_shapes
from minitransformer.verbs import formulas
from minitransformer.verbs.count import count_generation, count_passes, sweep_per_token
from minitransformer.views.colours import PRODUCT_COLOURS
from minitransformer.views.count_report import count_report
from minitransformer.views.html_report import count_data, generation_data, page
from minitransformer.views.plots import plots_png
from minitransformer.views.report import ledger_report

WINDOW = 5
LLAMA_FIELDS = [f.name for f in fields(LlamaConfig) if f.name != "model_type"]  # a Llama's of the same numbers


# Its config: the Llama config, its even layers windowed and its odd ones not, and the scores' cap.
@dataclass(frozen=True)
class ToyConfig(LlamaConfig):
    """The Llama config, its even layers windowed and its odd ones not, its scores soft-capped at `cap`."""

    cap: float | None = None
    model_type: str = "toy"

    family = "toy"
    classes = {"toy": "ToyForCausalLM"}  # which no transformers has

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple("sliding_attention" if i % 2 == 0 else "full_attention" for i in range(self.n_layer))

    def layer_window(self, layer: int) -> int | None:
        return self.sliding_window if layer % 2 == 0 else None


# Its attention core: the Llama family's, whose scores are soft-capped after their scale where the config sets a cap.
SOFTCAP = by_op(Stage("softcap", ("attn.softcapped",), "softcap", "S = c tanh(S / c)", "S [H, T, t]"))


def capped(q, K, V, bias, config: ToyConfig, at: Tape):
    at = at.declaring(core_stages(mask_equation(config)) | SOFTCAP)
    Hkv = config.n_kv_head
    s = at.matmul(
        "scores", group_heads(q, Hkv), K.swapaxes(-1, -2)[..., None, :, :], "Hkv G T dh, Hkv 1 dh t -> Hkv G T t"
    )
    s = at.stage("scale", scale_scores(ungroup_heads(s), config, at), "H T t")
    if config.cap is not None:
        s = at.stage("softcap", softcap(s, config.cap), "H T t")
    s = at.stage("mask", add_mask(s, bias, out=at.scratch(s)), "H T t")
    a = at.stage("softmax", softmax(s, out=at.scratch(s)), "H T t")
    return at.matmul("mix", group_heads(a, Hkv), V[..., None, :, :], "Hkv G T t, Hkv 1 t dh -> Hkv G T dh")


def toy_config(n_layer: int = 4, **options) -> ToyConfig:
    return ToyConfig(n_layer=n_layer, n_head=4, n_kv_head=2, n_embd=16, n_inner=24, vocab_size=97, n_positions=200,
                     sliding_window=WINDOW, name="toy-tiny", **options)  # fmt: skip


TOY_DECODER = Decoder(PreNorm(GroupedQueryAttention(core=capped), GatedMLP()), symbols=SYMBOLS)
TOY = composed(
    "toy", TOY_DECODER, model_types=("toy",), config=ToyConfig, presets={"toy-tiny": toy_config()},
    label="made-up family", variants=(toy_config(cap=2.0),),  # the family's table: the cap's too
)  # fmt: skip


@pytest.fixture
def toy():
    register(TOY)
    yield
    unregister("toy")


def random_tensors(config, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tensors = {name: (rng.standard_normal(shape) * 0.3).astype(np.float32)
               for name, shape in expected_shapes(config).items()}  # fmt: skip
    for name in tensors:
        if name.endswith("norm.weight"):
            tensors[name] += 1
    return tensors


def random_model(config, seed: int = 0) -> Model:
    return Model(config, as_tree(random_tensors(config, seed), config), source="memory")


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
    assert model.architecture.name == "toy" and model.stage_table.name == "toy"
    ids = np.random.default_rng(1).integers(0, 97, 150)  # past the row chunk (128) and far past the window
    logits = model.logits(ids)
    rounding = 1e-5 * max(1.0, float(np.abs(logits).max()))  # float32's, between passes that sum in other orders
    # The same weights as a Llama whose every layer has the window, or none has: both differ from the toy.
    for window in (WINDOW, None):
        uniform = LlamaConfig(**{k: getattr(config, k) for k in LLAMA_FIELDS}
                              | {"sliding_window": window})  # fmt: skip
        other = Model(uniform, model.params, source="memory").logits(ids)
        assert np.abs(other[WINDOW + 2 :] - logits[WINDOW + 2 :]).max() > 1e-3
        assert np.abs(other[:WINDOW] - logits[:WINDOW]).max() < rounding  # within the window all three agree
    # A watched pass runs attention dense; unwatched, in row chunks; cached, one row at a time: the same logits, up to
    # float32's rounding in another order of sums (a few units in the last place of the largest logit, which the
    # BLAS's kernel for this CPU decides: an AMD EPYC's came to 1.08e-5 on logits up to 5.5).
    watched, _ = model.run_with_cache(ids, names="blocks.1.attn.weights")
    assert np.abs(watched - logits).max() < rounding
    cache = model.new_cache()
    steps = [model.run(ids[:140], cache=cache, all_positions=True)]
    steps += [model.run(ids[i : i + 1], cache=cache, all_positions=True) for i in range(140, 150)]
    assert np.abs(np.concatenate(steps) - logits).max() < rounding
    weights = model.run_with_cache(ids[:12], names="blocks.*.attn.weights")[1]
    assert (weights["blocks.0.attn.weights"][:, 11, : 12 - WINDOW] == 0).all()  # a windowed layer: 5 keys
    assert (weights["blocks.1.attn.weights"][:, 11, :] > 0).all()  # a full layer: all 12


def test_its_attention_is_its_own_and_the_rest_is_the_llama_familys(toy):
    """The cap takes effect where the config sets one (a stage of its own, scores within (-c, c)), changes no product
    and no parameter: count = a real run = the Llama family's closed forms, params = Llama's count."""
    plain, capped_config = toy_config(), toy_config(cap=2.0)
    model = random_model(plain)
    capped_model = Model(capped_config, model.params, source="memory")
    assert "softcap" not in model.stage_table.stages and "softcap" in capped_model.stage_table.stages
    ids = np.random.default_rng(2).integers(0, 97, 40)
    logits, seen = capped_model.run_with_cache(ids, names="blocks.*.attn.softcapped")
    assert np.abs(logits - model.logits(ids)).max() > 1e-3
    assert all(np.abs(scores).max() < 2.0 for scores in seen.values()) and len(seen) == capped_config.n_layer
    real = count_passes(capped_model, 40, 3)
    assert real.totals.macs == count_generation(capped_config, 40, 3).totals.macs
    assert real.totals.macs == formulas.generation_macs(capped_config, 40, 3)
    llama = LlamaConfig(**{k: getattr(plain, k) for k in LLAMA_FIELDS})
    assert (
        formulas.parameters(capped_config)
        == formulas.parameters(llama)
        == sum(int(np.prod(shape)) for shape in expected_shapes(capped_config).values())
    )


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


def test_its_products_are_drawn_by_their_kind_without_a_line_of_view_code(toy):
    """The views colour a product by its stage's kind of product (Stage.product), which a product of a group of its
    own must state: the made-up family's plot and page draw each of its products in its kind's colour."""
    with pytest.raises(ValueError, match="needs its kind of product"):
        Stage("toy.proj", ("toy.proj",), "matmul", "y = h W", "h [T, D], W [D, D]", "toy projections")
    conv = Stage("toy.proj", ("toy.proj",), "matmul", "y = h W", "h [T, D]", "toy projections", product="conv")
    query = Stage("q", ("attn.q",), "matmul", "q = h W_q", "h [T, D]", ATTENTION_PROJECTIONS)
    assert (conv.product, query.product) == ("conv", "projection")  # a group every transformer has gives its kind
    config = toy_config(n_layer=2)
    counted = count_generation(config, 20, 2)
    html = page(count_data(counted))
    for stage in TOY.all_stages().stages.values():
        if stage.kind == "matmul":
            assert f'<span class="swatch" style="background:{PRODUCT_COLOURS[stage.product]}"></span>{stage.op}' in html
    pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")
    assert plots_png(counted, sweep_per_token(config, points=3))[:8] == b"\x89PNG\r\n\x1a\n"


def test_validate_refuses_a_family_newer_than_the_transformers_installed(toy):
    pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from minitransformer.verbs.validate import load_reference

    unregister("toy")
    register(replace(TOY, presets={}))
    message = f"transformers {transformers.__version__} has no ToyForCausalLM, which validate compares with; upgrade"
    with pytest.raises(UserError, match=message):
        load_reference(random_model(toy_config()))


# A layer that is one branch, x + part(norm(x)) (parts' Residual), as each of Nemotron-H's layers is one of Mamba-2,
# attention, MLP or mixture of experts: here the Llama block taken apart into an attention layer and an MLP layer,
# each kind its block (parts' ByKind), its checkpoint's layers.{i}.norm and layers.{i}.mixer.
@dataclass(frozen=True)
class SplitConfig(LlamaConfig):
    """The Llama config of twice its layers, even ones attention, odd ones the MLP."""

    model_type: str = "split"

    family = "split"
    classes = {"split": "SplitForCausalLM"}  # which no transformers has

    @property
    def layer_types(self) -> tuple[str, ...]:
        return tuple("attention" if i % 2 == 0 else "mlp" for i in range(self.n_layer))


SPLIT_BLOCK = ByKind({"attention": Residual(GroupedQueryAttention()), "mlp": Residual(GatedMLP(), takes_inputs=False)})
SPLIT = composed("split", Decoder(SPLIT_BLOCK, symbols=SYMBOLS), model_types=("split",), config=SplitConfig,
                 presets={})  # fmt: skip


def test_a_layer_may_be_one_branch_with_its_own_norm_and_residual():
    """Layers of one branch each, attention then the MLP, compute what Llama blocks compute: the same logits bit for
    bit, with the KV cache too, and the same products in the ledger, each in its layer."""
    sizes = dict(n_head=4, n_kv_head=2, n_embd=16, n_inner=24, vocab_size=97, n_positions=200)
    llama_config = LlamaConfig(n_layer=3, **sizes)
    tensors = random_tensors(llama_config)
    halves = {"input_layernorm": (0, "norm"), "self_attn": (0, "mixer"), "post_attention_layernorm": (1, "norm"),
              "mlp": (1, "mixer")}  # fmt: skip
    split_tensors = {}
    for name, value in tensors.items():
        parts = name.split(".")
        if parts[0] == "layers":  # layer i's first norm and attention make layer 2i, its second norm and MLP 2i + 1
            second, part = halves[parts[2]]
            name = ".".join(("layers", str(2 * int(parts[1]) + second), part, *parts[3:]))
        split_tensors[name] = value
    llama = Model(llama_config, as_tree(tensors, llama_config), source="memory")
    register(SPLIT)
    try:
        split_config = SplitConfig(n_layer=6, **sizes)
        split = Model(split_config, as_tree(split_tensors, split_config), source="memory")
        ids = np.random.default_rng(3).integers(0, 97, 140)  # past the row chunk (128)
        assert np.array_equal(split.logits(ids), llama.logits(ids))
        steps = {}
        for model in (llama, split):
            cache = model.new_cache()
            steps[model] = [model.run(ids[:20], cache=cache)] + [model.run(ids[i : i + 1], cache=cache)
                                                                 for i in range(20, 30)]  # fmt: skip
        assert all(np.array_equal(a, b) for a, b in zip(steps[llama], steps[split]))
        ours, theirs = count_passes(split, 20, 3), count_passes(llama, 20, 3)
        assert ours.totals.macs == theirs.totals.macs and ours.totals.dot_products == theirs.totals.dot_products
        layer_ops = [{r.op for r in ours.phases[0].records if r.layer == i and r.dot_products} for i in (0, 1)]
        assert layer_ops == [{"q", "k", "v", "scores", "mix", "out"}, {"mlp.gate", "mlp.up", "mlp.down"}]
    finally:
        unregister("split")
