"""LFM2's quirks against transformers (what every family owes runs in test_conformance.py, on the same models): each
conv layer's state against transformers' cache after a prompt (shorter than the kernel, and longer), each decode
step and a pass from the state; the captures of the short conv; the pad slots of a batch kept out of the state,
where transformers lets the conv's biases in; the MLP's width rule; the older spellings of the config as
Lfm2Config reads them, and the options refused.
"""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import family_checks as checks  # noqa: E402 - after the importorskips: it imports torch and transformers
from conformance_configs import FAMILIES  # noqa: E402 - after the importorskips: it imports torch

from minitransformer.errors import UserError  # noqa: E402
from minitransformer.families.lfm2.family import CONV, PRESETS, Lfm2Config  # noqa: E402
from minitransformer.families.table import config_from_hf_dict  # noqa: E402

FAMILY = "lfm2"  # the family whose models the `made` fixture (tests/conftest.py) gives
SPEC = FAMILIES[FAMILY]
prompt = SPEC.prompt_ids
BIASED, KERNEL4 = "idxs-width-rule-conv-bias", "layer-types-kernel4-untied"


@pytest.mark.parametrize("name, n, then", [(BIASED, 1, 2), (BIASED, 30, 5), (KERNEL4, 2, 1), (KERNEL4, 40, 6)])
def test_the_conv_state_and_the_logits_after_a_prompt_and_each_decode_step_are_transformers(made, name, n, then):
    """Each conv layer's last L - 1 values of u in our cache equal the last L - 1 of transformers' L, and each pass's
    logits transformers', after a prompt (one shorter than the kernel: the state still partly zeros), after each of
    3 decode steps and after a pass of several positions from the cache."""
    _, ours, hf = made(name)
    ids = prompt(name, n + then, seed=6)
    compared = checks.states_and_logits_step_by_step(ours, hf, ids[:n], steps=3, then=ids[n:])
    convs = ours.config.layer_types.count(CONV)
    assert convs == 2 and len(compared) == 5 * (1 + convs), compared  # 5 passes: logits, then a conv state a layer
    assert all(c.ok for c in compared), "\n".join(map(repr, compared))


def test_the_short_conv_s_captures_are_transformers_own(made):
    """in_proj's three streams, the gated z = C * conv(B * x) and out_proj, captured in layer 0 (a conv layer), are
    what transformers' modules read and make (its conv is a function of the weights, causal_conv1d_fn: no module)."""
    _, ours, hf = made(BIASED)
    ids = prompt(BIASED, 40, seed=8)
    conv, seen = hf.model.layers[0].conv, {}
    hooks = [conv.in_proj.register_forward_hook(lambda m, a, out: seen.__setitem__("in", out[0])),
             conv.out_proj.register_forward_hook(lambda m, a, out: seen.__setitem__("z", a[0][0]) or
                                                 seen.__setitem__("out", out[0]))]  # fmt: skip
    try:
        with torch.no_grad():
            hf(torch.tensor([ids]))
    finally:
        for hook in hooks:
            hook.remove()
    _, cache = ours.run_with_cache(ids, names="blocks.0.conv.*")
    D = ours.config.n_embd
    for name, theirs in (("in_proj", seen["in"]), ("B", seen["in"][:, :D]), ("x", seen["in"][:, 2 * D :]),
                         ("z", seen["z"]), ("out", seen["out"])):  # fmt: skip
        assert checks.worst(cache[f"blocks.0.conv.{name}"], theirs) <= 1, name


def test_a_padded_row_keeps_its_pads_out_of_the_state_where_transformers_lets_the_conv_biases_in(made):
    """With conv_bias, transformers zeroes a pad slot's input h, not u: in_proj's biases make u = b_B * b_x there,
    which its conv reads, so its left-padded row differs from the same prompt alone. Ours zeroes u: the padded row is
    the prompt alone, and its last position transformers' unpadded one."""
    _, ours, hf = made(BIASED)
    rows = [prompt(BIASED, 12, seed=2), prompt(BIASED, 4, seed=3)]
    ids, pads, mask, positions = checks.hf_inputs(rows, 0)
    with torch.no_grad():
        padded = hf(
            torch.tensor(ids), attention_mask=torch.tensor(mask), position_ids=torch.tensor(positions)
        ).logits.numpy()
        alone = hf(torch.tensor([rows[1]])).logits[0].numpy()
    assert checks.worst(padded[1, pads[1] :], alone) > 10  # transformers' leak, far beyond the tolerance
    ours_padded = ours.run(ids, all_positions=True, pads=pads)
    assert checks.worst(ours_padded[1, pads[1] :], alone) <= 1
    assert checks.worst(ours_padded[0], padded[0]) <= 1  # an unpadded row: no difference


def test_the_mlp_width_is_lfm2_s_rule_and_the_preset_s_is_8192():
    """Lfm2MLP: 2/3 of intermediate_size, times block_ffn_dim_multiplier, up to a multiple of block_multiple_of;
    or intermediate_size as given (block_auto_adjust_ff_dim false)."""
    for options, width in ((dict(intermediate_size=48, block_multiple_of=16, block_ffn_dim_multiplier=1.5), 48),
                           (dict(intermediate_size=100, block_multiple_of=7, block_ffn_dim_multiplier=0.9), 63),
                           (dict(intermediate_size=40, block_auto_adjust_ff_dim=False), 40)):  # fmt: skip
        hf = transformers.Lfm2Config(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=1, **options)  # fmt: skip
        with torch.device("meta"):
            theirs = transformers.AutoModelForCausalLM.from_config(hf).model.layers[0].feed_forward.w1.out_features
        ours = config_from_hf_dict(json.loads(hf.to_json_string()), "tiny").d_ff
        assert ours == theirs == width, (options, ours, theirs)
    assert PRESETS["lfm2-1.2b"].d_ff == 8192 and PRESETS["lfm2-1.2b"].n_inner == 12288


def test_the_older_spellings_win_as_lfm2config_reads_them_and_what_it_cannot_compute_is_refused():
    """block_ff_dim over intermediate_size and tie_embedding over tie_word_embeddings (Lfm2Config's __post_init__
    pops them over the others); layer_types over full_attn_idxs; the keys whose other values no code path computes
    are refused by name."""
    base = PRESETS["lfm2-1.2b"].to_hf_dict()
    read = config_from_hf_dict(base | {"block_ff_dim": 6144, "tie_embedding": False, "full_attn_idxs": [0]}, "old")
    assert read.n_inner == 6144 and read.d_ff == 4096 and read.tie_word_embeddings is False
    assert read.layer_types == PRESETS["lfm2-1.2b"].layer_types  # layer_types given: full_attn_idxs not read
    idxs = config_from_hf_dict({k: v for k, v in base.items() if k != "layer_types"} | {"full_attn_idxs": [1]}, "x")
    assert idxs.layer_types == (CONV, "full_attention") + (CONV,) * 14
    for change, said in (({"use_pos_enc": False}, "use_pos_enc=false is not supported"),
                         ({"block_use_swiglu": False}, "block_use_swiglu=false is not supported"),
                         ({"block_dim": 1024}, "block_dim=1024 other than hidden_size"),
                         ({"conv_dim_out": 1024}, "conv_dim_out=1024 other than hidden_size")):  # fmt: skip
        with pytest.raises(UserError, match=said):
            config_from_hf_dict(base | change, "refused")
    assert isinstance(config_from_hf_dict(base | {"num_heads": 3, "block_dim": 2048}, "ignored"), Lfm2Config)
