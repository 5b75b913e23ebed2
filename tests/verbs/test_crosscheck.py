"""crosscheck: our ledger beside torch's own counters on transformers' forward of the same model and ids.

For every family in the table, on random models transformers itself makes (family_checks.save_random, the configs
shrunk from each family's live tests; GPT-2 and the Llama family from the committed fixtures): our ledger's dense form
(every T x t score) equals, group by group and exactly, the MACs of the matrix products torch dispatches during
transformers' eager forward; FlopCounterMode counts the same but what it has no formula for (the experts' grouped
products), and with SDPA nothing of attention on a CPU; and every difference carries its reason. The hybrids'
recurrent layers (Qwen3.5's Gated DeltaNet, Mamba-2's scan) transformers computes otherwise than we do: there each
difference is named with its closed form (verbs/crosscheck_scans.py), held here to what transformers' own code
computes, and they add up exactly. Beneath the totals, each kind of product the dispatch counter knows (mm, addmm, bmm,
baddbmm, addbmm, mv, addmv, dot, a convolution, einsum as torch decomposes it, grouped_mm, a triangular solve) is
counted on its own, in a tiny torch program whose MACs are known in closed form.
"""

from __future__ import annotations

import json
import math
import sys
import types

import pytest

from conftest import ROOT, run_cli

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'minitransformer[hf]')")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

from family_checks import save_random  # noqa: E402 - after the importorskips: it imports torch and transformers

from minitransformer import UserError, load_model  # noqa: E402
from minitransformer.engine.stages import STATE  # noqa: E402
from minitransformer.families.table import ARCHITECTURES  # noqa: E402
from minitransformer.verbs import crosscheck as crosscheck_module  # noqa: E402
from minitransformer.verbs.crosscheck import ACTIVATIONS, GROUPS, LOGITS, WEIGHTS, crosscheck, default_ids  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
PROMPT = 150  # past the attention row chunk (128): the ledger as computed skips part of the dense form

# family -> its models: a committed fixture's directory, or (transformers config class, its keywords). Every family
# of the table must have one (test_every_family_of_the_table_is_crosschecked).
MODELS: dict[str, list] = {
    "gpt2": [FIXTURES / "hf" / "odd_heads", FIXTURES / "hf" / "relu_unscaled_untied"],
    "llama": [FIXTURES / "hf_llama" / "llama_gqa_bias", FIXTURES / "hf_llama" / "mistral_window",
              FIXTURES / "hf_llama" / "qwen2_bias_bf16"],
    "qwen3": [("Qwen3Config", dict(vocab_size=120, hidden_size=32, intermediate_size=72, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_sliding_window=True,
                                   sliding_window=40, max_window_layers=1, max_position_embeddings=256))],
    "gemma": [("Gemma2Config", dict(vocab_size=150, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=7,
                                    query_pre_attn_scalar=20, max_position_embeddings=200)),
              ("Gemma3TextConfig", dict(vocab_size=150, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=9,
                                        max_position_embeddings=200))],
    "olmo2": [("Olmo2Config", dict(vocab_size=120, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=6, num_key_value_heads=2, head_dim=12, attention_bias=True,
                                   max_position_embeddings=256))],
    "olmo3": [("Olmo3Config", dict(vocab_size=120, hidden_size=48, intermediate_size=64, num_hidden_layers=4,
                                   num_attention_heads=6, num_key_value_heads=2, head_dim=12, attention_bias=True,
                                   sliding_window=40, max_position_embeddings=256, pad_token_id=None,
                                   eos_token_id=None))],
    "smollm3": [("SmolLM3Config", dict(vocab_size=120, hidden_size=48, intermediate_size=64, num_hidden_layers=4,
                                       num_attention_heads=6, num_key_value_heads=2, attention_bias=True,
                                       mlp_bias=True, use_sliding_window=True, sliding_window=40,
                                       max_position_embeddings=256, pad_token_id=None, bos_token_id=None,
                                       eos_token_id=None))],
    "glm4": [("Glm4Config", dict(vocab_size=120, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=6, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                                 pad_token_id=None))],
    "ernie4_5": [("Ernie4_5Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_bias=True,
                                         max_position_embeddings=256, pad_token_id=None, eos_token_id=None))],
    "cohere2": [("Cohere2Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, sliding_window=40,
                                       logit_scale=0.25, attention_bias=True, max_position_embeddings=256,
                                       pad_token_id=None, bos_token_id=None, eos_token_id=None))],
    "seed_oss": [("SeedOssConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        attention_out_bias=True, mlp_bias=True, max_position_embeddings=256,
                                        pad_token_id=None, bos_token_id=None, eos_token_id=None))],
    "exaone4": [("Exaone4Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, sliding_window=40,
                                       sliding_window_pattern=2, max_position_embeddings=256, pad_token_id=None,
                                       bos_token_id=None, eos_token_id=None))],
    "neox": [("GPTNeoXConfig", dict(vocab_size=150, hidden_size=32, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, max_position_embeddings=200))],
    "phi3": [("Phi3Config", dict(vocab_size=120, hidden_size=48, intermediate_size=40, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, sliding_window=7,
                                 partial_rotary_factor=0.5, max_position_embeddings=300, pad_token_id=None))],
    "mixtral": [("MixtralConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                       num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                       num_experts_per_tok=2, sliding_window=40, max_position_embeddings=256))],
    "qwen3_moe": [("Qwen3MoeConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                         moe_intermediate_size=24, num_experts=6, num_experts_per_tok=2,
                                         mlp_only_layers=[1], max_position_embeddings=256))],
    "ernie4_5_moe": [("Ernie4_5_MoeConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                                 moe_intermediate_size=12, num_hidden_layers=3, num_attention_heads=4,
                                                 num_key_value_heads=2, moe_num_experts=6, moe_k=2,
                                                 moe_num_shared_experts=2, use_bias=True, max_position_embeddings=256,
                                                 pad_token_id=None, eos_token_id=None))],
    "gpt_oss": [("GptOssConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4,
                                      num_experts_per_tok=2, sliding_window=24, max_position_embeddings=256))],
    "deepseek_v3": [("DeepseekV3Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                              moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                                              num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=3,
                                              n_group=4, topk_group=2, first_k_dense_replace=1, q_lora_rank=24,
                                              kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12,
                                              v_head_dim=10, n_shared_experts=1, max_position_embeddings=256))],
    "deepseek_v32": [("DeepseekV32Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                                moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                                                num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=3,
                                                n_group=4, topk_group=2, first_k_dense_replace=1, q_lora_rank=24,
                                                kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12,
                                                v_head_dim=10, index_topk=16, index_head_dim=16, index_n_heads=16,
                                                max_position_embeddings=256))],
    "deepseek_v4": [("DeepseekV4Config", dict(vocab_size=120, hidden_size=32, num_attention_heads=4, head_dim=16,
                                              partial_rotary_factor=0.5, q_lora_rank=24, o_groups=2, o_lora_rank=8,
                                              index_n_heads=4, index_head_dim=16, index_topk=4, n_routed_experts=4,
                                              num_experts_per_tok=2, moe_intermediate_size=16, sliding_window=16,
                                              compress_rates={"compressed_sparse_attention": 4,
                                                              "heavily_compressed_attention": 8},
                                              num_hidden_layers=3, hc_sinkhorn_iters=3, num_hash_layers=1,
                                              layer_types=["sliding_attention", "compressed_sparse_attention",
                                                           "heavily_compressed_attention"],
                                              max_position_embeddings=256))],
    # The hybrids (test_a_hybrid_s_every_difference_is_named_and_exact): the live tests' shapes, chunks far shorter
    # than the prompt (64 for the delta rule; the config's for Mamba-2), groups of heads sharing keys or B and C
    "qwen3_5": [("Qwen3_5TextConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                           linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                                           linear_value_head_dim=8, max_position_embeddings=512)),
                ("Qwen3_5MoeTextConfig", dict(vocab_size=120, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                                              num_key_value_heads=2, head_dim=16, linear_num_key_heads=1,
                                              linear_num_value_heads=3, linear_key_head_dim=8, linear_value_head_dim=8,
                                              num_experts=4, num_experts_per_tok=2, moe_intermediate_size=12,
                                              shared_expert_intermediate_size=20, max_position_embeddings=512))],
    "mamba2": [("Mamba2Config", dict(num_heads=8, head_dim=8, hidden_size=32, expand=2, state_size=16, n_groups=2,
                                     num_hidden_layers=2, vocab_size=128, chunk_size=16, conv_kernel=3))],
    "nemotron_h": [("NemotronHConfig", dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                            intermediate_size=48, mamba_num_heads=8, mamba_head_dim=8,
                                            ssm_state_size=16, n_groups=2, conv_kernel=4, n_routed_experts=6,
                                            num_experts_per_tok=2, moe_intermediate_size=24,
                                            moe_shared_expert_intermediate_size=40, n_group=2, topk_group=1,
                                            vocab_size=128, max_position_embeddings=512, chunk_size=16,
                                            layers_block_type=["mamba", "moe", "attention", "mlp", "mamba",
                                                               "attention"]))],
    # A short conv of kernel 3 and of 4, beside attention
    "lfm2": [("Lfm2Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                 num_attention_heads=4, num_key_value_heads=2, full_attn_idxs=[1, 3], conv_bias=True,
                                 max_position_embeddings=256, eos_token_id=None, pad_token_id=None)),
             ("Lfm2Config", dict(vocab_size=120, hidden_size=24, intermediate_size=48, num_hidden_layers=3,
                                 num_attention_heads=2, num_key_value_heads=1, layer_types=["conv", "conv",
                                 "full_attention"], conv_L_cache=4, max_position_embeddings=256, eos_token_id=None,
                                 pad_token_id=None))],
    "lfm2_moe": [("Lfm2MoeConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=12,
                                        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                        layer_types=["full_attention", "conv", "conv", "full_attention"],
                                        num_dense_layers=1, num_experts=6, num_experts_per_tok=2,
                                        max_position_embeddings=256, eos_token_id=None, pad_token_id=None))],
    "qwen3_next": [("Qwen3NextConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                                            linear_value_head_dim=6, num_experts=4, num_experts_per_tok=2,
                                            moe_intermediate_size=12, shared_expert_intermediate_size=20,
                                            mlp_only_layers=[1], max_position_embeddings=512))],
    "minimax_m2": [("MiniMaxM2Config", dict(vocab_size=120, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                            num_local_experts=8, num_experts_per_tok=3, rotary_dim=8,
                                            max_position_embeddings=256, bos_token_id=None, eos_token_id=None))],
    "glm4_moe": [("Glm4MoeConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                                        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2,
                                        first_k_dense_replace=1, use_qk_norm=True, attention_bias=True,
                                        max_position_embeddings=256))],
    "glm4_moe_lite": [("Glm4MoeLiteConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                                 moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                                                 num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=3,
                                                 n_group=2, topk_group=1, q_lora_rank=24, kv_lora_rank=16,
                                                 qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
                                                 max_position_embeddings=256))],
    "glm_moe_dsa": [("GlmMoeDsaConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                             moe_intermediate_size=16, num_hidden_layers=4, num_attention_heads=4,
                                             num_key_value_heads=4, n_routed_experts=8, num_experts_per_tok=3,
                                             n_group=2, topk_group=1, first_k_dense_replace=1, q_lora_rank=24,
                                             kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
                                             index_topk=16, index_head_dim=16, index_n_heads=16, index_topk_freq=2,
                                             index_skip_topk_offset=2, max_position_embeddings=256))],
    "bamba": [("BambaConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, attn_layer_indices=[1],
                                   mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=16,
                                   max_position_embeddings=256))],
    "granitemoehybrid": [("GraniteMoeHybridConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=12,
                                                         shared_intermediate_size=20, num_hidden_layers=3,
                                                         num_attention_heads=4, num_key_value_heads=2,
                                                         layer_types=["mamba", "attention", "mamba"],
                                                         num_local_experts=4, num_experts_per_tok=2, mamba_n_heads=8,
                                                         mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=16,
                                                         position_embedding_type="rope", attention_multiplier=0.3,
                                                         max_position_embeddings=256))],
    "falcon_h1": [("FalconH1Config", dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=16, mamba_d_ssm=48,
                                          mamba_n_heads=6, mamba_d_head=8, mamba_n_groups=2, mamba_d_state=8,
                                          mamba_chunk_size=16, mamba_rms_norm=True, key_multiplier=0.4,
                                          ssm_multipliers=[0.5, 0.6, 0.7, 0.8, 0.9], max_position_embeddings=256))],
    # Mamba-1's selective scan, the conv of kernel 4 and 3; Falcon-Mamba's norms of dt, B and C
    "mamba": [("MambaConfig", dict(hidden_size=32, state_size=8, num_hidden_layers=2, vocab_size=96,
                                   bos_token_id=None, eos_token_id=None, pad_token_id=None)),
              ("MambaConfig", dict(hidden_size=24, expand=3, state_size=16, time_step_rank=5, num_hidden_layers=2,
                                   vocab_size=80, conv_kernel=3, use_bias=True, bos_token_id=None,
                                   eos_token_id=None, pad_token_id=None))],
    "falcon_mamba": [("FalconMambaConfig", dict(hidden_size=32, state_size=8, num_hidden_layers=2, vocab_size=96,
                                                bos_token_id=None, eos_token_id=None, pad_token_id=None))],
    # Jamba: Mamba-1 mixers beside attention, a dense MLP beside the experts
    "jamba": [("JambaConfig", dict(vocab_size=96, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2, attn_layer_period=2,
                                   attn_layer_offset=1, expert_layer_period=3, expert_layer_offset=0,
                                   mamba_d_state=8, num_experts=4, max_position_embeddings=256, eos_token_id=None))],
    "llama4_text": [("Llama4TextConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=16,
                                              intermediate_size_mlp=24, num_hidden_layers=4, num_attention_heads=4,
                                              num_key_value_heads=2, head_dim=8, num_local_experts=4,
                                              interleave_moe_layer_step=2, attention_chunk_size=8, floor_scale=4,
                                              max_position_embeddings=256))],
    "kimi_linear": [("KimiLinearConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=48,
                                              moe_intermediate_size=16, num_hidden_layers=3, num_attention_heads=4,
                                              num_key_value_heads=4, kv_lora_rank=16, qk_rope_head_dim=8,
                                              qk_nope_head_dim=12, v_head_dim=10, num_experts=8,
                                              num_experts_per_token=2, layer_types=["linear_attention",
                                              "full_attention", "linear_attention"],
                                              linear_attn_config={"head_dim": 8, "num_heads": 2},
                                              model_max_length=256, bos_token_id=None, eos_token_id=None,
                                              pad_token_id=None))],
    # Gemma 4: two layers reading the keys and values of earlier ones, per-layer inputs, K = V on the full layers
    "gemma4": [("Gemma4TextConfig", dict(vocab_size=120, vocab_size_per_layer_input=120, hidden_size=32,
                                         intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
                                         num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                         num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=8,
                                         layer_types=["sliding_attention", "full_attention"] * 2,
                                         num_kv_shared_layers=2, hidden_size_per_layer_input=4,
                                         max_position_embeddings=256, pad_token_id=None))],
    # blocks of 30 (the prompt's 150 in five): transformers' loop computes each block's products as ours does
    "minimax": [("MiniMaxConfig", dict(vocab_size=120, hidden_size=32, intermediate_size=16, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4,
                                       num_experts_per_tok=2, block_size=30, layer_types=["linear_attention"] * 3
                                       + ["full_attention"], max_position_embeddings=256, bos_token_id=None,
                                       eos_token_id=None))],
}  # fmt: skip
# Families whose recurrent layers transformers computes otherwise than ours (verbs/crosscheck_scans.py)
HYBRIDS = ("qwen3_5", "qwen3_next", "mamba2", "nemotron_h", "bamba", "granitemoehybrid", "falcon_h1", "kimi_linear")
MAMBA1S = ("mamba", "falcon_mamba", "jamba")  # Mamba-1's selective scan: its conv and its update differ
DELTANETS = ("qwen3_5", "qwen3_next")  # the Gated DeltaNet's (the others': Mamba-2's, Kimi Delta Attention's)
KDAS = ("kimi_linear",)
SHORT_CONVS = ("lfm2", "lfm2_moe")  # a recurrent layer without a scan: its conv alone differs
MAMBA_KEYS = ("mamba_n_heads", "mamba_d_head", "mamba_d_state", "mamba_n_groups", "mamba_d_conv", "mamba_chunk_size")


def mamba_shapes(hf) -> tuple[int, ...]:
    """(Hs, P, N, Ng, K, L) of a config with Mamba-2 layers, as each config class names them."""
    if hf.model_type == "nemotron_h":
        return hf.mamba_num_heads, hf.mamba_head_dim, hf.ssm_state_size, hf.n_groups, hf.conv_kernel, hf.chunk_size
    if hf.model_type == "mamba2":
        return hf.num_heads, hf.head_dim, hf.state_size, hf.n_groups, hf.conv_kernel, hf.chunk_size
    return tuple(getattr(hf, key) for key in MAMBA_KEYS)  # Bamba's, Granite 4.0-H's, Falcon-H1's


EVERY_TOKEN = ("llama4_text",)  # transformers runs every expert on every token (crosscheck_scans.py)
COMPRESSED = ("deepseek_v4",)  # attention over every 4:1 entry, pools as a multiply and a sum (crosscheck_scans.py)
CASES = [(family, i) for family, models in MODELS.items() for i in range(len(models))
         if family not in HYBRIDS + SHORT_CONVS + MAMBA1S + EVERY_TOKEN + COMPRESSED]  # fmt: skip


def test_every_family_of_the_table_is_crosschecked():
    missing = [name for name in ARCHITECTURES if name not in MODELS]
    assert not missing, f"add a random model of {missing} to tests/verbs/test_crosscheck.py's MODELS"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(family, index) -> the directory of that model, made once (a fixture is used as committed)."""
    models: dict = {}

    def get(family: str, index: int):
        if (family, index) not in models:
            entry = MODELS[family][index]
            if isinstance(entry, tuple):
                config_class, keywords = entry
                directory = tmp_path_factory.mktemp(f"{family}{index}")
                save_random(directory, getattr(transformers, config_class)(**keywords), seed=3 + index)
                entry = directory
            models[family, index] = entry
        return models[family, index]

    return get


@pytest.mark.parametrize(("family", "index"), CASES)
def test_our_dense_ledger_is_what_torch_dispatches_in_the_eager_forward(made, family, index):
    model = load_model(made(family, index))
    assert model.config.family == family
    ids = default_ids(model, min(PROMPT, model.config.n_positions))
    check = crosscheck(model, ids, dense_attention=True)
    assert check.ledger_macs == check.ledger_dense_macs == check.eager.dispatch_macs > 0
    groups = {g["group"]: g for g in check.groups()}
    for name in GROUPS:
        g = groups[name]
        assert g["ledger_dense_macs"] == g["dispatch_macs"], (name, g)
        # FlopCounterMode counts what torch dispatched, but for the experts' grouped products (no formula for them)
        assert g["flop_counter_macs"] == g["dispatch_macs"] - g["torch_ops"].get("_grouped_mm", 0), (name, g)
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]
    assert groups[WEIGHTS]["dispatch_macs"] > 0 and groups[ACTIVATIONS]["dispatch_macs"] > 0
    assert groups[LOGITS]["dispatch_macs"] == len(ids) * model.config.n_embd * model.config.vocab_size
    # With SDPA, attention is one fused kernel that FlopCounterMode does not count on a CPU (where torch runs one:
    # MLA's values narrower than its keys take the plain products, counted as in eager); the rest is unchanged (a
    # lightning layer's scan, plain products either way). Gemma 2 and gpt-oss have no SDPA in transformers
    # (soft-capped scores, sinks): no column, and it says so.
    if check.sdpa is None:
        assert groups[ACTIVATIONS]["flop_counter_sdpa_macs"] is None
        assert any("offers no SDPA" in reason for reason in groups[ACTIVATIONS]["reasons"])
    else:
        fused = check.sdpa.sdpa_calls
        scans = sum(r.macs for r in check.phase.records if r.kind == "matmul" and r.stage.group == STATE)
        expected = scans if fused else groups[ACTIVATIONS]["flop_counter_macs"]
        assert groups[ACTIVATIONS]["flop_counter_sdpa_macs"] == expected, (fused, groups[ACTIVATIONS])
        for name in (WEIGHTS, LOGITS):
            assert groups[name]["flop_counter_sdpa_macs"] == groups[name]["flop_counter_macs"]
    if model.config.n_experts is None:
        assert "_grouped_mm" not in groups[WEIGHTS]["torch_ops"]
    elif groups[WEIGHTS]["torch_ops"].get("_grouped_mm"):
        assert any("aten._grouped_mm" in reason for reason in groups[WEIGHTS]["reasons"])


def torch_recurrent_products(hf, T: int) -> tuple[int, int, int, int]:
    """(the conv's kernel K, conv MACs, products of activations, triangular solves' MACs) that transformers' pure-PyTorch fallbacks compute
    for a prompt of T positions, written from their code (modeling_qwen3_5.py, modeling_mamba2.py), not from ours:
    F.conv1d(padding=K - 1) makes T + K - 1 outputs a channel; torch_chunk_gated_delta_rule pads T to chunks of 64
    and, per value head (q and k repeated), computes K K^T and Q K^T, the state's reads by the decayed keys and by
    the queries, the mix and the write, and solves its triangular systems by linalg_solve_triangular (C (C - 1) / 2 a
    column); mamba2_chunk_scan pads T to its chunks and, per head (B and C repeated), computes C B^T, the mix, the
    chunks' states, their carry as one (Nc + 1) x (Nc + 1) einsum and the reads of them; chunk_kimi_delta_attention
    pads T to chunks of 64 and, per head, applies each chunk's inverse (made by multiplies and sums) to the values and
    to the decayed keys, reads the state by the queries and by the decayed keys, mixes within the chunk and writes
    (its K K^T and Q K^T a multiply and a sum); eager attention T x T (MLA's over dh = dn + dr, then dv)."""
    kinds = list(getattr(hf, "layer_types", None) or getattr(hf, "layers_block_type", None) or [])
    if hf.model_type in KDAS:  # chunk_kimi_delta_attention: the inverse applied by two products, no solve kernel
        layers, attention = kinds.count("linear_attention"), kinds.count("full_attention")
        H, dk, K, C = hf.linear_num_heads, hf.linear_head_dim, hf.linear_conv_kernel_dim, 64
        channels, N = 3 * H * dk, -(-T // C)
        scan = H * N * (3 * C * C * dk + 3 * C * dk * dk)
        solves = 0
        mla = hf.num_attention_heads * T * T * (hf.qk_nope_head_dim + hf.qk_rope_head_dim + hf.v_head_dim)
        return K, layers * channels * (T + K - 1) * K, layers * scan + attention * mla, solves
    if hf.model_type.startswith(DELTANETS):
        layers, attention = kinds.count("linear_attention"), kinds.count("full_attention")
        Hk, Hv, dk, dv = (
            hf.linear_num_key_heads,
            hf.linear_num_value_heads,
            hf.linear_key_head_dim,
            hf.linear_value_head_dim,
        )
        K, channels, C = hf.linear_conv_kernel_dim, 2 * Hk * dk + Hv * dv, 64
        N = -(-T // C)
        scan = Hv * N * (2 * C * C * dk + 2 * C * dk * dv + C * C * dv + C * dk * dv)
        solves = layers * Hv * N * (dk + dv) * C * (C - 1) // 2
    else:
        # transformers names the hybrids' kinds as Qwen3.5's: a Mamba-2 layer "linear_attention" (Falcon-H1's every
        # layer "hybrid": both)
        mixers, attends = ("linear_attention", "hybrid"), ("full_attention", "hybrid")
        layers = hf.num_hidden_layers if hf.model_type == "mamba2" else sum(k in mixers for k in kinds)
        attention = sum(k in attends for k in kinds)
        H, P, Nst, Ng, K, L = mamba_shapes(hf)
        channels, N = H * P + 2 * Ng * Nst, -(-T // L)
        scan = H * N * (L * L * Nst + L * L * P + 2 * L * P * Nst) + H * (N + 1) ** 2 * P * Nst
        solves = 0
    conv = layers * channels * (T + K - 1) * K
    head_dim = getattr(hf, "head_dim", None) or hf.hidden_size // hf.num_attention_heads
    attend = attention * 2 * hf.num_attention_heads * T * T * head_dim if attention else 0
    return K, conv, layers * scan + attend, solves


@pytest.mark.parametrize("tokens", [PROMPT, 12])  # past the chunks, and shorter than one (torch pads it to one)
@pytest.mark.parametrize(("family", "index"), [(f, i) for f in HYBRIDS for i in range(len(MODELS[f]))])
def test_a_hybrid_s_every_difference_is_named_and_exact(made, family, index, tokens):
    """A hybrid's recurrent layers are computed otherwise by transformers than by us; crosscheck names each
    difference with its closed form, and they add up exactly: the logits are the same; the products with weights
    differ by the conv's padded outputs alone; torch's products of activations are those of its own code."""
    directory = made(family, index)
    model = load_model(directory)
    hf = transformers.AutoConfig.from_pretrained(directory)
    ids = default_ids(model, tokens)
    check = crosscheck(model, ids, dense_attention=True)
    groups = {g["group"]: g for g in check.groups()}
    K, conv, activations, solves = torch_recurrent_products(hf, tokens)
    ours_conv = sum(r.macs for r in check.phase.records if r.op.endswith(".conv"))  # T outputs a channel, not T + K - 1
    assert ours_conv > 0 and ours_conv * (tokens + K - 1) == conv * tokens
    assert (
        groups[LOGITS]["dispatch_macs"]
        == groups[LOGITS]["ledger_macs"]
        == tokens * model.config.n_embd * model.config.vocab_size
    )
    assert groups[WEIGHTS]["dispatch_macs"] - groups[WEIGHTS]["ledger_macs"] == conv - ours_conv > 0
    assert groups[ACTIVATIONS]["dispatch_macs"] == activations
    assert check.eager.solves[ACTIVATIONS] == solves
    if family in DELTANETS and tokens >= 64:  # the same chunks: torch's solve is our delta.solve as computed
        assert solves == sum(r.macs for r in check.phase.records if r.op == "delta.solve")
    for name in GROUPS:
        g = groups[name]
        assert g["flop_counter_macs"] == g["dispatch_macs"] - g["torch_ops"].get("_grouped_mm", 0), (name, g)
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]
        if g["dispatch_macs"] != g["ledger_dense_macs"]:
            assert any(reason.endswith("MACs, exactly") for reason in g["reasons"]), g["reasons"]
    said = " ".join(groups[WEIGHTS]["reasons"] + groups[ACTIVATIONS]["reasons"])
    assert f"padding K - 1 = {K - 1}" in said
    assert ("repeat_interleave" in said) == (family not in KDAS)  # a KDA layer has as many key heads as value heads
    assert ("pads a prompt shorter than its chunk" in said) == (
        tokens < 64 if family in DELTANETS + KDAS else tokens < mamba_shapes(hf)[-1]
    )
    if family in DELTANETS:
        assert "aten.linalg_solve_triangular" in said and "l2norm" in said
    elif family in KDAS:
        assert "[C, C, dk] decays" in said and "inverts each chunk's triangular system" in said and "l2norm" in said
    else:
        assert "(Nc + 1) x (Nc + 1)" in said


@pytest.mark.parametrize(("family", "index"), [(f, i) for f in SHORT_CONVS for i in range(len(MODELS[f]))])
def test_a_short_conv_s_one_difference_is_its_conv_s_padded_outputs(made, family, index):
    """LFM2's short conv is counted as every causal conv is: torch's F.conv1d computes K - 1 outputs a channel more
    and drops them, the one difference in the products with weights, named with its closed form; the rest (the
    attention layers', the MLPs', the logits) is what torch dispatches, exactly."""
    model = load_model(made(family, index))
    c = model.config
    check = crosscheck(model, default_ids(model, PROMPT), dense_attention=True)
    groups = {g["group"]: g for g in check.groups()}
    convs, K = sum(kind.startswith("conv") for kind in c.layer_types), c.conv_kernel
    padded = convs * c.n_embd * K * (K - 1)
    assert groups[WEIGHTS]["dispatch_macs"] - groups[WEIGHTS]["ledger_dense_macs"] == padded > 0
    assert f"padding K - 1 = {K - 1}" in " ".join(groups[WEIGHTS]["reasons"])
    for name in (ACTIVATIONS, LOGITS):
        assert groups[name]["ledger_dense_macs"] == groups[name]["dispatch_macs"] > 0, groups[name]
    for g in groups.values():
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]


@pytest.mark.parametrize(("family", "index"), [(f, i) for f in EVERY_TOKEN for i in range(len(MODELS[f]))])
def test_experts_run_on_every_token_are_the_one_difference_named(made, family, index):
    """Llama 4's experts: transformers' batched products run every token through all E experts (the unchosen ones'
    inputs zeros), ours each expert's own tokens: the products with weights differ by (E - k) T 3 D F a MoE layer,
    named with that closed form; attention (its chunks and NoPE layers every T x t score) and the logits are what
    torch dispatches, exactly."""
    model = load_model(made(family, index))
    c = model.config
    check = crosscheck(model, default_ids(model, PROMPT), dense_attention=True)
    groups = {g["group"]: g for g in check.groups()}
    moe_layers = sum(kind.endswith("_moe") for kind in c.layer_types)
    more = moe_layers * (c.n_experts - c.top_k) * PROMPT * 3 * c.n_embd * c.n_inner
    assert groups[WEIGHTS]["dispatch_macs"] - groups[WEIGHTS]["ledger_dense_macs"] == more > 0
    assert any(reason.endswith("MACs, exactly") for reason in groups[WEIGHTS]["reasons"]), groups[WEIGHTS]["reasons"]
    for name in (ACTIVATIONS, LOGITS):
        assert groups[name]["ledger_dense_macs"] == groups[name]["dispatch_macs"] > 0, groups[name]
    for g in groups.values():
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]


def torch_compressed_products(hf, T: int) -> tuple[int, int, int]:
    """(products of activations, multiplies written as a multiply and a sum, products with weights beyond ours) of
    transformers' DeepSeek-V4 over T positions, written from modeling_deepseek_v4.py, not from ours: each layer's two
    hyper-connections mix the N streams by torch.matmul(comb^T, streams) and collapse them by (pre * streams).sum
    (and DeepseekV4HyperHead once more); eager attention runs each head's scores and mix over the T keys and every
    entry c = floor(T / m) its compressor made (block_bias masks them); a compressor pools each window's m' slots (2m
    at 4:1, the indexer's too) by (kv * softmax(gate)).sum; the indexer's scorer is torch.matmul(q, entries^T) and
    (scores * weights).sum over its heads, and with no entry yet (T < m) it still projects q and weights (kv and gate
    too, as ours does: the open window's rows are kept for the pass that closes it)."""
    kinds, rates = hf.layer_types, hf.compress_rates
    H, dh, D, N, L = hf.num_attention_heads, hf.head_dim, hf.hidden_size, hf.hc_mult, hf.num_hidden_layers
    Hi, di, dq = hf.index_n_heads, hf.index_head_dim, hf.q_lora_rank
    activations = L * 2 * T * N * N * D
    multiplies = (2 * L + 1) * T * N * D
    weights = 0
    for kind in kinds:
        m = rates.get(kind, 0)
        c = T // m if m else 0
        activations += 2 * H * T * (T + c) * dh
        if kind == "heavily_compressed_attention":
            multiplies += c * m * dh
        if kind == "compressed_sparse_attention":
            activations += T * Hi * c * di
            multiplies += c * 2 * m * (dh + di) + T * Hi * c
            weights += 0 if c else T * (Hi * di * dq + Hi * D)
    return activations, multiplies, weights


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("tokens", [PROMPT, 3])  # past every compressor's window, and short of the first 4:1 one
@pytest.mark.parametrize(("family", "index"), [(f, i) for f in COMPRESSED for i in range(len(MODELS[f]))])
def test_compressed_attention_s_every_difference_is_named_and_exact(made, family, index, tokens, dense):
    """DeepSeek-V4 in transformers: its 4:1 attention over every entry, the unchosen masked (ours computes the kc its
    indexer chose, that dense form beside them, or, --dense-attention, the dense form), its hyper-connections',
    compressors' and indexer's sums as a multiply and a sum (ours: products), its indexer's projections before there
    is an entry; crosscheck names each with its closed form and they add up exactly: torch's products of activations
    and its multiplies are those of transformers' own code, the logits the same."""
    directory = made(family, index)
    model = load_model(directory)
    hf = transformers.AutoConfig.from_pretrained(directory)
    check = crosscheck(model, default_ids(model, tokens), dense_attention=dense)
    groups = {g["group"]: g for g in check.groups()}
    activations, multiplies, weights = torch_compressed_products(hf, tokens)
    torch_side = groups[ACTIVATIONS]
    assert torch_side["dispatch_macs"] == activations, (torch_side["dispatch_macs"], activations)
    assert torch_side["multiply_sum_macs"] == multiplies, (torch_side["multiply_sum_macs"], multiplies)
    assert groups[WEIGHTS]["dispatch_macs"] - groups[WEIGHTS]["ledger_dense_macs"] == weights, groups[WEIGHTS]
    assert groups[LOGITS]["dispatch_macs"] == groups[LOGITS]["ledger_macs"] == tokens * hf.hidden_size * hf.vocab_size
    for name in GROUPS:
        g = groups[name]
        assert g["flop_counter_macs"] == g["dispatch_macs"] - g["torch_ops"].get("_grouped_mm", 0), (name, g)
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]
        if g["dispatch_macs"] != g["ledger_dense_macs"]:
            assert any(reason.endswith("MACs, exactly") for reason in g["reasons"]), g["reasons"]
    said = " ".join(groups[WEIGHTS]["reasons"] + groups[ACTIVATIONS]["reasons"])
    assert "(pre.unsqueeze(-1) * streams).sum(dim=2)" in said
    assert "block_bias" not in said and ("no 4:1 entry yet" in said) == (tokens == 3)  # attention is no difference


def test_as_computed_the_ledger_skips_the_masked_half_and_says_why(made):
    model = load_model(made("mixtral", 0))
    check = crosscheck(model, default_ids(model, PROMPT))
    activations = next(g for g in check.groups() if g["group"] == ACTIVATIONS)
    assert activations["ledger_macs"] < activations["ledger_dense_macs"] == activations["dispatch_macs"]
    assert any("row chunks of 128 query rows" in reason for reason in activations["reasons"])
    assert check.ledger_macs == check.phase.macs < check.ledger_dense_macs


def test_row_chunks_are_said_to_skip_the_keys_after_each_chunk_not_the_causal_half(made):
    """A chunk of 128 rows computes its whole 128 x 128 block: at T = 160 the chunks skip 16% of the dense form, and
    the reason said "the causal half"."""
    model = load_model(made("qwen3_5", 0))
    check = crosscheck(model, default_ids(model, 160))
    activations = next(g for g in check.groups() if g["group"] == ACTIVATIONS)
    said = " ".join(activations["reasons"])
    assert "each chunk against the keys up to its last row (its own rows' block whole" in said, said
    assert "causal half)" not in said.replace("with no causal half)", "")  # SDPA's formula: dense, rightly said
    attention = [r for r in check.phase.records if r.attention]
    assert 1 - sum(r.macs for r in attention) / sum(r.dense_macs for r in attention) == pytest.approx(0.16)


def test_fused_kernels_are_counted_in_words_that_agree():
    assert crosscheck_module.fused_kernels({"a": 1, "b": 4}) == "aten.a (1 call), aten.b (4 calls)"


def test_a_batch_of_ids_is_refused_not_counted_as_tokens():
    """crosscheck(model, [ids, ids]) read the two rows as two tokens (tokens 2, the MACs the batch's)."""
    model = load_model("demo")
    with pytest.raises(
        UserError, match=r"crosscheck reads one prompt's token ids \[T\], not a batch of shape \[2, 5\]"
    ):
        crosscheck(model, [[464, 3139, 286, 4881, 318]] * 2)


@pytest.mark.parametrize("wrong", [None, "demo"], ids=repr)
def test_what_is_no_model_is_refused_in_words(wrong):
    """crosscheck(None, ids) ended in an AttributeError on shape_only."""
    with pytest.raises(UserError) as refused:
        crosscheck(wrong, [464, 3139])
    print(refused.value)
    assert f"crosscheck counts a Model's forward (load_model(...)), not {wrong!r}" in str(refused.value)


def test_the_command_prints_the_groups_and_writes_the_json(made):
    directory = made("qwen3", 0)
    result = run_cli("crosscheck", "--model", str(directory), "--tokens", "140", "--json", "-")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["tokens"] == 140
    assert document["dispatch_macs"] == document["ledger_dense_macs"] > document["ledger_macs"]
    assert document["flop_counter_macs"] == document["dispatch_macs"]  # a dense model: nothing FlopCounterMode misses
    assert [g["group"] for g in document["groups"]] == list(GROUPS)
    assert sum(g["dispatch_macs"] for g in document["groups"]) == document["dispatch_macs"]
    text = result.stderr
    for name in GROUPS:
        assert name in text
    assert "FlopCounterMode" in text and "SDPA" in text and "row chunks" in text


def test_without_torch_the_command_says_what_to_install(tmp_path):
    """The hf extra missing: one line, exit 2 (torch hidden from a fresh interpreter)."""
    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None\n"
            "from minitransformer.cli import main; raise SystemExit(main(['crosscheck', '--model', 'demo']))")  # fmt: skip
    import subprocess

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert "pip install 'minitransformer[hf]'" in result.stderr and result.stdout == ""


def test_arguments_are_refused_before_torch_is_imported(tmp_path):
    """Importing torch and transformers takes 6 to 8 seconds: a prompt past the context waited that long for its one
    line. The refusal now comes first, and torch is never imported (a fresh interpreter, its modules looked at)."""
    too_long = ",".join(["5"] * 70)  # the demo's context is 64
    code = (f"import sys; from minitransformer.cli import main; code = main(['crosscheck', '--model', 'demo', "
            f"'--ids', '{too_long}']); print(sorted(m for m in ('torch', 'transformers') if m in sys.modules)); "
            f"raise SystemExit(code)")  # fmt: skip
    import subprocess

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    print(result.stdout, result.stderr)
    assert result.returncode == 2
    assert "70 positions exceed this model's context of 64" in result.stderr
    assert result.stdout.strip() == "[]"


def test_a_product_written_as_a_multiply_and_a_sum_is_named():
    """transformers writes some products without a product kernel (Qwen3.5's l2norm as (x * x).sum(-1); its delta rule,
    when torch.export traces it, solves each chunk row by row as (row[..., None] * sub).sum(-2)): the dispatch counter
    sees a multiply and a sum, and says how many MACs."""
    from minitransformer.verbs.crosscheck import Tally, _tally

    class RowTimesMatrix(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(6, 5))

        def get_output_embeddings(self):
            return None

        def forward(self, ids):
            row = ids.float().reshape(1, 6)  # [1, 6]: an activation
            made = row.unsqueeze(-1) * self.weight  # [1, 6, 5], the multiplies of row @ weight
            return made.sum(-2) + (row @ self.weight)  # the same product twice: once summed, once dispatched

    tally = _tally(torch, RowTimesMatrix(), list(range(6)))
    assert isinstance(tally, Tally)
    assert tally.multiply_sum[WEIGHTS] == 30 and tally.dispatch[WEIGHTS] == 30


class Program(torch.nn.Module):
    """A tiny torch program for the dispatch counter: `program(weights, ids)` with its parameters (`weights`, named
    tensors) and, where `logits` names one of them, that one as the output embedding."""

    def __init__(self, program, logits: str | None = None, **weights):
        super().__init__()
        self.program, self.logits = program, logits
        self.weights = torch.nn.ParameterDict({name: torch.nn.Parameter(w) for name, w in weights.items()})

    def get_output_embeddings(self):  # what transformers' model answers: a module holding the output embedding
        return None if self.logits is None else types.SimpleNamespace(weight=self.weights[self.logits])

    def forward(self, ids):
        return self.program(self.weights, ids)


def numbers(*shape):
    """An activation of `shape` (not a parameter): 0, 0.1, 0.2, ..."""
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape) / 10


def ones(*shape):
    return torch.ones(shape)


F = torch.nn.functional
OFFSETS = torch.tensor([3, 3, 10], dtype=torch.int32)  # 3 experts' rows end at 3, 3 (none) and 10
# kind -> (program, the aten op torch dispatches, its group, its MACs in closed form: every output number a dot
# product of the shared length, and whether FlopCounterMode counts it too (None: not relied on here)
KINDS = {
    "x @ W: [3, 5] x [5, 7]": (Program(lambda w, _: numbers(3, 5) @ w["W"], W=ones(5, 7)),
                               "mm", WEIGHTS, 3 * 7 * 5, True),
    "x @ W with x [2, 3, 5]: the batch folded into rows": (Program(lambda w, _: numbers(2, 3, 5) @ w["W"],
                                                                   W=ones(5, 7)), "mm", WEIGHTS, 2 * 3 * 7 * 5, True),
    "linear with a bias: x [2, 3, 5], W [7, 5]": (Program(lambda w, _: F.linear(numbers(2, 3, 5), w["W"], w["b"]),
                                                          W=ones(7, 5), b=ones(7)), "addmm", WEIGHTS, 2 * 3 * 7 * 5,
                                                  True),
    "the logits: x [3, 5] against the output embedding [11, 5]": (
        Program(lambda w, _: F.linear(numbers(3, 5), w["E"]), logits="E", E=ones(11, 5)), "mm", LOGITS, 3 * 11 * 5,
        True),
    "bmm: [4, 3, 5] x [4, 5, 7]": (Program(lambda w, _: torch.bmm(numbers(4, 3, 5), ones(4, 5, 7))),
                                   "bmm", ACTIVATIONS, 4 * 3 * 7 * 5, True),
    "matmul of [2, 4, 3, 5] and [2, 4, 5, 7]": (Program(lambda w, _: numbers(2, 4, 3, 5) @ ones(2, 4, 5, 7)),
                                                "bmm", ACTIVATIONS, 2 * 4 * 3 * 7 * 5, True),
    "baddbmm: c + [4, 3, 5] x [4, 5, 7]": (Program(lambda w, _: torch.baddbmm(ones(4, 3, 7), numbers(4, 3, 5),
                                                                             ones(4, 5, 7))),
                                           "baddbmm", ACTIVATIONS, 4 * 3 * 7 * 5, True),
    "addbmm: c + the sum of [4, 3, 5] x [4, 5, 7]": (Program(lambda w, _: torch.addbmm(ones(3, 7), numbers(4, 3, 5),
                                                                                       ones(4, 5, 7))),
                                                     "addbmm", ACTIVATIONS, 4 * 3 * 7 * 5, None),
    "einsum of scores: bhtd,bhsd->bhts, [2, 3, 4, 5] and [2, 3, 6, 5]": (
        Program(lambda w, _: torch.einsum("bhtd,bhsd->bhts", numbers(2, 3, 4, 5), ones(2, 3, 6, 5))),
        "bmm", ACTIVATIONS, 2 * 3 * 4 * 6 * 5, True),
    "einsum with a weight: td,ed->te, [4, 5] and W [7, 5]": (
        Program(lambda w, _: torch.einsum("td,ed->te", numbers(4, 5), w["W"]), W=ones(7, 5)),
        "bmm", WEIGHTS, 4 * 7 * 5, True),
    "mv: W [7, 5] x v [5]": (Program(lambda w, _: w["W"] @ numbers(5), W=ones(7, 5)), "mv", WEIGHTS, 7 * 5, None),
    "addmv: c + W [7, 5] x v [5]": (Program(lambda w, _: torch.addmv(ones(7), w["W"], numbers(5)), W=ones(7, 5)),
                                    "addmv", WEIGHTS, 7 * 5, None),
    "dot: [5] . [5]": (Program(lambda w, _: numbers(5) @ ones(5)), "dot", ACTIVATIONS, 5, None),
    "a causal depthwise conv1d: 6 channels, 9 positions, kernel 4, padding 3": (
        Program(lambda w, _: F.conv1d(numbers(1, 6, 9), w["K"], groups=6, padding=3), K=ones(6, 1, 4)),
        "convolution", WEIGHTS, 6 * (9 + 3) * 4, True),
    "a conv1d of 6 channels into 4, 9 positions, kernel 3": (
        Program(lambda w, _: F.conv1d(numbers(1, 6, 9), w["K"]), K=ones(4, 6, 3)),
        "convolution", WEIGHTS, 4 * (9 - 3 + 1) * 6 * 3, True),
    "grouped_mm: 10 rows [10, 8] among 3 experts' [8, 4]": (
        Program(lambda w, _: torch._grouped_mm(numbers(10, 8), w["W"], offs=OFFSETS), W=ones(3, 8, 4)),
        "_grouped_mm", WEIGHTS, 10 * 4 * 8, False),
}  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_of_product_is_counted_by_the_rule_alone(kind):
    """Each kind of product torch dispatches, alone in a tiny program whose MACs are known in closed form: the dispatch
    counter counts it once, under its aten op and in its group (what its operands are), m p n MACs and nothing else
    (the elementwise work around it is not a product); FlopCounterMode counts the same, but for the experts' grouped
    product, for which it has no formula (crosscheck's reasons say so)."""
    from minitransformer.verbs.crosscheck import _tally

    program, op, group, macs, flop_counter_counts = KINDS[kind]
    tally = _tally(torch, program, [0, 1])
    counted = {g: ops for g, ops in tally.ops.items() if ops}
    assert counted == {group: {op: macs}}, f"counted {counted}, expected {group}: aten.{op} {macs} MACs"
    assert tally.dispatch == {g: macs if g == group else 0 for g in GROUPS}, tally.dispatch
    if flop_counter_counts is not None:
        expected = macs if flop_counter_counts else 0
        assert tally.flop_counter[group] == expected, f"FlopCounterMode {tally.flop_counter}, expected {expected}"


def test_a_triangular_solve_is_counted_as_its_forward_substitution():
    """linalg_solve_triangular, which no product kernel runs: a unit lower-triangular C x C system for n right-hand
    columns takes C (C - 1) / 2 MACs a column (row i: the i rows before it), kept beside the products."""
    from minitransformer.verbs.crosscheck import _tally

    C, n, batch = 6, 5, 3
    system = torch.eye(C).expand(batch, C, C) + torch.tril(ones(batch, C, C), -1)

    def solve(w, _):
        return torch.linalg.solve_triangular(system, numbers(batch, C, n), upper=False, unitriangular=True)

    tally = _tally(torch, Program(solve), [0, 1])
    assert tally.solves == {g: batch * n * C * (C - 1) // 2 if g == ACTIVATIONS else 0 for g in GROUPS}, tally.solves
    assert tally.dispatch_macs == 0, tally.ops  # no product kernel ran


@pytest.mark.parametrize(("family", "index"), [(f, i) for f in MAMBA1S for i in range(len(MODELS[f]))])
def test_a_mamba1_s_two_differences_are_named_and_exact(made, family, index):
    """transformers' slow path of the selective scan, written from its code (modeling_mamba.py's
    mamba_selective_scan, modeling_jamba.py's), not from ours: F.conv1d(padding=K - 1) makes T + K - 1 outputs a
    channel; Δ B x is formed by broadcast multiplies (no product dispatched); h C is one matmul a position, I N MACs.
    The products with weights differ by the conv's padded outputs alone, those of activations by our outer product
    x_dt ⊗ B alone (Jamba's attention layers: eager Q K^T and A V over all T x T pairs, H dh = D, in both)."""
    directory = made(family, index)
    model = load_model(directory)
    hf = transformers.AutoConfig.from_pretrained(directory)
    T = PROMPT
    if family == "jamba":
        I, N, K = hf.mamba_expand * hf.hidden_size, hf.mamba_d_state, hf.mamba_d_conv  # noqa: E741 - the symbol
        layers = hf.layers_block_type.count("mamba")
        attention = hf.layers_block_type.count("attention") * 2 * T * T * hf.hidden_size
    else:
        I, N, K = hf.intermediate_size, hf.state_size, hf.conv_kernel  # noqa: E741 - the symbol
        layers, attention = hf.num_hidden_layers, 0
    check = crosscheck(model, default_ids(model, T), dense_attention=True)
    groups = {g["group"]: g for g in check.groups()}
    assert groups[WEIGHTS]["dispatch_macs"] - groups[WEIGHTS]["ledger_macs"] == layers * I * K * (K - 1) > 0
    assert groups[ACTIVATIONS]["dispatch_macs"] == layers * T * I * N + attention  # h C, position by position
    assert groups[ACTIVATIONS]["ledger_macs"] == 2 * layers * T * I * N + attention  # and x_dt ⊗ B
    assert groups[LOGITS]["dispatch_macs"] == groups[LOGITS]["ledger_macs"] == T * hf.hidden_size * hf.vocab_size
    for g in groups.values():
        assert not any("UNEXPLAINED" in reason for reason in g["reasons"]), g["reasons"]
        if g["dispatch_macs"] != g["ledger_dense_macs"]:
            assert any(reason.endswith("MACs, exactly") for reason in g["reasons"]), g["reasons"]
    said = " ".join(groups[WEIGHTS]["reasons"] + groups[ACTIVATIONS]["reasons"])
    assert f"padding K - 1 = {K - 1}" in said and "broadcast multiplies" in said


def test_experts_torch_s_grouped_mm_refuses_run_one_by_one_and_it_says_so(tmp_path):
    """transformers 5.24 runs a mixture's experts through torch's grouped_mm, which refuses rows not a multiple of 16
    bytes (experts 10 wide in float32): crosscheck runs them eager, one by one, counts the same, and says why."""
    config = transformers.MixtralConfig(vocab_size=90, hidden_size=16, intermediate_size=10, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_local_experts=3,
                                        num_experts_per_tok=2, max_position_embeddings=64)  # fmt: skip
    save_random(tmp_path, config, spread=0.3)
    with pytest.raises(RuntimeError, match="16 bytes"):  # transformers' default path, as it stands
        with torch.no_grad():
            transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)(torch.tensor([[1, 2, 3]]))
    model = load_model(tmp_path)
    check = crosscheck(model, default_ids(model, 40), dense_attention=True)
    assert check.experts_one_by_one and check.to_dict()["experts_one_by_one"] is True
    groups = {g["group"]: g for g in check.groups()}
    for name in GROUPS:
        assert groups[name]["ledger_dense_macs"] == groups[name]["dispatch_macs"] > 0, (name, groups[name])
    assert "_grouped_mm" not in groups[WEIGHTS]["torch_ops"]
    assert any("ran one by one" in reason for reason in groups[WEIGHTS]["reasons"]), groups[WEIGHTS]["reasons"]
    assert not any("one by one" in reason for reason in groups[LOGITS]["reasons"])


def test_a_mixture_s_failure_outside_grouped_mm_is_not_taken_for_its_widths(tmp_path, monkeypatch):
    """Only a RuntimeError raised inside transformers' grouped_mm path sends the experts one by one: another (here a
    stand-in raised by the forward itself) is not hidden behind a rerun."""
    config = transformers.MixtralConfig(vocab_size=90, hidden_size=16, intermediate_size=16, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=8, num_local_experts=3,
                                        num_experts_per_tok=2, max_position_embeddings=64)  # fmt: skip
    save_random(tmp_path, config, spread=0.3)
    model = load_model(tmp_path)
    reruns = []

    def broken(torch, reference, ids):
        reruns.append(reference)
        raise RuntimeError("strides should be multiple of 16 bytes")  # grouped_mm's words, from elsewhere

    monkeypatch.setattr(crosscheck_module, "_tally", broken)
    with pytest.raises(RuntimeError, match="16 bytes"):
        crosscheck(model, default_ids(model, 20), dense_attention=True)
    assert len(reruns) == 1, reruns
