"""Multi-token prediction (families/parts/mtp.py) against transformers 5.24's MtpModel, on a tiny random DeepSeek-V3
whose checkpoint keeps its MTP layer as DeepSeek's does (layers.{n_layer}: enorm, hnorm, eh_proj, shared_head.norm and
a decoder layer with experts), and the counting rule "MTP: its passes in their own phase" held by its closed forms.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from family_checks import differ, save_random, worst  # noqa: E402 - after the importorskips: it imports torch
from safetensors.torch import load_file, save_file  # noqa: E402

from minitransformer.engine.kvcache import KeysValues, KVCache, State  # noqa: E402
from minitransformer.engine.ledger import Phase  # noqa: E402
from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.deepseek_v3.config import PRESETS  # noqa: E402
from minitransformer.families.deepseek_v3.family import DECODER  # noqa: E402
from minitransformer.families.glm4_moe.family import DECODER as GLM_DECODER  # noqa: E402
from minitransformer.families.glm4_moe.family import PRESETS as GLM_PRESETS  # noqa: E402
from minitransformer.families.parts.mtp import MultiTokenPrediction  # noqa: E402
from minitransformer.models.registry import load_model  # noqa: E402
from minitransformer.verbs.count import count_generation  # noqa: E402
from minitransformer.verbs.draft import count_drafts, draft_logits, generate_drafted, mtp_of  # noqa: E402

N = 2  # the main model's layers: the first dense, the second with experts; the MTP layer is layers.2
TINY = dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_attention_heads=4,
            num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2,
            first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12,
            v_head_dim=10, max_position_embeddings=256, num_mtp_layers=1, bos_token_id=None, eos_token_id=None,
            pad_token_id=None)  # fmt: skip
# GLM-4.5's: grouped-query attention with biases, q and k norms and half of each head turned, before the same experts
GLM = dict(TINY, num_key_value_heads=2, head_dim=16, partial_rotary_factor=0.5, use_qk_norm=True, attention_bias=True,
           routed_scaling_factor=2.5)  # fmt: skip
for mla in ("q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
    del GLM[mla]


def made_with_mtp(directory, config):
    """(our model, transformers' main model, its MtpModel): transformers' random model of N + 1 layers, whose last
    layer is the MTP layer's block, saved with N layers and the MTP layer's own tensors beside it at layers.N (as
    DeepSeek's and GLM's checkpoints keep it, with a copy of the embedding)."""
    from transformers.modeling_layers import MtpModel

    whole = save_random(directory, config, seed=5)
    generator = torch.Generator().manual_seed(9)
    D = config.hidden_size
    own = {"enorm.weight": 1 + 0.2 * torch.randn(D, generator=generator),
           "hnorm.weight": 1 + 0.2 * torch.randn(D, generator=generator),
           "eh_proj.weight": torch.randn(D, 2 * D, generator=generator) / (2 * D) ** 0.5,
           "shared_head.norm.weight": 1 + 0.2 * torch.randn(D, generator=generator)}  # fmt: skip
    tensors = load_file(directory / "model.safetensors")
    tensors |= {f"model.layers.{N}.{name}": value for name, value in own.items()}
    tensors[f"model.layers.{N}.embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, directory / "model.safetensors", metadata={"format": "pt"}
    )
    hf = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(hf | {"num_hidden_layers": N}))
    main = transformers.AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32,
                                                             attn_implementation="eager").eval()  # fmt: skip
    mtp = MtpModel(main, 1).eval()
    with torch.no_grad():
        mtp.layers[0].mtp_block.load_state_dict(whole.model.layers[N].state_dict())
        for name, value in own.items():
            mtp.layers[0].get_parameter(name.replace("shared_head.norm", "post_norm")).copy_(value)
    return load_model(str(directory)), main, mtp


@pytest.fixture(scope="module")
def with_mtp(tmp_path_factory):
    """A tiny DeepSeek-V3 with its MTP layer (made_with_mtp)."""
    directory = tmp_path_factory.mktemp("deepseek_mtp")
    return made_with_mtp(directory, transformers.DeepseekV3Config(num_hidden_layers=N + 1, **TINY))


@pytest.fixture(scope="module")
def glm_with_mtp(tmp_path_factory):
    """A tiny GLM-4.5 with its MTP layer (made_with_mtp)."""
    directory = tmp_path_factory.mktemp("glm4_moe_mtp")
    return made_with_mtp(directory, transformers.Glm4MoeConfig(num_hidden_layers=N + 1, **GLM))


def transformers_drafts(main, mtp, ids: list[int]):
    """MtpModel's logits at every row: the main model's last hidden state at rows 0..T-2 beside the tokens 1..T-1, at
    positions 1..T-1 (as MTPCandidateGenerator hands them after the prefill), through forward_layer and the head."""
    from transformers.cache_utils import MtpCache

    with torch.no_grad():
        hidden = main(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1]
        positions = torch.arange(1, len(ids))[None]
        cache = MtpCache(config=main.config.get_mtp_config())
        x = mtp.forward_layer(0, hidden[:, :-1], positions, cache, input_ids=torch.tensor([ids[1:]]))
        return mtp._project_to_logits(x)[0]


@pytest.mark.parametrize("family", ["with_mtp", "glm_with_mtp"])
def test_the_draft_s_logits_are_transformers_mtp_model_s_at_every_row(family, request):
    ours, main, mtp = request.getfixturevalue(family)
    ids = [int(i) for i in np.random.default_rng(3).integers(0, TINY["vocab_size"], 40)]
    theirs = transformers_drafts(main, mtp, ids)
    (drafted,) = draft_logits(ours, ids)
    assert worst(drafted, theirs) <= 1, differ(drafted, theirs)
    assert float(theirs.std()) > 0.1, f"the drafts' logits spread (std {float(theirs.std()):.3g}), so they compare"


def test_the_draft_pass_is_its_own_phase_and_its_products_are_the_parts_closed_forms(with_mtp):
    ours, _, _ = with_mtp
    ids = list(range(3, 3 + 17))
    draft, main = Phase("mtp", 0, 16, 16, cached=False), Phase("prefill", 0, 17, 17, cached=False)
    draft_logits(ours, ids, phase=draft, main=main)
    c = ours.config
    assert {r.layer for r in draft.records} == {N}, "the MTP layer's records, numbered as its checkpoint's layer N"
    assert main.n_layers == N and all(r.op != "eh_proj" for r in main.records), "the main pass holds none of them"
    formulas = DECODER.mtp.products(c, 16, 16, R=16)
    ledger = {r.op: (r.dot_products, r.dot_length) for r in draft.records if r.kind == "matmul" and r.op != "mix"}
    expected = {op: counted for op, counted in formulas.items() if op != "mix"}  # the experts' rows: the router's
    assert ledger["eh_proj"] == (16 * 32, 64) == expected["eh_proj"], ledger["eh_proj"]
    assert ledger["logits"] == expected["logits"] == (16 * 120, 32), ledger["logits"]
    routed = ("expert.gate", "expert.up", "expert.down")
    assert {op: ledger[op] for op in ledger if op not in routed} == {
        op: expected[op] for op in expected if op not in routed}, (ledger, expected)  # fmt: skip


def test_count_s_mtp_passes_are_one_beside_each_main_pass_in_closed_form():
    c = PRESETS["deepseek-v3"]
    count = count_generation(c, 50, 3)
    drafts = count_drafts(count)
    assert [(p.phase, p.step, p.tokens, p.context) for p in drafts.passes] == [
        ("mtp", 0, 50, 50), ("mtp", 1, 1, 51), ("mtp", 2, 1, 52)]  # fmt: skip
    for p in drafts.passes:
        closed = sum(n * length for n, length in DECODER.mtp.products(c, p.tokens, p.context).values())
        assert p.macs == closed, (p.step, p.macs, closed)
    # a decode step's draft: eh_proj D 2D, MLA at t = 52 and one layer's experts (8 routed, 1 shared), the head
    D, V = 7168, 129280
    assert drafts.per_drafted_token() == drafts.passes[-1].macs == 1_616_871_424, drafts.per_drafted_token()
    step = DECODER.mtp.products(c, 1, 52)
    assert (step["eh_proj"], step["logits"]) == ((D, 2 * D), (V, D)), (step["eh_proj"], step["logits"])
    assert count.passes[1].macs == 36_752_023_552, "the main decode step, unchanged by the draft beside it"
    batched = count_drafts(count_generation(c, 10, 2, batch=2))  # two rows: a token drafted each
    one_row = sum(n * length for n, length in DECODER.mtp.products(c, 1, 11).values())
    assert batched.per_drafted_token() == one_row, (batched.per_drafted_token(), one_row)
    glm = GLM_PRESETS["glm-4.5"]  # GLM-4.5's MTP layer (layers.92): its grouped-query attention and experts
    for p in count_drafts(count_generation(glm, 20, 2)).passes:
        closed = sum(n * length for n, length in GLM_DECODER.mtp.products(glm, p.tokens, p.context).values())
        assert p.macs == closed, (p.step, p.macs, closed)


def test_count_mtp_prints_the_draft_phase_and_refuses_where_there_is_none():
    out = run_cli("count", "--preset", "deepseek-v3", "--tokens", "50", "--new-tokens", "3", "--mtp", "--json", "-")
    assert "mtp step 2" in out.stderr and "1,616,871,424" in out.stderr, out.stderr  # the report, the JSON on stdout
    mtp = json.loads(out.stdout)["mtp"]
    assert [(p["phase"], p["step"], p["tokens"]) for p in mtp["phases"]] == [
        ("mtp", 0, 50),
        ("mtp", 1, 1),
        ("mtp", 2, 1),
    ]
    assert mtp["per_drafted_token_macs"] == mtp["phases"][-1]["macs"] == 1_616_871_424, mtp["per_drafted_token_macs"]
    assert {layer["layer"] for p in mtp["phases"] for layer in p["layers"]} == {61}, "layer 61, the checkpoint's"
    refused = run_cli("count", "--preset", "qwen3-0.6b", "--mtp")
    assert refused.returncode == 2 and "multi-token prediction" in refused.stderr, refused.stderr
    files = run_cli("count", "--preset", "deepseek-v3", "--mtp", "--csv", "-")
    assert files.returncode == 2 and files.stdout == "" and "--mtp" in files.stderr, files.stderr


def test_a_config_without_mtp_layers_is_refused_by_name():
    with pytest.raises(UserError, match=r"declares 0 \(num_mtp_layers"):
        mtp_of(replace(PRESETS["deepseek-v3"], n_mtp=0))


def test_drafted_generation_gives_exactly_the_main_model_s_greedy_tokens(with_mtp, monkeypatch):
    ours, main, _ = with_mtp
    prompt = [int(i) for i in np.random.default_rng(4).integers(0, TINY["vocab_size"], 12)]
    with torch.no_grad():
        greedy = main.generate(torch.tensor([prompt]), max_new_tokens=30, do_sample=False)[0, 12:].tolist()
    drafted = generate_drafted(ours, prompt, 30)
    assert drafted.tokens == greedy, (drafted.tokens, greedy)
    assert drafted.accepted < drafted.drafted, "a random MTP layer's drafts are mostly rejected"
    # every other draft made right (the true next token moved to the top of the MTP layer's logits), so that the
    # verification keeps some drafts and forgets the others: the tokens must not move, and fewer passes ran
    real, calls = MultiTokenPrediction.__call__, []

    def half_right(self, h, next_ids, layers, p, config, cache, *rest, **kwargs):
        (logits,) = real(self, h, next_ids, layers, p, config, cache, *rest, **kwargs)
        calls.append(len(calls))
        known = cache.length - len(prompt) + 1  # the tokens generated so far: the draft is of greedy[known]
        if len(calls) % 2 and known < len(greedy):
            logits = logits.copy()
            logits[-1, greedy[known]] = logits[-1].max() + 1
        return [logits]

    monkeypatch.setattr(MultiTokenPrediction, "__call__", half_right)
    helped = generate_drafted(ours, prompt, 30)
    assert helped.tokens == greedy, (helped.tokens, greedy)
    assert 0 < helped.accepted < helped.drafted, (helped.accepted, helped.drafted)
    assert len(helped.book.phases) == 30 - helped.accepted, "each kept draft saves the main model a pass"
    assert [p.step for p in helped.drafts] == [p.step for p in helped.book.phases[: len(helped.drafts)]]
    assert {p.phase for p in helped.drafts} == {"mtp"} and {p.tokens for p in helped.book.phases[1:]} == {2}
    prefill = helped.book.phases[0].find("logits")
    assert prefill.out_shape == (1, TINY["vocab_size"]), "the prefill's logits: its last position's"


def test_drafting_refuses_a_count_of_tokens_it_cannot_make_saying_how_many_fit(with_mtp):
    """n_new -1 gave no token and no word, 2.5 a TypeError; the positions a drafted run writes are the prompt's and
    n_new - 1 fed back, and a verifying pass's draft one past them: T + n_new (T + n_new + 1 refused runs that fit)."""
    ours, _, _ = with_mtp
    prompt = list(range(8))
    for n_new, says in ((-1, "n_new must be a whole number of at least 1, not -1"), (2.5, "not 2.5"),
                        (249, "plus 249 drafted tokens need 257 positions (a verifying pass writes its draft one past "
                              f"the last token fed) of {ours.config.name}'s 256; at most 248 new tokens fit")):  # fmt: skip
        with pytest.raises(UserError, match=re.escape(says)):
            generate_drafted(ours, prompt, n_new)
    assert len(generate_drafted(ours, prompt, 1).tokens) == 1
    assert len(generate_drafted(ours, [i % 100 for i in range(250)], 6).tokens) == 6  # 256 positions: the whole context
    full = [i % 100 for i in range(256)]  # one new token has no verifying pass: a prompt that fills the context
    assert generate_drafted(ours, full, 1).tokens == ours.generate(full, max_new_tokens=1, ledger=False).new_tokens
    with pytest.raises(UserError, match=re.escape("need 258 positions (a verifying pass writes its draft one past the "
                                                  "last token fed) of " f"{ours.config.name}'s 256; at most 1 new token fits")):  # fmt: skip
        generate_drafted(ours, full, 2)


def test_a_checkpoint_with_half_an_mtp_layer_is_refused_by_the_tensor_it_lacks(with_mtp, tmp_path):
    ours, _, _ = with_mtp
    source = Path(ours.source)
    (tmp_path / "config.json").write_text((source / "config.json").read_text())
    tensors = load_file(source / "model.safetensors")
    del tensors[f"model.layers.{N}.eh_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UserError, match=rf"layers\.{N}\.eh_proj\.weight of the multi-token-prediction layers"):
        load_model(str(tmp_path))


def test_a_rejected_draft_s_position_is_forgotten_only_where_every_layer_keeps_rows_a_position():
    kv = KVCache(capacity=8, layers=(KeysValues(2, 4),))
    kv.advance(5)
    kv.rewind(1)
    assert kv.length == 4, kv.length
    with pytest.raises(ValueError, match="cannot rewind 5 of 4"):
        kv.rewind(5)
    hybrid = KVCache(capacity=8, layers=(KeysValues(2, 4), State((("h", (2, 3)),))))
    hybrid.advance(3)
    with pytest.raises(ValueError, match="recurrent state"):
        hybrid.rewind(1)
