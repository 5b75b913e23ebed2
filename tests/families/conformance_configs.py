"""Every family's configs for the conformance suite (tests/families/test_conformance.py), in one place.

A family in the table (minitransformer.families.table.ARCHITECTURES) owes an entry here: its transformers config
class, its named configs (transformers' own keywords, plus `seed`, and `saved` where the checkpoint is saved in
another dtype than float32), the spread save_random moves the weights by, what changes transformers' model before it
is saved (a buffer save_random leaves alone), the prompt lengths its checks need (past a window, a chunk, a trained
length), and the options it refuses. The suite fails for a family without an entry. A family's own test module
reads its models through `made` too, so that each config is saved once for every check.

Importing this module needs torch and transformers (as tests/family_checks.py does).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import transformers
from family_checks import hash_tables_and_biases, moderate_decays, move_correction_biases, save_random

from minitransformer import load_model

SLIDING, FULL, LINEAR = "sliding_attention", "full_attention", "linear_attention"
NOT_A_DTYPE = ({"dtype": "float8_e4m3fn"}, "dtype")  # every family reads the checkpoint's dtype and refuses this


@dataclass(frozen=True)
class Family:
    """One family's configs and what its checks need of them."""

    config_class: str  # transformers' config class; a config may name another with the key `config_class`
    configs: dict[str, dict]  # name -> keywords of the config class, with `seed` (and optionally `saved`, `greedy`)
    spread: float = 0.2  # save_random's N(0, spread)
    moved: Callable | None = None  # moved(hf, seed): what changes transformers' model before it is saved again
    first_token: int = 0  # prompts' ids from here (1 where generate would read a 0 as padding)
    prompt: int = 150  # the parity prompt: past the attention row chunk (128) and every window or chunk
    greedy: int = 20  # the greedy run's prompt (30 tokens follow it), unless a config says `greedy`
    distinct: int = 4  # at least so many different greedy tokens (the logits spread), unless a config says
    batch: tuple[int, ...] = (9, 50, 3)  # the rows of the left-padded batch
    batch_configs: tuple[str, ...] | None = None  # None: every config
    float64: int = 60  # the float64 prompt
    float64_configs: tuple[str, ...] | None = None
    count: tuple[int, int] = (150, 4)  # prompt and new tokens of count = a real run = the closed form
    count_configs: tuple[str, ...] | None = None
    validate: tuple[str, ...] = ()  # the configs validate runs on (the first unless said)
    validate_steps: int = 6
    validate_says: tuple[str, ...] = ()  # what validate's report says of this family beside "all OK"
    refused: tuple[tuple[dict, str], ...] = field(default=(NOT_A_DTYPE,))  # config.json changes refused, and why

    def config_names(self, which: tuple[str, ...] | None = None) -> list[str]:
        return list(self.configs if which is None else which)

    def hf_config(self, name: str):
        options = {k: v for k, v in self.configs[name].items() if k not in ("seed", "saved", "greedy", "distinct")}
        return getattr(transformers, options.pop("config_class", self.config_class))(**options)

    def prompt_ids(self, name: str, n: int, seed: int = 0) -> list[int]:
        vocab = self.hf_config(name).vocab_size
        return np.random.default_rng(seed).integers(self.first_token, vocab, n).tolist()


# --- each family's configs: shapes, seeds and every option that changes the pass, on and off ----------------------
YARN = {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
        "original_max_position_embeddings": 64, "rope_theta": 1000.0}  # fmt: skip
PHI3_SHORT = [1.0, 1.1, 1.3, 1.5, 2.0, 2.5, 3.0, 4.0]
PHI3_LONG = [1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 13.0, 21.0]
QWEN3 = dict(vocab_size=151, max_position_embeddings=400, rms_norm_eps=1e-6)
OLMO2 = dict(vocab_size=151, max_position_embeddings=400, rms_norm_eps=1e-6, eos_token_id=None, pad_token_id=None)
NEMOTRON_H = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=48,
                  mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=16, n_groups=2, conv_kernel=4,
                  n_routed_experts=6, num_experts_per_tok=2, moe_intermediate_size=24,
                  moe_shared_expert_intermediate_size=40, n_group=2, topk_group=1, vocab_size=128,
                  max_position_embeddings=512)  # fmt: skip
PHI3 = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
QWEN3_ROPE = {"rope_type": "default", "rope_theta": 10_000.0}
LLAMA4 = dict(vocab_size=120, hidden_size=32, intermediate_size=16, num_attention_heads=4, head_dim=8,
              max_position_embeddings=256)  # fmt: skip
LLAMA4_LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                 "original_max_position_embeddings": 64, "rope_theta": 10_000.0}  # fmt: skip
QWEN3_WINDOW = 24
LFM2 = dict(vocab_size=120, max_position_embeddings=256, eos_token_id=None, pad_token_id=None)
GLM4_MOE = dict(vocab_size=120, max_position_embeddings=256)
GLM4_MOE_LITE = dict(
    vocab_size=120, max_position_embeddings=256, bos_token_id=None, eos_token_id=None, pad_token_id=None
)
GLM_MOE_DSA = dict(
    vocab_size=120,
    hidden_size=32,
    intermediate_size=48,
    moe_intermediate_size=16,
    num_attention_heads=4,
    num_key_value_heads=4,
    q_lora_rank=24,
    kv_lora_rank=16,
    qk_rope_head_dim=8,
    qk_nope_head_dim=12,
    v_head_dim=10,
    max_position_embeddings=256,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
MINIMAX_M2 = dict(vocab_size=120, max_position_embeddings=256, bos_token_id=None, eos_token_id=None)
DEEPSEEK_V4 = dict(vocab_size=120, hidden_size=32, num_attention_heads=4, head_dim=16, partial_rotary_factor=0.5,
                   q_lora_rank=24, o_lora_rank=8, index_n_heads=16, index_head_dim=16, n_routed_experts=4,
                   num_experts_per_tok=2, moe_intermediate_size=16, sliding_window=16, max_position_embeddings=512,
                   bos_token_id=None, eos_token_id=None, pad_token_id=None)  # fmt: skip
V4_RATES = {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16}
SMOLLM3 = dict(vocab_size=151, max_position_embeddings=400, bos_token_id=None, eos_token_id=None, pad_token_id=None)
GLM4 = dict(vocab_size=120, max_position_embeddings=256, pad_token_id=None)
ERNIE = dict(vocab_size=120, max_position_embeddings=256, pad_token_id=None, bos_token_id=None, eos_token_id=None)
COHERE2 = ERNIE  # pad 0, bos 5 and eos within a tiny vocabulary: none
OLMO3 = dict(OLMO2, sliding_window=QWEN3_WINDOW)
EXAONE4 = dict(SMOLLM3, rms_norm_eps=1e-6)
LLAMA3 = {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}  # fmt: skip
SEED_OSS = dict(vocab_size=140, max_position_embeddings=400, bos_token_id=None, eos_token_id=None, pad_token_id=None)
KIMI = dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=16, num_attention_heads=4,
            num_key_value_heads=4, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
            model_max_length=512, bos_token_id=None, eos_token_id=None, pad_token_id=None)  # fmt: skip


def kimi_moved(hf, seed: int) -> None:
    """Kimi Linear's KDA decays moderated (as Qwen3.5's) and its routers' correction biases moved."""
    moderate_decays(hf, seed)
    move_correction_biases(hf, seed)


def scale_layer_scalars(hf, seed: int) -> None:
    """Gemma 4's layer_scalar buffers (ones in transformers' random model, which N(0, spread) leaves: no parameters)
    spread over [0.5, 1.5], so that a layer scaled by the wrong one shows."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, buffer in hf.named_buffers():
            if name.endswith("layer_scalar"):
                buffer.copy_(0.5 + torch.rand(buffer.shape, generator=generator))


GEMMA4 = dict(vocab_size=130, vocab_size_per_layer_input=130, max_position_embeddings=256, pad_token_id=None,
              bos_token_id=None, eos_token_id=None)  # fmt: skip
GEMMA4_ROPE = {FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.5, "rope_theta": 5000.0},
               SLIDING: {"rope_type": "default", "rope_theta": 100.0}}  # fmt: skip
GEMMA4_WINDOW = 7

MINIMAX = dict(vocab_size=120, hidden_size=32, intermediate_size=16, max_position_embeddings=512, bos_token_id=None,
               eos_token_id=None, pad_token_id=None)  # fmt: skip
GRANITE = dict(vocab_size=120, hidden_size=32, intermediate_size=12, shared_intermediate_size=20,
               num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, mamba_n_heads=8, mamba_n_groups=2,
               mamba_d_state=8, mamba_chunk_size=16, max_position_embeddings=256, eos_token_id=None)  # fmt: skip
FALCON_H1 = dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=16, mamba_d_ssm=48, mamba_n_heads=6, mamba_d_head=8,
                 mamba_n_groups=2, mamba_d_state=8, mamba_d_conv=4, mamba_chunk_size=16, embedding_multiplier=2.0,
                 lm_head_multiplier=0.5, mlp_multipliers=[0.8, 0.6], key_multiplier=0.4, attention_in_multiplier=0.9,
                 attention_out_multiplier=0.7, ssm_multipliers=[0.5, 0.6, 0.7, 0.8, 0.9], ssm_in_multiplier=1.1,
                 ssm_out_multiplier=1.2, max_position_embeddings=256, eos_token_id=None)  # fmt: skip
MAMBA = dict(bos_token_id=None, eos_token_id=None, pad_token_id=None)  # 0 by default: within any vocabulary
JAMBA = dict(vocab_size=96, hidden_size=32, intermediate_size=24, num_attention_heads=4, num_key_value_heads=2,
             mamba_d_state=8, num_experts=4, max_position_embeddings=256, eos_token_id=None)  # fmt: skip
BAMBA = dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
             num_key_value_heads=2, mamba_n_heads=8, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=16,
             max_position_embeddings=256, eos_token_id=None)  # fmt: skip

FAMILIES: dict[str, Family] = {
    # A few heads of odd sizes, an inner size that is not 4 D, exact GELU with the layer-scaled attention, SiLU
    # unscaled and untied.
    "gpt2": Family("GPT2Config", {
        "heads5-inner37": dict(n_layer=2, n_head=5, n_embd=80, n_inner=37, n_positions=200, vocab_size=777,
                               layer_norm_epsilon=1e-2, seed=7),
        "exact-gelu-layer-scaled": dict(n_layer=3, n_head=6, n_embd=48, n_positions=200, vocab_size=300,
                                        activation_function="gelu", scale_attn_by_inverse_layer_idx=True, seed=8),
        "untied-unscaled-silu": dict(n_layer=1, n_head=4, n_embd=32, n_inner=8, n_positions=200, vocab_size=64,
                                     activation_function="silu", scale_attn_weights=False, tie_word_embeddings=False,
                                     seed=9),
    }, refused=(NOT_A_DTYPE, ({"activation_function": "gelu_accurate"}, "gelu_accurate"))),
    # Llama, Mistral and Qwen2: grouped heads with biases, one key/value head tied with llama3's rope, a window,
    # Qwen2's q/k/v biases in a bfloat16 checkpoint with YaRN in an older file's rope_scaling (as Qwen's model cards
    # tell to add it for long prompts), the prompts past its original context.
    "llama": Family("LlamaConfig", {
        "llama-gqa-bias": dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, attention_bias=True, mlp_bias=True, vocab_size=120,
                               max_position_embeddings=256, seed=3),
        "llama3-mqa-tied": dict(hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                                num_key_value_heads=1, tie_word_embeddings=True, vocab_size=110,
                                max_position_embeddings=256,
                                rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                                 "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                 "original_max_position_embeddings": 64}, seed=4),
        "mistral-window": dict(config_class="MistralConfig", hidden_size=32, intermediate_size=48,
                               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                               sliding_window=24, vocab_size=100, max_position_embeddings=256, seed=5),
        "qwen2-bias-bf16-yarn": dict(config_class="Qwen2Config", hidden_size=24, intermediate_size=40,
                                num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1, vocab_size=130,
                                max_position_embeddings=256, seed=6, saved="bfloat16",
                                rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64}),
    }, validate=("llama3-mqa-tied", "qwen2-bias-bf16-yarn"), validate_steps=8,
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"))),
    # A head size that is not D / H, grouped or not, biases or not, tied or not, no window, a window on the layers
    # from max_window_layers on, a window on every layer, layer_types given outright.
    "qwen3": Family("Qwen3Config", {
        "tied-gqa": dict(QWEN3, hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, tie_word_embeddings=True, rope_parameters=QWEN3_ROPE,
                         seed=0),
        "bias-window-from-layer-1": dict(QWEN3, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                         num_attention_heads=6, num_key_value_heads=2, head_dim=8,
                                         attention_bias=True, use_sliding_window=True, sliding_window=QWEN3_WINDOW,
                                         max_window_layers=1, rope_parameters=QWEN3_ROPE, seed=1),
        "mha-window-everywhere-yarn": dict(QWEN3, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=2, head_dim=12,
                                      use_sliding_window=True, sliding_window=QWEN3_WINDOW, max_window_layers=0,
                                      rope_parameters={"rope_type": "yarn", "rope_theta": 1_000_000.0, "factor": 4.0,
                                                       "original_max_position_embeddings": 100, "beta_fast": 16.0,
                                                       "beta_slow": 2.0, "attention_factor": 0.8782488562869419},
                                      seed=2),
        "layer-types": dict(QWEN3, hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4,
                            num_key_value_heads=1, head_dim=8, use_sliding_window=True, sliding_window=QWEN3_WINDOW,
                            layer_types=[SLIDING, FULL, SLIDING], rope_parameters=QWEN3_ROPE, seed=3),
    }, spread=0.3, first_token=1, greedy=2 * QWEN3_WINDOW, batch=(40, 9, 30), float64=140,
        count=(2 * QWEN3_WINDOW + 3, 4), validate=("bias-window-from-layer-1",), validate_steps=3,
        validate_says=("its q and k norms included",)),
    # Gemma 2 as published, shrunk (both soft-caps, a window of 7); without soft-caps, with biases, untied, exact
    # GELU; Gemma 3 with q and k norms, a local rotary base, linear scaling on the full layers only; Gemma 3's
    # default rule with a final soft-cap. Tied, a random Gemma repeats one token (each step's logits still checked).
    "gemma": Family("Gemma2Config", {
        "gemma2-softcaps-window7": dict(
            hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=150, max_position_embeddings=200, sliding_window=7, query_pre_attn_scalar=20,
            attn_logit_softcapping=8.0, final_logit_softcapping=30.0, seed=11, distinct=1),
        "gemma2-bias-untied-no-caps": dict(
            hidden_size=24, intermediate_size=40, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
            head_dim=10, vocab_size=130, max_position_embeddings=180, sliding_window=5, query_pre_attn_scalar=10,
            attn_logit_softcapping=None, final_logit_softcapping=None, attention_bias=True, tie_word_embeddings=False,
            hidden_activation="gelu", layer_types=[FULL, SLIDING],
            rope_parameters={"rope_type": "default", "rope_theta": 500.0}, seed=11),
        "gemma3-local-rope-linear": dict(
            config_class="Gemma3TextConfig", hidden_size=32, intermediate_size=48, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=1, head_dim=16, vocab_size=160, max_position_embeddings=200,
            sliding_window=6, query_pre_attn_scalar=16, layer_types=[SLIDING, SLIDING, FULL, SLIDING],
            rope_parameters={FULL: {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0},
                             SLIDING: {"rope_type": "default", "rope_theta": 100.0}}, seed=11, distinct=1),
        "gemma3-pattern6-final-cap": dict(
            config_class="Gemma3TextConfig", hidden_size=16, intermediate_size=24, num_hidden_layers=6,
            num_attention_heads=2, num_key_value_heads=2, head_dim=8, vocab_size=120, max_position_embeddings=170,
            sliding_window=9, final_logit_softcapping=20.0, tie_word_embeddings=False, seed=11),
    }, spread=0.3, batch=(12, 37, 5), count=(140, 4), validate=("gemma2-softcaps-window7", "gemma3-local-rope-linear")),
    # One key/value head per query head or grouped, biases or not, a head_dim given outright (Olmo2Config has none;
    # its attention reads one), tied or not, linear rope scaling.
    "olmo2": Family("Olmo2Config", {
        "mha-yarn": dict(OLMO2, hidden_size=32, intermediate_size=72, num_hidden_layers=2, num_attention_heads=4,
                         rope_parameters={"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 8.0,
                                          "original_max_position_embeddings": 50, "mscale": 1.0,
                                          "mscale_all_dim": 0.5}, seed=0),
        "gqa-bias-head-dim": dict(OLMO2, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                  num_attention_heads=6, num_key_value_heads=2, head_dim=12, attention_bias=True,
                                  seed=1),
        "tied-linear-rope": dict(OLMO2, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                 num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                 rope_parameters={"rope_type": "linear", "rope_theta": 500_000.0, "factor": 2.0},
                                 seed=2),
    }, spread=0.5, first_token=1, greedy=40, distinct=3, batch=(40, 9, 30), float64=140, count=(30, 4),
        validate=("gqa-bias-head-dim",), validate_steps=3,
        validate_says=("OLMo 2 computes RMSNorm, its q and k norms included",)),
    # Three sliding layers to a full one (the default), grouped, YaRN past its original context of 64 on the full
    # layers alone (an older file's rope_scaling, which Olmo3Config gives them), the sliding ones at their own default
    # rope; a full layer first, one key/value head a query head, biases, a head_dim given outright, a rope per layer
    # type of other thetas; every layer sliding, tied, the sliding layers' rope linear and YaRN's factors given.
    "olmo3": Family("Olmo3Config", {
        "yarn-on-full-3-to-1": dict(OLMO3, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                    num_attention_heads=4, num_key_value_heads=2, rope_theta=1000.0,
                                    rope_scaling={"rope_type": "yarn", "factor": 4.0, "truncate": False,
                                                  "original_max_position_embeddings": 64}, seed=0),  # truncate: unread
        "full-first-bias-thetas": dict(OLMO3, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                       num_attention_heads=6, head_dim=12, attention_bias=True,
                                       layer_types=[FULL, SLIDING, SLIDING],
                                       rope_parameters={FULL: {"rope_type": "default", "rope_theta": 5000.0},
                                                        SLIDING: {"rope_type": "default", "rope_theta": 100.0}},
                                       seed=1),
        "all-sliding-tied-linear": dict(OLMO3, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=True,
                                        layer_types=[SLIDING, SLIDING],
                                        rope_parameters={FULL: {**YARN, "attention_factor": 1.3},
                                                         SLIDING: {"rope_type": "linear", "factor": 2.0,
                                                                   "rope_theta": 500.0}}, seed=2),
    }, spread=0.5, first_token=1, greedy=2 * QWEN3_WINDOW, distinct=3, batch=(40, 9, 30), float64=140,
        count=(2 * QWEN3_WINDOW + 3, 4), validate=("yarn-on-full-3-to-1", "full-first-bias-thetas"),
        validate_steps=3, validate_says=("OLMo 3 computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "yarn", "factor": 2.0}}, "a rope per layer type"),
                 ({"rope_parameters": {FULL: {"rope_type": "dynamic", "factor": 2.0}}}, "dynamic"),
                 ({"sliding_window": None}, "sliding_window is null"))),
    # NoPE every fourth layer (the default), grouped and tied; a window on the NoPE layers (the default where
    # use_sliding_window), every other layer NoPE, biases on attention and the MLP, a head_dim given outright (its
    # attention reads one), untied; no_rope_layers and layer_types given outright, every kind of layer (NoPE first),
    # YaRN (150 positions are past its original context of 64). A window of 24: the prompts go past it.
    "smollm3": Family("SmolLM3Config", {
        "nope-every-4th-tied": dict(SMOLLM3, hidden_size=32, intermediate_size=72, num_hidden_layers=4,
                                    num_attention_heads=4, num_key_value_heads=2, rope_parameters=QWEN3_ROPE, seed=0),
        "window-on-nope-biases": dict(SMOLLM3, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                      num_attention_heads=6, num_key_value_heads=2, head_dim=12, attention_bias=True,
                                      mlp_bias=True, tie_word_embeddings=False, use_sliding_window=True,
                                      sliding_window=QWEN3_WINDOW, no_rope_layer_interval=2,
                                      rope_parameters=QWEN3_ROPE, seed=1),
        "every-kind-yarn": dict(SMOLLM3, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                num_attention_heads=4, num_key_value_heads=1, head_dim=8, use_sliding_window=True,
                                sliding_window=QWEN3_WINDOW, no_rope_layers=[0, 1, 1, 0],
                                layer_types=[SLIDING, FULL, SLIDING, FULL], rope_parameters=YARN, seed=2),
    }, spread=0.3, first_token=1, greedy=2 * QWEN3_WINDOW, batch=(40, 9, 30), float64=140,
        count=(2 * QWEN3_WINDOW + 3, 4), validate=("window-on-nope-biases", "every-kind-yarn"), validate_steps=3,
        validate_says=("SmolLM3 computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"no_rope_layers": [1, 1]}, "no_rope_layers must name"),
                 ({"layer_types": [SLIDING, FULL, FULL, FULL]}, "use_sliding_window is false"))),
    # Half of each head turned in neighbouring pairs (GLM-4-0414's), q/k/v biases, grouped heads; every number turned,
    # no biases, tied, one key/value head a query head; a quarter turned under YaRN (150 positions are past its
    # original context of 64), one key/value head. Glm4Config's pad id is past a tiny vocabulary: none.
    "glm4": Family("Glm4Config", {
        "half-rotary-biases": dict(GLM4, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, seed=0),
        "full-rotary-tied": dict(GLM4, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                 num_attention_heads=4, num_key_value_heads=4, head_dim=8, attention_bias=False,
                                 tie_word_embeddings=True, rms_norm_eps=1e-5,
                                 rope_parameters={"rope_type": "default", "rope_theta": 500.0,
                                                  "partial_rotary_factor": 1.0}, seed=1),
        "quarter-rotary-yarn": dict(GLM4, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=3, num_key_value_heads=1, head_dim=16,
                                    rope_parameters={**YARN, "partial_rotary_factor": 0.25}, seed=2),
    }, spread=0.3, first_token=1, batch=(40, 9, 30), float64=140, count=(140, 4), validate_steps=3,
        validate_says=("GLM-4 computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"rope_parameters": {"rope_theta": 1e4, "partial_rotary_factor": 0.1875}}, "turns 3 of each"))),
    # Neighbouring pairs turned over whole heads: every bias (use_bias), grouped, q wider than D, tied (ERNIE-4.5-0.3B's
    # shape in small); no biases, untied, D / H heads (head_dim null); one key/value head under llama3's rope.
    "ernie4_5": Family("Ernie4_5Config", {
        "biases-wide-q-tied": dict(ERNIE, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16, use_bias=True, seed=0),
        "no-bias-untied": dict(ERNIE, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                               num_attention_heads=6, num_key_value_heads=2, head_dim=None,
                               tie_word_embeddings=False, seed=1),
        "mqa-llama3": dict(ERNIE, hidden_size=32, intermediate_size=40, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=1, head_dim=8, use_bias=True,
                           rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0,
                                            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 64}, seed=2),
    }, spread=0.3, batch=(40, 9, 30), float64=140, count=(140, 4), validate=("biases-wide-q-tied", "mqa-llama3"),
        validate_steps=3, validate_says=("ERNIE 4.5 computes RMSNorm, the rotary tables, the rotation",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"))),
    # Three sliding layers of four, rotary on the sliding ones alone, a logit scale, grouped, tied (Command R7B in
    # small); an older file's sliding_window_pattern 3, biases on q, k, v and o, a head wider than D / H, untied; its
    # layers given outright, a full (NoPE) layer first, one key/value head, YaRN. A window of 24: the prompts pass it.
    "cohere2": Family("Cohere2Config", {
        "pattern-4-tied": dict(COHERE2, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                               num_attention_heads=4, num_key_value_heads=2, sliding_window=QWEN3_WINDOW,
                               logit_scale=0.25, seed=0),
        "pattern-3-biases-untied": dict(COHERE2, hidden_size=32, intermediate_size=40, num_hidden_layers=6,
                                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                        sliding_window=QWEN3_WINDOW, sliding_window_pattern=3, attention_bias=True,
                                        tie_word_embeddings=False, logit_scale=0.5, seed=1),
        "full-first-mqa-yarn": dict(COHERE2, hidden_size=48, intermediate_size=64, num_hidden_layers=3,
                                    num_attention_heads=6, num_key_value_heads=1, sliding_window=QWEN3_WINDOW,
                                    layer_types=[FULL, SLIDING, SLIDING], rope_parameters=YARN, seed=2),
    }, spread=0.3, greedy=2 * QWEN3_WINDOW, batch=(40, 9, 30), float64=140, count=(2 * QWEN3_WINDOW + 3, 4),
        validate=("pattern-4-tied", "full-first-mqa-yarn"), validate_steps=3,
        validate_says=("Cohere2 computes its LayerNorms, the rotary tables and the rotation",),
        refused=(NOT_A_DTYPE, ({"use_parallel_block": False}, "use_parallel_block=false"),
                 ({"position_embedding_type": "rope"}, "position_embedding_type"),
                 ({"sliding_window": None}, "sliding_window is null"))),
    # Every bias on (q, k, v; o under attention_out_bias; the MLP's) with q wider than D; the published combination
    # (q, k, v biased, o and the MLP not) with one key/value head and llama3's rope; no bias at all, D / H heads
    # (head_dim null), as many key/value heads as query heads (null), tied, YaRN past its original context of 64.
    "seed_oss": Family("SeedOssConfig", {
        "every-bias-wide-q": dict(SEED_OSS, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                                  num_attention_heads=4, num_key_value_heads=2, head_dim=16, attention_out_bias=True,
                                  mlp_bias=True, rope_parameters=QWEN3_ROPE, seed=0),
        "published-biases-mqa-llama3": dict(SEED_OSS, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                            num_attention_heads=6, num_key_value_heads=1, head_dim=8,
                                            rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0,
                                                             "factor": 4.0, "low_freq_factor": 1.0,
                                                             "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 64}, seed=1),
        "no-bias-tied-yarn": dict(SEED_OSS, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                                  num_attention_heads=2, num_key_value_heads=None, head_dim=None,
                                  attention_bias=False, tie_word_embeddings=True, rope_parameters=YARN, seed=2),
    }, spread=0.3, first_token=1, batch=(40, 9, 30), validate=("every-bias-wide-q", "no-bias-tied-yarn"),
        validate_steps=3, validate_says=("Seed-OSS computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
                  "partial_rotary_factor"))),
    # A full layer in every two (sliding_window_pattern), NoPE as a window is set, grouped, llama3's rope; no window
    # (EXAONE-4.0-1.2B's shape): every layer full and turned, one key/value head, tied; a NoPE full layer first, one
    # key/value head a query head, q wider than D, YaRN past its original context of 64 on the sliding layers.
    "exaone4": Family("Exaone4Config", {
        "pattern-2-nope-llama3": dict(EXAONE4, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                      sliding_window=QWEN3_WINDOW, sliding_window_pattern=2, rope_parameters=LLAMA3,
                                      seed=0),
        "no-window-all-rope-tied": dict(EXAONE4, hidden_size=24, intermediate_size=40, num_hidden_layers=3,
                                        num_attention_heads=2, num_key_value_heads=1, sliding_window=None,
                                        layer_types=[FULL] * 3, tie_word_embeddings=True, rope_parameters=QWEN3_ROPE,
                                        seed=1),
        "nope-first-mha-yarn": dict(EXAONE4, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                    num_attention_heads=4, num_key_value_heads=4, head_dim=12,
                                    sliding_window=QWEN3_WINDOW, layer_types=[FULL, SLIDING, SLIDING],
                                    rope_parameters=YARN, seed=2),
    }, spread=0.5, first_token=1, greedy=2 * QWEN3_WINDOW, distinct=3, batch=(40, 9, 30), float64=140,
        count=(2 * QWEN3_WINDOW + 3, 4), validate=("pattern-2-nope-llama3", "nope-first-mha-yarn"),
        validate_steps=3, validate_says=("EXAONE 4 computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"layer_types": None, "sliding_window_pattern": "LLLG"}, "sliding_window_pattern='LLLG' without"),
                 ({"layer_types": None, "sliding_window": None}, "sliding_window=null without layer_types"),
                 ({"layer_types": [FULL] * 4}, "with no sliding_attention layer"))),
    # Pythia's shape in small (a quarter of each head rotated, parallel residual); serial with half rotated in
    # float16 and old-style keys; the whole head rotated, no biases, tied; an odd share (int(20 x 0.25) = 5) in
    # bfloat16 (Pythia's checkpoints are float16; ours read them as transformers does, upcast to float32).
    "neox": Family("GPTNeoXConfig", {
        "pythia-like": dict(hidden_size=32, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                            vocab_size=150, max_position_embeddings=200, seed=11),
        "serial-half-rotary": dict(hidden_size=48, intermediate_size=80, num_hidden_layers=3, num_attention_heads=3,
                                   vocab_size=130, max_position_embeddings=200, use_parallel_residual=False,
                                   rotary_pct=0.5, rotary_emb_base=500, hidden_act="gelu_new", seed=5,
                                   saved="float16"),
        "full-rotary-tied-no-bias": dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=2, vocab_size=120, max_position_embeddings=200,
                                         attention_bias=False, tie_word_embeddings=True, layer_norm_eps=1e-3,
                                         rope_parameters={"rope_type": "default", "rope_theta": 1000.0,
                                                          "partial_rotary_factor": 1.0}, seed=3),
        "odd-share-serial": dict(hidden_size=40, intermediate_size=56, num_hidden_layers=2, num_attention_heads=2,
                                 vocab_size=110, max_position_embeddings=200, use_parallel_residual=False,
                                 hidden_act="relu", seed=7, saved="bfloat16"),
    }, distinct=3, batch=(40, 17, 7), float64_configs=("pythia-like", "odd-share-serial"), count=(20, 6),
        count_configs=("pythia-like", "serial-half-rotary"), validate=("serial-half-rotary",), validate_steps=8,
        refused=(NOT_A_DTYPE, ({"hidden_act": "gelu_accurate"}, "gelu_accurate"))),
    # LongRoPE trained on 100 positions (the greedy prompt of 105 takes the long factors), and on a quarter of
    # each head with the factor and attention factor given; half of each head turned with a window of 7, tied, gelu.
    "phi3": Family("Phi3Config", {
        "gqa": dict(PHI3, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=101, max_position_embeddings=300, seed=3),
        "partial-window-tied": dict(PHI3, hidden_size=48, intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
                                    vocab_size=120, max_position_embeddings=300, sliding_window=7,
                                    partial_rotary_factor=0.5, rope_theta=500.0, tie_word_embeddings=True,
                                    hidden_act="gelu_pytorch_tanh", seed=4),
        "longrope-mqa": dict(PHI3, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                             num_key_value_heads=1, vocab_size=90, max_position_embeddings=400,
                             original_max_position_embeddings=100,
                             rope_scaling={"type": "longrope", "short_factor": PHI3_SHORT, "long_factor": PHI3_LONG},
                             seed=5, greedy=105),
        "longrope-partial-window": dict(PHI3, hidden_size=64, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, vocab_size=150,
                                        max_position_embeddings=300, original_max_position_embeddings=120,
                                        sliding_window=40,
                                        rope_parameters={"rope_type": "longrope", "rope_theta": 2000.0,
                                                         "partial_rotary_factor": 0.25,
                                                         "short_factor": PHI3_SHORT[:2], "long_factor": PHI3_LONG[:2],
                                                         "attention_factor": 1.3, "factor": 3.0}, seed=6, greedy=60),
    }, first_token=1, batch=(30, 17, 25), float64=150, count=(140, 5), validate=("partial-window-tied",),
        validate_steps=8),
    # E = 4..8, k = 1 and 2, with and without a window, q wider than D, tied embeddings, rope scaling, one key/value
    # head.
    "mixtral": Family("MixtralConfig", {
        "e4_k2_window": dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                             num_experts_per_tok=2, sliding_window=40, max_position_embeddings=256, seed=11),
        "e8_k1_tied_yarn": dict(vocab_size=200, hidden_size=48, intermediate_size=32, num_hidden_layers=3,
                           num_attention_heads=4, num_key_value_heads=1, head_dim=16, num_local_experts=8,
                           num_experts_per_tok=1, tie_word_embeddings=True, max_position_embeddings=256,
                           rope_parameters={"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 2.0,
                                            "original_max_position_embeddings": 128, "truncate": False}, seed=5),
        "e6_k2_linear_rope": dict(vocab_size=160, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                  num_attention_heads=2, num_key_value_heads=2, num_local_experts=6,
                                  num_experts_per_tok=2,
                                  rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0},
                                  max_position_embeddings=256, seed=3),
    }, batch_configs=("e4_k2_window", "e8_k1_tied_yarn"), float64_configs=("e4_k2_window", "e6_k2_linear_rope"),
        validate_steps=8,
        refused=(NOT_A_DTYPE, ({"attention_bias": True}, "attention"))),
    # E = 4..8, k = 1..3, the gates renormalised or not, dense layers from mlp_only_layers and from
    # decoder_sparse_step 2, a window, q wider than D, one key/value head, tied embeddings, attention biases, rope
    # scaling, a checkpoint saved in bfloat16 (as Qwen's are).
    "qwen3_moe": Family("Qwen3MoeConfig", {
        "e6_k2_mlp_only_tied": dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=3,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    moe_intermediate_size=24, num_experts=6, num_experts_per_tok=2,
                                    mlp_only_layers=[1], tie_word_embeddings=True, max_position_embeddings=256,
                                    seed=5),
        "e8_k3_step2_window_norm": dict(vocab_size=160, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                                        num_attention_heads=4, num_key_value_heads=1, moe_intermediate_size=16,
                                        num_experts=8, num_experts_per_tok=3, norm_topk_prob=True,
                                        decoder_sparse_step=2, use_sliding_window=True, sliding_window=40,
                                        max_position_embeddings=256, seed=5),
        "e4_k1_sparse_bias_yarn": dict(vocab_size=100, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=2, head_dim=8,
                                       moe_intermediate_size=12, num_experts=4, num_experts_per_tok=1,
                                       attention_bias=True,
                                       rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 500.0,
                                                        "original_max_position_embeddings": 64},
                                       max_position_embeddings=256, seed=3, saved="bfloat16"),
    }, batch_configs=("e6_k2_mlp_only_tied", "e8_k3_step2_window_norm"),
        float64_configs=("e6_k2_mlp_only_tied", "e8_k3_step2_window_norm"), validate=("e8_k3_step2_window_norm",),
        refused=(NOT_A_DTYPE, ({"num_experts_per_tok": 500}, "num_experts_per_tok=500"))),
    # ERNIE-4.5-21B-A3B's layout in small (a dense first layer, then experts with two shared, every bias, the logits'
    # too, tied); experts every second layer from layer 0 through 2, no shared ones, no biases, untied; one shared, k 2
    # of 8, a moe_norm_min that the chosen probabilities often sum below (the floor divides), YaRN. The correction
    # biases are Parameters, which save_random moves, so that they change the choice.
    "ernie4_5_moe": Family("Ernie4_5_MoeConfig", {
        "dense-first-shared-biases": dict(ERNIE, hidden_size=32, intermediate_size=48, moe_intermediate_size=12,
                                          num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                          moe_num_experts=6, moe_k=2, moe_num_shared_experts=2, use_bias=True, seed=0),
        "interval-2-no-shared-untied": dict(ERNIE, hidden_size=32, intermediate_size=40, moe_intermediate_size=16,
                                            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
                                            moe_num_experts=4, moe_k=1, moe_num_shared_experts=0,
                                            moe_layer_start_index=0, moe_layer_end_index=2, moe_layer_interval=2,
                                            tie_word_embeddings=False, seed=1),
        "floor-one-shared-yarn": dict(ERNIE, hidden_size=48, intermediate_size=32, moe_intermediate_size=8,
                                      num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
                                      moe_num_experts=8, moe_k=2, moe_num_shared_experts=1, moe_layer_start_index=0,
                                      moe_norm_min=0.5, rope_parameters=YARN, seed=2),
    }, spread=0.3, batch=(40, 9, 30), float64=140, count=(140, 4),
        validate=("dense-first-shared-biases", "floor-one-shared-yarn"), validate_steps=3,
        validate_says=("ERNIE 4.5 computes RMSNorm, the rotary tables, the rotation and a mixture's router",),
        refused=(NOT_A_DTYPE, ({"moe_k": 9}, "moe_k=9 exceeds moe_num_experts=6"),
                 ({"moe_layer_end_index": -2}, "moe_layer_end_index"))),
    # E = 4..8, k = 1..3; windows alternating (transformers' default layer_types), chosen per layer, or none; YaRN
    # (truncated or not, its attention factor given or derived) and the default rope; attention biases on and off;
    # tied embeddings; one key/value head; a swiglu_limit low enough that the clamps bite.
    "gpt_oss": Family("GptOssConfig", {
        "e4_k2_yarn_alternating": dict(vocab_size=120, hidden_size=32, intermediate_size=24, num_hidden_layers=3,
                                       num_attention_heads=4, num_key_value_heads=2, head_dim=8, num_local_experts=4,
                                       num_experts_per_tok=2, sliding_window=24, max_position_embeddings=256,
                                       rope_parameters=YARN, seed=11),
        "e8_k1_tied_no_bias_clamped": dict(vocab_size=200, hidden_size=48, intermediate_size=32, num_hidden_layers=3,
                                           num_attention_heads=4, num_key_value_heads=1, head_dim=16,
                                           num_local_experts=8, num_experts_per_tok=1, sliding_window=40,
                                           attention_bias=False, layer_types=[FULL, SLIDING, SLIDING],
                                           tie_word_embeddings=True, swiglu_limit=1.0, max_position_embeddings=256,
                                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, seed=5),
        "e6_k3_full_yarn_truncated": dict(vocab_size=160, hidden_size=16, intermediate_size=20, num_hidden_layers=2,
                                          num_attention_heads=2, num_key_value_heads=2, head_dim=8,
                                          num_local_experts=6, num_experts_per_tok=3, layer_types=[FULL] * 2,
                                          max_position_embeddings=256, swiglu_alpha=1.2,
                                          rope_parameters={**YARN, "truncate": True, "factor": 8.0,
                                                           "attention_factor": 1.3, "beta_fast": 16.0},
                                          seed=3),
    }, batch_configs=("e4_k2_yarn_alternating", "e8_k1_tied_no_bias_clamped"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "mxfp4"}}, "quantization_config"))),
    # q through the low-rank bottleneck or one q_proj, 1 to 4 groups of experts, 0 to 2 dense first layers,
    # interleaved rotary pairs or not, norm_topk_prob on and off, 1 or 2 shared experts, tied embeddings, linear rope
    # scaling, YaRN (DeepSeek-V3's own rope type; 150 positions are past the original context of 32). The routers'
    # correction biases are moved, so that the bias changes the choice.
    "deepseek_v3": Family("DeepseekV3Config", {
        "lora_groups_dense": dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                                  num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                                  n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2,
                                  first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8,
                                  qk_nope_head_dim=12, v_head_dim=10, max_position_embeddings=256, seed=7),
        "plain_q_tied": dict(vocab_size=160, hidden_size=24, intermediate_size=40, moe_intermediate_size=12,
                             num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=3, n_routed_experts=6,
                             num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=0,
                             q_lora_rank=None, kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=16,
                             rope_interleave=False, norm_topk_prob=False, n_shared_experts=2,
                             routed_scaling_factor=1.5, tie_word_embeddings=True, max_position_embeddings=256, seed=5),
        "linear_rope_two_dense": dict(vocab_size=100, hidden_size=40, intermediate_size=24, moe_intermediate_size=8,
                                      num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2,
                                      n_routed_experts=12, num_experts_per_tok=4, n_group=3, topk_group=2,
                                      first_k_dense_replace=2, q_lora_rank=16, kv_lora_rank=20, qk_rope_head_dim=6,
                                      qk_nope_head_dim=10, v_head_dim=8,
                                      rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0},
                                      max_position_embeddings=256, seed=3),
        "yarn": dict(vocab_size=100, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                     num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1, q_lora_rank=24,
                     kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
                     max_position_embeddings=256, seed=13,
                     rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 500.0,
                                      "original_max_position_embeddings": 32, "mscale": 0.707,
                                      "mscale_all_dim": 1.3}),
    }, moved=move_correction_biases, batch_configs=("lora_groups_dense", "plain_q_tied"),
        float64_configs=("lora_groups_dense", "plain_q_tied", "yarn"), validate_steps=8,
        refused=(NOT_A_DTYPE, ({"attention_bias": True}, "attention_bias"),
                 ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"))),
    # An index_topk well below the prompt, so that the indexer drops keys, and enough index heads (16 to 32) that
    # two keys rarely tie at the edge of a query's top k; groups of experts and a dense first layer; a tied head,
    # two shared experts, an indexer all rotary; YaRN and a layer pattern of its own (mlp_layer_types). The seeds
    # keep every query's k-th and (k+1)-th index scores apart (tests/families/test_deepseek_v32.py checks it).
    "deepseek_v32": Family("DeepseekV32Config", {
        "groups_dense": dict(vocab_size=120, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                             num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                             num_experts_per_tok=3, n_group=4, topk_group=2, first_k_dense_replace=1,
                             q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
                             index_topk=16, index_head_dim=16, index_n_heads=16, max_position_embeddings=256, seed=3),
        "tied_shared_rotary_indexer": dict(vocab_size=160, hidden_size=24, intermediate_size=40,
                                           moe_intermediate_size=12, num_hidden_layers=2, num_attention_heads=3,
                                           num_key_value_heads=3, n_routed_experts=6, num_experts_per_tok=2,
                                           n_group=1, topk_group=1, first_k_dense_replace=0, q_lora_rank=20,
                                           kv_lora_rank=12, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16,
                                           norm_topk_prob=False, n_shared_experts=2, routed_scaling_factor=1.5,
                                           tie_word_embeddings=True, index_topk=24, index_head_dim=8,
                                           index_n_heads=32, max_position_embeddings=256, seed=3),
        "yarn_pattern": dict(vocab_size=100, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                             num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, n_routed_experts=8,
                             num_experts_per_tok=2, n_group=2, topk_group=1,
                             mlp_layer_types=["sparse", "dense", "sparse"], q_lora_rank=24, kv_lora_rank=16,
                             qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10, index_topk=40,
                             index_head_dim=24, index_n_heads=24, max_position_embeddings=256, seed=7,
                             rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 500.0,
                                              "original_max_position_embeddings": 32, "mscale": 0.707,
                                              "mscale_all_dim": 1.3}),
    }, moved=move_correction_biases, batch_configs=("groups_dense", "tied_shared_rotary_indexer"),
        validate_steps=8, refused=(NOT_A_DTYPE, ({"index_topk": 0}, "index_topk"))),
    # Grouped value heads (Gv = 2, 3) and one value head a key head, keys wider than values, a conv of kernel 3, half
    # of each head rotated with YaRN past its original context, attention biases, tied embeddings, layers in an order of our own (full first), a
    # checkpoint saved in bfloat16, and the MoE model's experts beside its shared expert. The DeltaNet layers' decays
    # are moderated (family_checks.moderate_decays says why).
    "qwen3_5": Family("Qwen3_5TextConfig", {
        "dense": dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
                      linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8,
                      max_position_embeddings=512, seed=3),
        "dense_bias_tied_yarn": dict(vocab_size=100, hidden_size=24, intermediate_size=40, num_hidden_layers=5,
                                num_attention_heads=3, num_key_value_heads=1, head_dim=8, linear_num_key_heads=2,
                                linear_num_value_heads=2, linear_key_head_dim=12, linear_value_head_dim=6,
                                linear_conv_kernel_dim=3, attention_bias=True, tie_word_embeddings=True,
                                layer_types=[FULL, LINEAR, LINEAR, FULL, LINEAR],
                                rope_parameters={"rope_type": "yarn", "rope_theta": 500.0, "factor": 4.0,
                                                 "original_max_position_embeddings": 128,
                                                 "partial_rotary_factor": 0.5},
                                max_position_embeddings=512, seed=5, saved="bfloat16"),
        "moe": dict(config_class="Qwen3_5MoeTextConfig", vocab_size=120, hidden_size=32, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=1,
                    linear_num_value_heads=3, linear_key_head_dim=8, linear_value_head_dim=8, num_experts=4,
                    num_experts_per_tok=2, moe_intermediate_size=12, shared_expert_intermediate_size=20,
                    max_position_embeddings=512, seed=3),
    }, moved=moderate_decays, greedy=70, batch=(9, 80, 3), batch_configs=("dense", "moe"), float64=100,
        refused=(NOT_A_DTYPE, ({"attn_output_gate": False}, "attn_output_gate=false"))),
    # B and C shared by groups of heads or by all of them, biases on in_proj and out_proj, a conv without its bias
    # and of another kernel, tied embeddings, and a time_step_limit that clamps dt in the chunked form; chunks far
    # shorter than the prompts (the last of them shorter).
    "mamba2": Family("Mamba2Config", {
        "groups": dict(num_heads=8, head_dim=8, hidden_size=32, expand=2, state_size=16, n_groups=2,
                       num_hidden_layers=2, vocab_size=128, chunk_size=16, seed=3),
        "one_group_biases": dict(num_heads=6, head_dim=8, hidden_size=24, expand=2, state_size=8, n_groups=1,
                                 num_hidden_layers=2, vocab_size=96, chunk_size=32, conv_kernel=3, use_bias=True,
                                 use_conv_bias=False, tie_word_embeddings=True, seed=5),
        "clamped": dict(num_heads=8, head_dim=4, hidden_size=16, expand=2, state_size=16, n_groups=4,
                        num_hidden_layers=3, vocab_size=80, chunk_size=40, time_step_limit=(0.05, 0.3), seed=7),
    }, first_token=1, greedy=21, batch_configs=("groups", "clamped"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"hidden_act": "xielu"}, "hidden_act"))),
    # Every kind of layer (Mamba-2, attention without positions, squared-ReLU MLP, squared-ReLU experts with a shared
    # one), in transformers' names and in the older pattern; a latent for the experts with biases on the MLPs,
    # groups of experts, norm_topk_prob off and a routed scaling; in_proj/out_proj biases and a 1-group Mamba; a
    # time_step_min high enough that the chunked scan's clamp bites. The routers' correction biases are moved.
    "nemotron_h": Family("NemotronHConfig", {
        "every_kind": dict(NEMOTRON_H, layers_block_type=["mamba", "moe", "attention", "mlp", "mamba", "attention"],
                           chunk_size=16, seed=5),
        "latent_groups": dict(NEMOTRON_H, hybrid_override_pattern="ME*M-", chunk_size=32, moe_latent_size=12,
                              n_group=3, topk_group=2, norm_topk_prob=False, routed_scaling_factor=2.5, mlp_bias=True,
                              seed=7),
        "biases_clamped": dict(NEMOTRON_H, layers_block_type=[LINEAR, FULL, "moe"], n_groups=1, chunk_size=40,
                               use_bias=True, time_step_min=0.3, tie_word_embeddings=True, seed=9),
    }, moved=move_correction_biases, first_token=1, greedy=21, batch_configs=("every_kind", "latent_groups"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"mlp_hidden_act": "xielu"}, "mlp_hidden_act"))),
    # Attention where full_attn_idxs (the older spelling) says, the MLP's width by LFM2's rule (x 1.5, a multiple of
    # 16: 48) and biases on the short conv; layer_types given outright, attention first, the width as given, a conv
    # kernel of 4, a head size wider than D / H, untied; one key/value head with YaRN (150 positions are past its
    # original 64). The conv's biases leak into transformers' padded rows (families/parts/short_conv.py says how):
    # the batch is checked on the configs without them.
    "lfm2": Family("Lfm2Config", {
        "idxs-width-rule-conv-bias": dict(LFM2, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                          num_attention_heads=4, num_key_value_heads=2, full_attn_idxs=[1, 3],
                                          block_multiple_of=16, block_ffn_dim_multiplier=1.5, conv_bias=True, seed=3),
        "layer-types-kernel4-untied": dict(LFM2, hidden_size=32, intermediate_size=40, num_hidden_layers=4,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                           layer_types=[FULL, "conv", "conv", FULL], block_auto_adjust_ff_dim=False,
                                           conv_L_cache=4, tie_word_embeddings=False, seed=5),
        "mqa-yarn": dict(LFM2, hidden_size=24, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
                         num_key_value_heads=1, layer_types=["conv", FULL, "conv"], block_multiple_of=8,
                         rope_parameters=YARN, seed=7),
    }, spread=0.3, first_token=1, batch_configs=("layer-types-kernel4-untied", "mqa-yarn"),
        validate=("idxs-width-rule-conv-bias",), validate_steps=3, validate_says=("LFM2 computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"),
                 ({"block_ffn_dim_multiplier": None}, "block_ffn_dim_multiplier"),
                 ({"conv_dim": 64}, "conv_dim=64 other than hidden_size"),
                 ({"layer_types": ["conv", "mamba", "conv", "conv"]}, "layer_types"))),
    # Every kind of layer (attention and a short conv, each with a dense MLP or experts), the expert bias moved so
    # that it changes the choice, renormalised and scaled; all sparse without the bias or the renormalisation, conv
    # biases, untied; k = 3 of 8 with the scaling 1.
    "lfm2_moe": Family("Lfm2MoeConfig", {
        "every-kind-bias-scaled": dict(LFM2, hidden_size=32, intermediate_size=48, moe_intermediate_size=12,
                                       num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                       layer_types=[FULL, "conv", "conv", FULL], num_dense_layers=2, num_experts=6,
                                       num_experts_per_tok=2, routed_scaling_factor=1.5, seed=3),
        "sparse-no-bias-no-renorm": dict(LFM2, hidden_size=32, intermediate_size=40, moe_intermediate_size=16,
                                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
                                         layer_types=["conv", FULL, "conv"], num_dense_layers=0, num_experts=4,
                                         num_experts_per_tok=2, use_expert_bias=False, norm_topk_prob=False,
                                         conv_bias=True, tie_word_embeddings=False, seed=5),
        "k3-of-8": dict(LFM2, hidden_size=24, intermediate_size=32, moe_intermediate_size=8, num_hidden_layers=3,
                        num_attention_heads=2, num_key_value_heads=2, layer_types=["conv", "conv", FULL],
                        num_dense_layers=1, num_experts=8, num_experts_per_tok=3, conv_L_cache=4, seed=7),
    }, spread=0.3, moved=move_correction_biases, first_token=1, batch_configs=("every-kind-bias-scaled", "k3-of-8"),
        float64_configs=("every-kind-bias-scaled", "sparse-no-bias-no-renorm"),
        validate=("every-kind-bias-scaled",), validate_steps=3, validate_says=("LFM2-MoE computes RMSNorm",),
        refused=(NOT_A_DTYPE, ({"num_experts_per_tok": 9}, "num_experts_per_tok=9 exceeds num_experts=6"),
                 ({"layer_types": None}, "layer_types"))),
    # Qwen3.5-MoE's shapes with the fused in-projections: value heads in groups of 2 (keys wider than values) and of
    # 3 under one key head; a dense layer by mlp_only_layers among sparse ones, the top k not renormalised; dense
    # layers by decoder_sparse_step 2 and one more, full attention every other layer, renormalised, attention biases,
    # tied; YaRN on a quarter of each head, as Qwen's model cards add it. Every kind of layer between them; the decays
    # moderated as Qwen3.5's.
    "qwen3_next": Family("Qwen3NextConfig", {
        "grouped-dense-layer-yarn": dict(vocab_size=120, hidden_size=32, intermediate_size=48, num_hidden_layers=4,
                                    num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
                                    linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=6,
                                    linear_conv_kernel_dim=3, num_experts=4, num_experts_per_tok=2,
                                    moe_intermediate_size=12, shared_expert_intermediate_size=20, mlp_only_layers=[1],
                                    norm_topk_prob=False, max_position_embeddings=512, seed=3,
                                    rope_parameters={"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 4.0,
                                                     "original_max_position_embeddings": 128,
                                                     "partial_rotary_factor": 0.25}),
        "step2-interval2-bias-tied": dict(vocab_size=100, hidden_size=24, intermediate_size=40, num_hidden_layers=4,
                                          num_attention_heads=3, num_key_value_heads=1, head_dim=8,
                                          linear_num_key_heads=1, linear_num_value_heads=3, linear_key_head_dim=8,
                                          linear_value_head_dim=8, num_experts=6, num_experts_per_tok=3,
                                          moe_intermediate_size=8, shared_expert_intermediate_size=16,
                                          decoder_sparse_step=2, mlp_only_layers=[3], full_attention_interval=2,
                                          attention_bias=True, tie_word_embeddings=True, max_position_embeddings=512,
                                          seed=5),
    }, moved=moderate_decays, greedy=70, batch=(9, 80, 3), float64=100, validate_steps=3,
        refused=(NOT_A_DTYPE, ({"num_experts": 0}, "num_experts=0"),
                 ({"rope_parameters": {"rope_type": "dynamic", "factor": 4.0, "rope_theta": 10000.0,
                                       "partial_rotary_factor": 0.25}}, "dynamic"))),
    # Grouped heads with rotary_dim (the published files' spelling) turning half of each, q and k normed over
    # projections of different widths; one key/value head per query head, every number turned, tied; YaRN with a
    # quarter of each head turned (rope_parameters' partial_rotary_factor), one expert a token. The correction
    # biases (beside each router, as MiniMax-M2 keeps them) are moved, so that the bias changes the choice.
    "minimax_m2": Family("MiniMaxM2Config", {
        "gqa-rotary-dim": dict(MINIMAX_M2, hidden_size=32, intermediate_size=16, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=8,
                               num_experts_per_tok=3, rotary_dim=8, rope_theta=500.0, seed=1),
        "mha-full-rotary-tied": dict(MINIMAX_M2, hidden_size=24, intermediate_size=20, num_hidden_layers=2,
                                     num_attention_heads=3, num_key_value_heads=3, head_dim=8, num_local_experts=6,
                                     num_experts_per_tok=2, tie_word_embeddings=True,
                                     rope_parameters={"rope_type": "default", "rope_theta": 1000.0}, seed=2),
        "yarn-quarter-top1": dict(MINIMAX_M2, hidden_size=32, intermediate_size=24, num_hidden_layers=3,
                                  num_attention_heads=4, num_key_value_heads=1, head_dim=16, num_local_experts=4,
                                  num_experts_per_tok=1, rope_parameters={**YARN, "partial_rotary_factor": 0.25},
                                  seed=3),
    }, moved=move_correction_biases, spread=0.3, batch_configs=("gqa-rotary-dim", "yarn-quarter-top1"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"use_qk_norm": False}, "use_qk_norm"), ({"scoring_func": "softmax"}, "scoring_func"),
                 ({"attn_type_list": [1, 0]}, "attn_type_list"))),
    # Half of each head turned with q and k normed per head and biases on q, k and v, 4 groups of experts of which 2,
    # a dense first layer and a routed scaling; no norms, every number turned, norm_topk_prob off, two shared experts,
    # no dense layer, one key/value head, tied; YaRN on half of each D / H wide head (no head_dim), two dense layers.
    # The routers' correction biases are moved.
    "glm4_moe": Family("Glm4MoeConfig", {
        "qk-norm-bias-groups": dict(GLM4_MOE, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                                    num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                    partial_rotary_factor=0.5, n_routed_experts=8, num_experts_per_tok=3, n_group=4,
                                    topk_group=2, first_k_dense_replace=1, use_qk_norm=True, attention_bias=True,
                                    routed_scaling_factor=2.5, seed=1),
        "plain-unnormed-tied": dict(GLM4_MOE, hidden_size=24, intermediate_size=40, moe_intermediate_size=12,
                                    num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=1, head_dim=8,
                                    partial_rotary_factor=1.0, n_routed_experts=6, num_experts_per_tok=2,
                                    first_k_dense_replace=0, norm_topk_prob=False, n_shared_experts=2,
                                    tie_word_embeddings=True, seed=2),
        "yarn-two-dense": dict(GLM4_MOE, hidden_size=32, intermediate_size=24, moe_intermediate_size=8,
                               num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2, n_routed_experts=8,
                               num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=2,
                               use_qk_norm=True, rope_parameters={**YARN, "partial_rotary_factor": 0.5}, seed=3),
    }, moved=move_correction_biases, spread=0.3, batch_configs=("qk-norm-bias-groups", "plain-unnormed-tied"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"scoring_func": "softmax"}, "scoring_func"), ({"topk_method": "greedy"}, "topk_method"))),
    # DeepSeek-V3's latent attention and experts, the layers' kinds from mlp_layer_types: q through its bottleneck,
    # groups of experts, a dense first layer; one q_proj, rotary pairs in halves, a sparse layer before a dense one,
    # norm_topk_prob off, two shared experts, tied; YaRN with mscale_all_dim and the default kinds (the first dense).
    # The routers' correction biases are moved.
    "glm4_moe_lite": Family("Glm4MoeLiteConfig", {
        "lora-groups-dense": dict(GLM4_MOE_LITE, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                                  num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
                                  n_routed_experts=8, num_experts_per_tok=3, n_group=2, topk_group=1, q_lora_rank=24,
                                  kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10,
                                  mlp_layer_types=["dense", "sparse", "sparse"], seed=1),
        "plain-q-halves-tied": dict(GLM4_MOE_LITE, hidden_size=24, intermediate_size=40, moe_intermediate_size=12,
                                    num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=3,
                                    n_routed_experts=6, num_experts_per_tok=2, q_lora_rank=None, kv_lora_rank=12,
                                    qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=16, rope_interleave=False,
                                    mlp_layer_types=["sparse", "dense"], norm_topk_prob=False, n_shared_experts=2,
                                    tie_word_embeddings=True, seed=2),
        "yarn-default-kinds": dict(GLM4_MOE_LITE, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
                                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                                   n_routed_experts=8, num_experts_per_tok=2, q_lora_rank=24, kv_lora_rank=16,
                                   qk_rope_head_dim=8, qk_nope_head_dim=12, v_head_dim=10, seed=3,
                                   rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 500.0,
                                                    "original_max_position_embeddings": 32, "mscale": 0.707,
                                                    "mscale_all_dim": 1.3}),
    }, moved=move_correction_biases, batch_configs=("lora-groups-dense", "plain-q-halves-tied"), validate_steps=8,
        refused=(NOT_A_DTYPE, ({"attention_bias": True}, "attention_bias"),
                 ({"first_k_dense_replace": 2}, "first_k_dense_replace"),
                 ({"num_key_value_heads": 1}, "num_key_value_heads"), ({"scoring_func": "softmax"}, "scoring_func"))),
    # DeepSeek-V3.2's latent attention over an indexer's chosen keys (index_topk well below the prompt, 16 to 24 index
    # heads so that two keys rarely tie at the edge of a query's top k), its rotary pairs interleaved, and shared
    # top-k: index_topk_freq 2 from offset 2 (full, full, shared, full) with groups of experts and a dense first layer;
    # indexer_types given outright (full, shared, shared, full) with the first layers sparse, two shared experts, tied,
    # YaRN. The routers' correction biases are moved.
    # A sliding layer (hash-routed), a 4:1 layer with its indexer keeping 6 entries and a 16:1 layer; then the Pro's
    # pattern (two 16:1 layers first, the 4:1 and 16:1 in turn) with YaRN on the compressed layers, 2 streams, one
    # output group, tied. Prompts of 150 pass the window (16), both rates and the top-k; the greedy run's decode steps
    # close windows of both. Index scores are ReLU'd: 16 heads of 16 keep a query's k-th and (k+1)-th entries apart.
    # A left-padded batch is refused (transformers' compressors pool the pad slots too).
    "deepseek_v4": Family("DeepseekV4Config", {
        "every-kind": dict(DEEPSEEK_V4, num_hidden_layers=3, o_groups=2, index_topk=6, compress_rates=V4_RATES,
                           layer_types=["sliding_attention", "compressed_sparse_attention",
                                        "heavily_compressed_attention"],
                           mlp_layer_types=["hash_moe", "moe", "moe"], hc_sinkhorn_iters=5, seed=3),
        "pro-pattern-yarn-tied": dict(DEEPSEEK_V4, num_hidden_layers=4, o_groups=1, index_topk=10,
                                      compress_rates=V4_RATES, hc_mult=2, hc_sinkhorn_iters=3, num_hash_layers=2,
                                      tie_word_embeddings=True, swiglu_limit=0.5, routed_scaling_factor=2.5,
                                      rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 32, "beta_slow": 1,
                                                    "original_max_position_embeddings": 64}, seed=5),
    }, moved=hash_tables_and_biases, batch_configs=(), float64=150, count=(150, 20),
        refused=(NOT_A_DTYPE, ({"scoring_func": "softmax"}, "scoring_func"), ({"num_key_value_heads": 2},
                 "num_key_value_heads"), ({"compress_ratios": [0, 4, 64]}, "compress_ratios"))),
    "glm_moe_dsa": Family("GlmMoeDsaConfig", {
        "every-other-shared": dict(GLM_MOE_DSA, num_hidden_layers=4, n_routed_experts=8, num_experts_per_tok=3,
                                   n_group=2, topk_group=1, first_k_dense_replace=1, index_topk=16, index_head_dim=16,
                                   index_n_heads=16, index_topk_freq=2, index_skip_topk_offset=2, seed=3),
        "two-shared-yarn-tied": dict(GLM_MOE_DSA, num_hidden_layers=4, n_routed_experts=6, num_experts_per_tok=2,
                                     mlp_layer_types=["sparse", "sparse", "dense", "sparse"], index_topk=24,
                                     index_head_dim=12, index_n_heads=24, n_shared_experts=2,
                                     indexer_types=["full", "shared", "shared", "full"], norm_topk_prob=False,
                                     tie_word_embeddings=True, seed=5,
                                     rope_parameters={"rope_type": "yarn", "factor": 8.0, "rope_theta": 500.0,
                                                      "original_max_position_embeddings": 32, "mscale": 0.707,
                                                      "mscale_all_dim": 1.3}),
    }, moved=move_correction_biases, validate_steps=8,
        refused=(NOT_A_DTYPE, ({"index_topk": 0}, "index_topk"), ({"rope_interleave": False}, "rope_interleave"),
                 ({"indexer_types": ["shared", "full", "full", "full"]}, "must begin with a 'full' layer"),
                 ({"indexer_rope_interleave": False}, "indexer_rope_interleave"))),
    # Attention between Mamba layers (half of each head turned), B and C shared by groups of heads; one group, every
    # bias but the conv's, a conv of kernel 3, a time_step_limit that clamps, tied; attention first with a head size
    # of its own, a quarter of each head turned at linear rope scaling, in bfloat16. eos inside the vocabulary: none.
    # (A batch with in_proj's bias: transformers' conv reads the bias of the pad slots, Mamba-2's and Nemotron-H's too.)
    "bamba": Family("BambaConfig", {
        "attention-between": dict(BAMBA, attn_layer_indices=[1], seed=3),
        "biases-clamped-tied": dict(BAMBA, num_hidden_layers=2, attn_layer_indices=[0], mamba_n_groups=1,
                                    mamba_proj_bias=True, mamba_conv_bias=False, attention_bias=True, mlp_bias=True,
                                    time_step_limit=(0.05, 0.3), tie_word_embeddings=True, mamba_d_conv=3, seed=5),
        "head-dim-linear-rope": dict(BAMBA, num_hidden_layers=3, attn_layer_indices=[0, 2], head_dim=16,
                                     mamba_chunk_size=40, seed=7, saved="bfloat16",
                                     rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0,
                                                      "partial_rotary_factor": 0.25}),
    }, first_token=1, greedy=21, batch_configs=("attention-between", "head-dim-linear-rope"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"layer_types": [FULL, LINEAR, FULL]}, "layer_types"), ({"attn_rotary_emb": 2}, "attn_rotary_emb"),
                 ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"))),
    # Experts beside the shared MLP, every µP multiplier away from 1, rotary attention between Mamba layers (the
    # older layer names); no experts (the shared MLP alone), NoPE, attention biases, tied; one expert a token of six,
    # attention first (transformers' layer names), one group, in_proj's bias, in bfloat16.
    "granitemoehybrid": Family("GraniteMoeHybridConfig", {
        "moe-rope-multipliers": dict(GRANITE, layer_types=["mamba", "attention", "mamba", "mamba"], num_local_experts=4,
                                     num_experts_per_tok=2, embedding_multiplier=2.0, logits_scaling=3.0,
                                     residual_multiplier=0.5, attention_multiplier=0.3,
                                     position_embedding_type="rope", seed=3),
        "dense-nope-tied": dict(GRANITE, num_hidden_layers=3, layers_block_type=["mamba", "attention", "mamba"],
                                num_local_experts=0, num_experts_per_tok=0, position_embedding_type="nope",
                                tie_word_embeddings=True, attention_bias=True, embedding_multiplier=1.5,
                                logits_scaling=0.5, residual_multiplier=0.8, attention_multiplier=0.2, seed=5),
        "k1-nope-bf16": dict(GRANITE, num_hidden_layers=2, layer_types=[FULL, LINEAR], num_local_experts=6,
                             num_experts_per_tok=1, mamba_n_groups=1, mamba_proj_bias=True, mamba_chunk_size=40,
                             attention_multiplier=0.25, seed=7, saved="bfloat16"),
    }, first_token=1, greedy=21, batch_configs=("moe-rope-multipliers", "dense-nope-tied"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"layer_types": ["mamba", "mlp", "mamba", "mamba"]}, "layer_types"),
                 ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"))),
    # Every µP multiplier away from 1, the gated norm after the gate, a head size and a mixer width of their own, B
    # and C shared by groups; the gate alone (no norm: the published models'); the norm before the gate, every bias, a
    # time_step_limit that clamps, tied. Each layer's cache holds keys and values beside the conv and scan states.
    "falcon_h1": Family("FalconH1Config", {
        "multipliers-gated-norm": dict(FALCON_H1, mamba_rms_norm=True, mamba_norm_before_gate=False, seed=3),
        "gate-alone": dict(FALCON_H1, mamba_rms_norm=False, num_hidden_layers=3, seed=5),
        "norm-first-biases-tied": dict(FALCON_H1, mamba_rms_norm=True, mamba_norm_before_gate=True,
                                       mamba_proj_bias=True, projectors_bias=True, attention_bias=True, mlp_bias=True,
                                       time_step_limit=(0.05, 0.3), tie_word_embeddings=True, mamba_chunk_size=40,
                                       seed=7),
    }, first_token=1, greedy=21, batch_configs=("multipliers-gated-norm", "gate-alone"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"layer_types": ["hybrid", "hybrid"]}, "layer_types"), ({"mamba_use_mlp": False}, "mamba_use_mlp"),
                 ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"))),
    # Mamba-1: tied with time_step_rank "auto" (ceil(D / 16)); biases on in_proj and out_proj, a conv without its bias
    # and of kernel 3, the rank and expand 3 given, untied; intermediate_size given (not expand D). Prompts of 150, far
    # past the conv's kernel; token 0 (bos, pad and eos by default) kept out of them.
    "mamba": Family("MambaConfig", {
        "tied-auto-rank": dict(MAMBA, hidden_size=32, state_size=8, num_hidden_layers=2, vocab_size=96, seed=3),
        "biases-kernel3-untied": dict(MAMBA, hidden_size=24, expand=3, state_size=16, time_step_rank=5,
                                      num_hidden_layers=3, vocab_size=80, conv_kernel=3, use_bias=True,
                                      use_conv_bias=False, tie_word_embeddings=False, seed=5),
        "intermediate-given": dict(MAMBA, hidden_size=16, intermediate_size=40, state_size=4, time_step_rank=3,
                                   num_hidden_layers=2, vocab_size=64, seed=7),
    }, spread=0.3, first_token=1, greedy=21, batch_configs=("tied-auto-rank", "intermediate-given"),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"hidden_act": "xielu"}, "hidden_act"), ({"time_step_rank": "full"}, "time_step_rank"))),
    # Jamba: its periods shrunk so that four layers hold every kind (a Mamba-1 mixer or attention, each with the
    # SwiGLU or the experts), mamba_dt_rank "auto" (ceil(32 / 16) = 2), 2 of 4 experts; then attention first, biases on
    # in_proj and out_proj, a conv of kernel 3 without its bias, the rank given, 1 of 3 experts, a larger epsilon
    # (the norms of dt, B and C read it too), tied. Prompts of 150, far past the conv's kernel. transformers zeroes the
    # mixer's input before in_proj, so in_proj's bias fills its pad slots and the conv carries it into a row's first
    # positions (ours zeroes x itself: each row as alone); the batch is checked on the first config, as Mamba's is.
    "jamba": Family("JambaConfig", {
        "every-kind-auto-rank": dict(JAMBA, num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1,
                                     expert_layer_period=3, expert_layer_offset=0, num_experts_per_tok=2, seed=3),
        "biases-kernel3-tied": dict(JAMBA, num_hidden_layers=3, attn_layer_period=3, attn_layer_offset=0,
                                    expert_layer_period=2, expert_layer_offset=1, num_experts=3, num_experts_per_tok=1,
                                    mamba_proj_bias=True, mamba_conv_bias=False, mamba_d_conv=3, mamba_dt_rank=5,
                                    mamba_expand=3, rms_norm_eps=1e-2, tie_word_embeddings=True, seed=5),
    }, spread=0.3, first_token=1, greedy=21, batch_configs=("every-kind-auto-rank",),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"mamba_dt_rank": "full"}, "mamba_dt_rank"), ({"attn_layer_offset": 2}, "attn_layer_offset"),
                 ({"head_dim": 4}, "head_dim"), ({"num_experts_per_tok": 5}, "num_experts_per_tok=5"),
                 ({"layer_types": [FULL, LINEAR, FULL, LINEAR]}, "layer_types"))),
    # Falcon-Mamba: Mamba's shapes, with its norms of dt, B and C at their default epsilon and at a larger one.
    "falcon_mamba": Family("FalconMambaConfig", {
        "tied-auto-rank": dict(MAMBA, hidden_size=32, state_size=8, num_hidden_layers=2, vocab_size=96, seed=3),
        "biases-eps-untied": dict(MAMBA, hidden_size=24, expand=3, state_size=16, time_step_rank=5,
                                  num_hidden_layers=3, vocab_size=80, conv_kernel=3, use_bias=True,
                                  mixer_rms_eps=1e-2, tie_word_embeddings=False, seed=5),
    }, spread=0.3, first_token=1, greedy=21, batch_configs=("tied-auto-rank",),
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"mixer_rms_eps": 0}, "mixer_rms_eps"))),
    # Llama 4's text model: chunks of 24 and 32 positions (the prompts pass several: 150 for the logits, 20 + 30
    # greedy), rotary chunked layers beside a NoPE global one, dense layers beside MoE ones (Maverick's alternation,
    # then moe_layers given), top-1 and top-2 sigmoid routers; the temperature visible at floor_scale 8 (x 1.69 by
    # position 150 at attn_scale 0.5), the L2 q/k norm on and off, llama3 rope, tied. Only the second runs the
    # left-padded batch: transformers' temperatures read a padded row's slots where ours (and the row alone) read its
    # positions, which its floor_scale of 8,192 makes the same.
    "llama4_text": Family("Llama4TextConfig", {
        "chunks-nope-temperature-alternating": dict(LLAMA4, intermediate_size_mlp=40,
                                                    num_hidden_layers=4, num_key_value_heads=2, num_local_experts=4,
                                                    num_experts_per_tok=1, attention_chunk_size=24,
                                                    interleave_moe_layer_step=2, floor_scale=8, attn_scale=0.5,
                                                    rope_parameters=QWEN3_ROPE, seed=3),
        "k2-moe-layers-no-qk-norm-llama3-tied": dict(LLAMA4, intermediate_size_mlp=24, num_hidden_layers=3,
                                                     num_key_value_heads=1, num_local_experts=6, num_experts_per_tok=2,
                                                     attention_chunk_size=32, moe_layers=[0, 2],
                                                     no_rope_layers=[1, 0, 1], use_qk_norm=False,
                                                     tie_word_embeddings=True, rope_parameters=LLAMA4_LLAMA3, seed=5),
    }, spread=0.3, first_token=1, greedy=20, batch_configs=("k2-moe-layers-no-qk-norm-llama3-tied",),
        refused=(NOT_A_DTYPE, ({"num_experts_per_tok": 9}, "num_experts_per_tok=9 exceeds num_local_experts=4"),
                 ({"no_rope_layers": [1, 1]}, "no_rope_layers must name"),
                 ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "dynamic"))),
    # KDA and NoPE MLA in linear_attn_config's pattern (from 1) with the first layer dense, q in one product, groups
    # of experts; layer_types and mlp_layer_types given outright, an MLA layer with the dense MLP, q through its
    # bottleneck, KDA heads wider than MLA's values and a conv of 3, two shared experts, not renormalised, and
    # tie_word_embeddings, which transformers' model ignores (its head is lm_head);
    # KimiLinearConfig's own pattern (layer 4 full) with one KDA head. The KDA decays are moderated as Qwen3.5's,
    # and the routers' correction biases moved. Prompts past the chunk (64) and every k-th expert.
    "kimi_linear": Family("KimiLinearConfig", {
        "pattern-groups-dense": dict(KIMI, num_hidden_layers=4, num_experts=8, num_experts_per_token=3,
                                     num_expert_group=2, topk_group=1,
                                     linear_attn_config={"head_dim": 8, "num_heads": 2, "short_conv_kernel_size": 4,
                                                         "full_attn_layers": [2, 4], "kda_layers": [1, 3]}, seed=3),
        "types-lora-head": dict(KIMI, num_hidden_layers=3, layer_types=[FULL, LINEAR, LINEAR],
                                mlp_layer_types=["dense", "sparse", "dense"], q_lora_rank=12, num_experts=6,
                                num_experts_per_token=2, num_shared_experts=2, moe_renormalize=False,
                                routed_scaling_factor=1.5, tie_word_embeddings=True,
                                linear_attn_config={"head_dim": 12, "num_heads": 2, "short_conv_kernel_size": 3},
                                seed=5),
        "default-pattern-one-head": dict(KIMI, num_hidden_layers=5, num_experts=4, num_experts_per_token=2,
                                         linear_attn_config={"head_dim": 16, "num_heads": 1}, seed=7),
    }, moved=kimi_moved, greedy=70, batch=(9, 80, 3), batch_configs=("pattern-groups-dense", "types-lora-head"),
        float64=100, validate_steps=3,
        refused=(NOT_A_DTYPE, ({"attention_bias": True}, "attention_bias"),
                 ({"num_key_value_heads": 1}, "num_key_value_heads"), ({"mla_use_nope": False}, "mla_use_nope"),
                 ({"moe_router_activation_func": "softmax"}, "moe_router_activation_func"),
                 ({"layer_types": None, "linear_attn_config": {"full_attn_layers": [1], "kda_layers": [1, 2]}},
                  "full_attn_layers"))),
    # Every mechanism at once: K = V on the full layers with their own wider heads and fewer key/value heads, the last
    # two layers reading the keys and values of layers 2 (sliding) and 3 (full) with a double-wide MLP, per-layer
    # inputs, the final soft-cap, the published rope (proportional, a quarter of the full heads' pairs); then none of
    # them: Gemma4TextConfig's own five-to-one pattern, no sharing, no per-layer inputs, biases, untied, a rope of its
    # own (half the full heads' pairs); the experts beside the dense MLP (the 26B-A4B's), K = V. Prompts past the
    # window of 7; layer_scalar spread over [0.5, 1.5].
    "gemma4": Family("Gemma4TextConfig", {
        "shared-kv-per-layer-k-eq-v": dict(GEMMA4, hidden_size=32, intermediate_size=48, num_hidden_layers=6,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                           num_global_key_value_heads=1, attention_k_eq_v=True,
                                           sliding_window=GEMMA4_WINDOW, layer_types=[SLIDING, FULL] * 3,
                                           num_kv_shared_layers=2, hidden_size_per_layer_input=4,
                                           use_double_wide_mlp=True, final_logit_softcapping=30.0, seed=0),
        "pattern-none-shared-biases-untied": dict(GEMMA4, hidden_size=24, intermediate_size=40, num_hidden_layers=6,
                                                  num_attention_heads=2, num_key_value_heads=1, head_dim=12,
                                                  global_head_dim=20, sliding_window=GEMMA4_WINDOW,
                                                  hidden_size_per_layer_input=0, attention_bias=True,
                                                  tie_word_embeddings=False, rope_parameters=GEMMA4_ROPE, seed=1),
        "experts-beside-mlp-k-eq-v": dict(GEMMA4, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
                                          num_attention_heads=4, num_key_value_heads=2, head_dim=8, global_head_dim=16,
                                          num_global_key_value_heads=1, attention_k_eq_v=True,
                                          sliding_window=GEMMA4_WINDOW, layer_types=[SLIDING, FULL] * 2,
                                          hidden_size_per_layer_input=0, enable_moe_block=True, num_experts=6,
                                          top_k_experts=2, moe_intermediate_size=8, seed=2, distinct=1),
    }, spread=0.3, moved=scale_layer_scalars, greedy=2 * GEMMA4_WINDOW, batch=(20, 9, 15), validate_steps=3,
        refused=(NOT_A_DTYPE, ({"enable_moe_block": True}, "enable_moe_block is true but num_experts is missing"),
                 ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
                 ({"num_kv_shared_layers": 7}, "num_kv_shared_layers=7 exceeds"))),
    # Lightning attention three layers to one softmax layer (MiniMax-01's seven to one, shortened), grouped heads,
    # DeepNorm's scales all different, blocks of 16 (every prompt past one, its last block short); MiniMaxConfig's own
    # pattern (softmax first, then every other layer) with heads of hidden_size / heads, blocks of 24, one expert a
    # token, linear rope scaling; blocks longer than the prompts (one block a prompt), two softmax layers in a row, tied.
    "minimax": Family("MiniMaxConfig", {
        "three-to-one-deepnorm": dict(MINIMAX, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=8, num_local_experts=4, num_experts_per_tok=2, block_size=16,
                                      layer_types=[LINEAR, LINEAR, LINEAR, FULL], full_attn_alpha_factor=2.5,
                                      full_attn_beta_factor=0.8, linear_attn_alpha_factor=3.5,
                                      linear_attn_beta_factor=1.2, mlp_alpha_factor=3.0, mlp_beta_factor=0.9, seed=1),
        "alternate-top1": dict(MINIMAX, num_hidden_layers=3, num_attention_heads=3, num_key_value_heads=1,
                                    hidden_size=24, num_local_experts=6, num_experts_per_tok=1, block_size=24,
                                    rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0},
                                    seed=5),
        "one-block": dict(MINIMAX, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                          num_local_experts=4, num_experts_per_tok=2, layer_types=[FULL, FULL, LINEAR],
                          tie_word_embeddings=True, seed=3),
    }, spread=0.35, batch_configs=("three-to-one-deepnorm", "alternate-top1"), validate_steps=3,
        refused=(NOT_A_DTYPE, ({"quantization_config": {"quant_method": "fp8"}}, "quantization_config"),
                 ({"sliding_window": 16}, "sliding_window"), ({"postnorm": False}, "postnorm"),
                 ({"layer_types": None, "attn_type_list": [0, 0, 0, 1]}, "attn_type_list"),
                 ({"layer_types": [LINEAR, FULL]}, "layer_types must name"))),
}  # fmt: skip

# The Llama family's configs of a few positions' context (too short for the suite's prompts): its own module runs
# them at every length up to the context, in a batch and in float64; test_float64_fixtures reads llama3's other factors.
LLAMA_SHORT_CONTEXTS = {
    "llama-gelu-gate-h6-kv3-dh10": (transformers.LlamaConfig, dict(
        hidden_size=48, intermediate_size=50, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3,
        head_dim=10, vocab_size=97, max_position_embeddings=24, rms_norm_eps=1e-4, attention_bias=True,
        hidden_act="gelu_pytorch_tanh", rope_parameters={"rope_type": "default", "rope_theta": 321.0})),
    "mistral-window3-wide-heads": (transformers.MistralConfig, dict(
        hidden_size=24, intermediate_size=40, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        head_dim=16, vocab_size=101, max_position_embeddings=20, sliding_window=3)),
    "qwen2-untied-3-layers": (transformers.Qwen2Config, dict(
        hidden_size=32, intermediate_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
        vocab_size=120, max_position_embeddings=20, tie_word_embeddings=False)),
    "llama3-other-factors": (transformers.LlamaConfig, dict(
        hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
        vocab_size=90, max_position_embeddings=40, tie_word_embeddings=True,
        rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 2.0, "low_freq_factor": 2.0,
                         "high_freq_factor": 8.0, "original_max_position_embeddings": 32})),
}  # fmt: skip


_MADE: dict[tuple[str, str], tuple[Path, object, object]] = {}


def made(tmp_path_factory, family: str, name: str):
    """(directory, our model, transformers' model) of one family's config, saved once for the whole session: the
    conformance suite and the family's own module read the same models."""
    key = (family, name)
    if key not in _MADE:
        spec, options = FAMILIES[family], FAMILIES[family].configs[name]
        directory = tmp_path_factory.mktemp(f"{family}-{name}")
        saved = getattr(torch, options.get("saved", "float32"))
        hf = save_random(directory, spec.hf_config(name), seed=options["seed"], spread=spec.spread, dtype=saved)
        if spec.moved is not None:
            spec.moved(hf, options["seed"])
            hf.save_pretrained(directory)  # in float32, as moved: a moved buffer keeps every digit
        _MADE[key] = (directory, load_model(directory), hf)
    return _MADE[key]
