"""config.json files as their models publish them: at least one for each family of the table, written by hand here
(the Hugging Face Hub is out of reach) in the published spelling, each with its source, the preset it is, and the keys
it spells otherwise than transformers 5.24 writes them (test_config_spellings.py holds both spellings to one config;
a family's own module holds its preset to it).

Published configs were written by older transformers (or by a model's own code): `torch_dtype` for `dtype`, a
top-level `rope_theta` and a `rope_scaling` (its type as "type" or "rope_type") for `rope_parameters`, GPT-NeoX's
`rotary_pct` and `rotary_emb_base`, Gemma 3's `rope_local_base_freq` and `sliding_window_pattern` for per-layer-type
rope parameters and `layer_types`, Qwen3's `max_window_layers` for `layer_types`, Nemotron-H's
`hybrid_override_pattern` for `layers_block_type`, Phi-3's top-level `original_max_position_embeddings`, a multimodal
model's `text_config` for a text model's config.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minitransformer.families.table import PRESETS

INF = float("inf")


@dataclass(frozen=True)
class Published:
    """One published config.json: where it comes from, the preset it reads as (None: none of the presets), the keys
    it spells otherwise than transformers writes them, (published key, transformers' key), and the fields of the
    config that differ all the same, field -> (published, transformers'): a multimodal model's model_type, which
    says where its checkpoint keeps the text model."""

    source: str
    config: dict
    preset: str | None
    spellings: tuple[tuple[str, str], ...]
    differs: dict = field(default_factory=dict)

    @property
    def text(self) -> dict:
        """The config of the text model: a multimodal model's text_config, or the whole."""
        return self.config.get("text_config") or self.config


def _phi35_factors(which: str) -> list[float]:
    """Phi-3.5-mini's LongRoPE factors (48 each), as the preset holds them from its config.json."""
    return list(dict(PRESETS["phi-3.5-mini"].rope_scaling)[which])  # type: ignore[arg-type]


GPT2 = {
    "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1, "bos_token_id": 50256,
    "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
    "resid_pdrop": 0.1, "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
    "summary_type": "cls_index", "summary_use_proj": True,
    "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": 50257,
}  # fmt: skip
GPT2_ALIASES = {"model_type": "gpt2", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                "max_position_embeddings": 1024, "vocab_size": 50257}  # fmt: skip
LLAMA_32_1B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
    "transformers_version": "4.45.0.dev0", "use_cache": True, "vocab_size": 128256,
}  # fmt: skip
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
    "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 32768,
    "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0", "use_cache": True, "vocab_size": 32000,
}  # fmt: skip
QWEN25_05B = {
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
    "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
    "max_position_embeddings": 32768, "max_window_layers": 21, "model_type": "qwen2", "num_attention_heads": 14,
    "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 32768, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
QWEN3_06B = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024, "initializer_range": 0.02,
    "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True, "use_sliding_window": False,
    "vocab_size": 151936,
}  # fmt: skip
GEMMA2_2B = {
    "architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
    "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
    "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
    "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000,
}  # fmt: skip
GEMMA3_1B = {
    "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attn_logit_softcapping": None, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
    "final_logit_softcapping": None, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
    "initializer_range": 0.02, "intermediate_size": 6912, "max_position_embeddings": 32768,
    "model_type": "gemma3_text", "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1,
    "pad_token_id": 0, "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000,
    "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16", "transformers_version": "4.50.0.dev0", "use_cache": True, "vocab_size": 262144,
}  # fmt: skip
# google/gemma-3-4b-pt's config.json, as published (its vision_config left out): the text model leaves most of its
# shapes to Gemma3TextConfig's defaults.
GEMMA3_4B = {
    "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eoi_token_index": 256000,
    "eos_token_id": [1, 106], "image_token_index": 262144, "initializer_range": 0.02, "mm_tokens_per_image": 256,
    "model_type": "gemma3", "torch_dtype": "bfloat16",
    "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                    "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                    "sliding_window": 1024},
}  # fmt: skip
OLMO2_7B = {
    "architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "max_position_embeddings": 4096, "model_type": "olmo2", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pad_token_id": 100277, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 500000, "tie_word_embeddings": False, "torch_dtype": "float32",
    "transformers_version": "4.47.0.dev0", "use_cache": True, "vocab_size": 100352,
}  # fmt: skip
SMOLLM3_3B = {  # as its fine-tunes copy it (their files cut before rope_theta, which GitHub fixtures quoting it give)
    "architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": 128012, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 11008, "layer_types": ["full_attention"] * 36, "max_position_embeddings": 65536,
    "max_window_layers": 28, "mlp_bias": False, "model_type": "smollm3", "no_rope_layer_interval": 4,
    "no_rope_layers": [1, 1, 1, 0] * 9, "num_attention_heads": 16, "num_hidden_layers": 36, "num_key_value_heads": 4,
    "rms_norm_eps": 1e-06, "rope_theta": 5000000.0, "sliding_window": None, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 128256,
}  # fmt: skip
# GLM-4-9B-0414's shapes as a fine-tune re-saves its config.json with transformers 5 (its eos the fine-tune's).
GLM4_9B_0414 = {
    "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "bos_token_id": None,
    "dtype": "bfloat16", "eos_token_id": 151329, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 13696, "max_position_embeddings": 32768, "model_type": "glm4",
    "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2, "pad_token_id": 151329,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
    "rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": False, "transformers_version": "5.5.3", "use_cache": False, "vocab_size": 151552,
}  # fmt: skip
# ERNIE-4.5-0.3B: no copy of its config.json was within reach; transformers' Ernie4_5Config, whose docstring names
# baidu/ERNIE-4.5-0.3B-PT, states its shapes as defaults, written here as transformers 4.54 (the release that added
# ERNIE 4.5) spells a config: a top-level rope_theta, torch_dtype.
ERNIE45_03B = {
    "architectures": ["Ernie4_5ForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 131072,
    "model_type": "ernie4_5", "num_attention_heads": 16, "num_hidden_layers": 18, "num_key_value_heads": 2,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": True,
    "torch_dtype": "bfloat16", "use_bias": False, "use_cache": True, "vocab_size": 103424,
}  # fmt: skip
# baidu/ERNIE-4.5-21B-A3B-PT's config.json as GitHub transcriptions quote it (llm_memory_calculator's ERNIE_45_21B_A3B,
# Ascend atb_llm's test configs), its shape keys and moe_norm_min; PaddlePaddle's own keys left out.
ERNIE45_21B_A3B = {
    "architectures": ["Ernie4_5_MoeForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 2560, "intermediate_size": 12288, "max_position_embeddings": 131072,
    "model_type": "ernie4_5_moe", "moe_intermediate_size": 1536, "moe_k": 6, "moe_layer_end_index": 27,
    "moe_layer_interval": 1, "moe_layer_start_index": 1, "moe_norm_min": 1e-12, "moe_num_experts": 64,
    "moe_num_shared_experts": 2, "num_attention_heads": 20, "num_hidden_layers": 28, "num_key_value_heads": 4,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": True, "use_bias": False,
    "vocab_size": 103424,
}  # fmt: skip
# CohereForAI/c4ai-command-r7b-12-2024's config.json as an abliterated copy keeps it (huihui-ai/c4ai-command-r7b-12-2024-
# abliterated, transformers 4.48): its architecture keys, Cohere's own (which transformers reads not) among them.
COMMAND_R7B = {
    "architectures": ["Cohere2ForCausalLM"], "attention_bias": False, "bos_token_id": 5, "cache_implementation": "hybrid",
    "eos_token_id": 255001, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
    "layer_norm_eps": 1e-05, "layer_switch": 4, "logit_scale": 0.25, "max_position_embeddings": 8192,
    "model_type": "cohere2", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "order_of_interleaved_layers": "local_attn_first", "pad_token_id": 0, "position_embedding_type": "rope_gptj",
    "rope_scaling": None, "rope_theta": 50000, "rotary_pct": 1.0, "sliding_window": 4096, "sliding_window_pattern": 4,
    "torch_dtype": "bfloat16", "use_embedding_sharing": True, "use_gated_activation": True, "use_parallel_block": True,
    "vocab_size": 256000,
}  # fmt: skip
# Olmo-3-7B's config.json: its head as an MLX copy of allenai/Olmo-3-7B-RLZero-Code keeps it (mlx-community/Olmo-3-7B-
# RLZero-Code-4bit, cut after pad_token_id), its tail as tiny-random/olmo-3, a shrunk copy, keeps it (the rope: YaRN
# on the full layers, written as the allenai files of transformers 4.57 write it, rope_theta and rope_scaling).
OLMO3_7B = {
    "architectures": ["Olmo3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "eos_token_id": 100257,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 11008,
    "layer_types": ["sliding_attention"] * 3 + ["full_attention"] + ["sliding_attention"] * 3 + ["full_attention"]
    + (["sliding_attention"] * 3 + ["full_attention"]) * 6, "max_position_embeddings": 65536, "model_type": "olmo3",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "pad_token_id": 100277,
    "rms_norm_eps": 1e-06, "rope_scaling": {"attention_factor": 1.2079441541679836, "beta_fast": 32, "beta_slow": 1,
    "factor": 8.0, "original_max_position_embeddings": 8192, "rope_type": "yarn"}, "rope_theta": 500000,
    "sliding_window": 4096, "tie_word_embeddings": False, "use_cache": True, "vocab_size": 100278,
}  # fmt: skip
# EXAONE-4.0-1.2B's config.json as NVIDIA-NeMo/Megatron-Bridge's EXAONE 4 tests transcribe it, its token ids and
# layer_types as a quantized copy keeps them (JiYeaha/my-quant-model): no window, every layer full and turned. The
# family's preset is the 32B, whose file was not found whole: this one reads as no preset.
EXAONE4_12B = {
    "architectures": ["Exaone4ForCausalLM"], "bos_token_id": 1, "eos_token_id": 361, "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 2048, "intermediate_size": 4096, "layer_types": ["full_attention"] * 30,
    "max_position_embeddings": 65536, "model_type": "exaone4", "num_attention_heads": 32, "num_hidden_layers": 30,
    "num_key_value_heads": 8, "pad_token_id": 0, "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 16.0,
    "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 1000000.0, "sliding_window": None, "tie_word_embeddings": True, "vocab_size": 102400,
}  # fmt: skip
# Seed-OSS-36B-Instruct's config.json as mlx-rs transcribes it ("a trimmed Seed-OSS-36B-Instruct-4bit config ...
# mirrors the real checkpoint's config.json"; its quantization block left out), the Swift test's configJSON agreeing.
SEED_OSS_36B = {
    "architectures": ["SeedOssForCausalLM"], "attention_bias": True, "attention_out_bias": False, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 5120, "intermediate_size": 27648, "max_position_embeddings": 524288,
    "mlp_bias": False, "model_type": "seed_oss", "num_attention_heads": 80, "num_hidden_layers": 64,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": {"rope_type": "default"}, "rope_theta": 10000000.0,
    "tie_word_embeddings": False, "vocab_size": 155136,
}  # fmt: skip
PYTHIA_70M = {
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0, "hidden_act": "gelu",
    "hidden_size": 512, "initializer_range": 0.02, "intermediate_size": 2048, "layer_norm_eps": 1e-05,
    "max_position_embeddings": 2048, "model_type": "gpt_neox", "num_attention_heads": 8, "num_hidden_layers": 6,
    "rotary_emb_base": 10000, "rotary_pct": 0.25, "tie_word_embeddings": False, "torch_dtype": "float16",
    "transformers_version": "4.24.0", "use_cache": True, "use_parallel_residual": True, "vocab_size": 50304,
}  # fmt: skip
PHI35_MINI = {
    "architectures": ["Phi3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "embd_pdrop": 0.0, "eos_token_id": 32000, "hidden_act": "silu", "hidden_size": 3072, "initializer_range": 0.02,
    "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3", "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "original_max_position_embeddings": 4096,
    "pad_token_id": 32000, "resid_pdrop": 0.0, "rms_norm_eps": 1e-05,
    "rope_scaling": {"long_factor": _phi35_factors("long_factor"), "short_factor": _phi35_factors("short_factor"),
                     "type": "longrope"},
    "rope_theta": 10000.0, "sliding_window": 262144, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.3", "use_cache": True, "vocab_size": 32064,
}  # fmt: skip
MIXTRAL_8X7B = {
    "architectures": ["MixtralForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
    "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
    "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.36.0.dev0",
    "use_cache": True, "vocab_size": 32000,
}  # fmt: skip
# openai/gpt-oss-20b's config.json, less its quantization_config (MXFP4 experts: refused by name)
GPT_OSS_20B = {
    "architectures": ["GptOssForCausalLM"], "attention_bias": True, "attention_dropout": 0.0, "eos_token_id": 200002,
    "experts_per_token": 4, "head_dim": 64, "hidden_act": "silu", "hidden_size": 2880, "initial_context_length": 4096,
    "initializer_range": 0.02, "intermediate_size": 2880, "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072, "model_type": "gpt_oss", "num_attention_heads": 64, "num_experts_per_tok": 4,
    "num_hidden_layers": 24, "num_key_value_heads": 8, "num_local_experts": 32, "output_router_logits": False,
    "pad_token_id": 199999, "rms_norm_eps": 1e-05,
    "rope_scaling": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 32.0, "original_max_position_embeddings": 4096,
                     "rope_type": "yarn", "truncate": False},
    "rope_theta": 150000, "router_aux_loss_coef": 0.9, "sliding_window": 128, "swiglu_limit": 7.0,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": 201088,
}  # fmt: skip
QWEN3_30B_A3B = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 6144, "max_position_embeddings": 40960,
    "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
    "num_hidden_layers": 48, "num_key_value_heads": 4, "output_router_logits": False, "rms_norm_eps": 1e-06,
    "rope_scaling": None, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": True,
    "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
# deepseek-ai/DeepSeek-V3's config.json, less its auto_map and quantization_config (fp8 blocks: refused by name)
DEEPSEEK_V3 = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "aux_loss_alpha": 0.001, "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3,
    "hidden_act": "silu", "hidden_size": 7168, "initializer_range": 0.02, "intermediate_size": 18432,
    "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "seq_aux": True,
    "tie_word_embeddings": False, "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1", "use_cache": True, "v_head_dim": 128, "vocab_size": 129280,
}  # fmt: skip
# deepseek-ai/DeepSeek-V3.2-Exp's config.json (as its quantized copy publishes it), less its quantization_config
# DeepSeek-V4-Flash's config.json, as a serving engine's Rust test holds it byte for byte (its sha256 checked), its
# compress_ratios cut to the base model's 43 layers (the file lists its prediction layers' after them)
DEEPSEEK_V4_FLASH = {
    "architectures": ["DeepseekV4ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 0,
    "eos_token_id": 1, "hc_eps": 1e-06, "hc_mult": 4, "hc_sinkhorn_iters": 20, "head_dim": 512, "hidden_act": "silu",
    "hidden_size": 4096, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 512, "initializer_range": 0.02,
    "max_position_embeddings": 1048576, "model_type": "deepseek_v4", "moe_intermediate_size": 2048,
    "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 64,
    "num_experts_per_tok": 6, "num_hidden_layers": 43, "num_hash_layers": 3, "num_key_value_heads": 1,
    "num_nextn_predict_layers": 1, "o_groups": 8, "o_lora_rank": 1024, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06, "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16,
                                            "original_max_position_embeddings": 65536, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 1.5, "scoring_func": "sqrtsoftplus", "sliding_window": 128,
    "swiglu_limit": 10.0, "tie_word_embeddings": False, "topk_method": "noaux_tc", "torch_dtype": "bfloat16",
    "use_cache": True, "vocab_size": 129280, "compress_rope_theta": 160000,
    "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0, 0, 0],
}  # fmt: skip
DEEPSEEK_V32_EXP = {
    "architectures": ["DeepseekV32ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 0, "eos_token_id": 1, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "index_head_dim": 128, "index_n_heads": 64, "index_topk": 2048, "initializer_range": 0.02,
    "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "model_type": "deepseek_v32",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
    "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                     "original_max_position_embeddings": 4096, "type": "yarn"},
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False,
    "topk_group": 4, "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "transformers_version": "4.44.2",
    "use_cache": True, "v_head_dim": 128, "vocab_size": 129280,
}  # fmt: skip
# Qwen/Qwen3.5-27B's config.json (its vision_config left out): the text model in text_config, as the preset's sources
# quote it (families/qwen35/config.py), tie_word_embeddings beside it.
QWEN35_27B = {
    "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": 248056, "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True, "dtype": "bfloat16",
        "eos_token_id": 248044, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu",
        "hidden_size": 5120, "initializer_range": 0.02, "intermediate_size": 17408, "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 48,
        "linear_value_head_dim": 128, "mamba_ssm_dtype": "float32", "max_position_embeddings": 262144,
        "mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": False, "model_type": "qwen3_5_text",
        "num_attention_heads": 24, "num_hidden_layers": 64, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
        "rope_parameters": {"mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
                            "rope_theta": 10000000, "rope_type": "default"},
        "use_cache": True, "vocab_size": 248320},
    "tie_word_embeddings": False, "transformers_version": "4.57.0.dev0", "video_token_id": 248057,
    "vision_end_token_id": 248054, "vision_start_token_id": 248053,
}  # fmt: skip
# mistralai/Mamba-Codestral-7B-v0.1's config.json, as NX-AI's mlstm_kernels benchmark transcribes it
# (mlstm_kernels/utils/benchmark/benchmarks/huggingface_model_benchmark.py, "codestral_mamba_config").
CODESTRAL = {
    "architectures": ["Mamba2ForCausalLM"], "bos_token_id": 0, "chunk_size": 256, "conv_kernel": 4,
    "eos_token_id": 0, "expand": 2, "head_dim": 64, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.1, "intermediate_size": 8192, "layer_norm_epsilon": 1e-05, "model_type": "mamba2",
    "n_groups": 8, "norm_before_gate": True, "num_heads": 128, "num_hidden_layers": 64, "pad_token_id": 0,
    "rescale_prenorm_residual": False, "residual_in_fp32": True, "rms_norm": True, "state_size": 128,
    "tie_word_embeddings": False, "time_step_floor": 0.0001, "time_step_init_scheme": "random",
    "time_step_limit": [0.0, INF], "time_step_max": 0.1, "time_step_min": 0.001, "time_step_rank": 256,
    "time_step_scale": 1.0, "torch_dtype": "bfloat16", "use_bias": False, "use_cache": True, "use_conv_bias": True,
    "vocab_size": 32768,
}  # fmt: skip
# nvidia/Nemotron-H-8B-Base-8K's config.json, as NVIDIA-NeMo/Megatron-Bridge's tests transcribe it
# (tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py, without the test's own "n_routed_experts": None).
NEMOTRON_H_8B = {
    "architectures": ["NemotronHForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "attention_head_dim": 128, "bos_token_id": 1, "chunk_size": 128, "conv_kernel": 4, "eos_token_id": 2, "expand": 2,
    "hidden_act": "relu2", "hidden_dropout": 0.0, "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "initializer_range": 0.02,
    "intermediate_size": 21504, "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu",
    "mamba_num_heads": 128, "mamba_proj_bias": False, "max_position_embeddings": 8192, "mlp_bias": False,
    "mlp_hidden_act": "relu2", "model_type": "nemotron_h", "n_groups": 8, "num_attention_heads": 32,
    "num_hidden_layers": 52, "num_key_value_heads": 8, "num_logits_to_keep": 1, "pad_token_id": 0,
    "rescale_prenorm_residual": True, "residual_in_fp32": False, "rms_norm_eps": 1e-05, "ssm_state_size": 128,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.48.0.dev0", "use_bias": False,
    "use_cache": True, "use_conv_bias": True, "use_mamba_kernels": True, "vocab_size": 131072,
}  # fmt: skip
# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's config.json, as jax-llm-examples' nemotron3 tests transcribe it
# (nemotron3/tests/test_lora.py, NEMOTRON3_30B_JSON).
NEMOTRON_3_NANO = {
    "architectures": ["NemotronHForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1,
    "chunk_size": 128, "conv_kernel": 4, "eos_token_id": 2, "expand": 2, "head_dim": 128, "hidden_dropout": 0.0,
    "hidden_size": 2688, "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "initializer_range": 0.02, "intermediate_size": 1856, "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64,
    "mamba_hidden_act": "silu", "mamba_num_heads": 64, "mamba_proj_bias": False, "mamba_ssm_cache_dtype": "float32",
    "max_position_embeddings": 262144, "mlp_bias": False, "mlp_hidden_act": "relu2", "model_type": "nemotron_h",
    "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "n_groups": 8,
    "n_routed_experts": 128, "n_shared_experts": 1, "norm_eps": 1e-05, "norm_topk_prob": True,
    "num_attention_heads": 32, "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2,
    "num_logits_to_keep": 1, "pad_token_id": 0, "partial_rotary_factor": 1.0, "rescale_prenorm_residual": True,
    "residual_in_fp32": False, "rope_theta": 10000, "routed_scaling_factor": 2.5, "sliding_window": None,
    "ssm_state_size": 128, "tie_word_embeddings": False, "time_step_floor": 0.0001, "time_step_max": 0.1,
    "time_step_min": 0.001, "topk_group": 1, "torch_dtype": "bfloat16", "transformers_version": "4.55.4",
    "use_bias": False, "use_cache": True, "use_conv_bias": True, "use_mamba_kernels": True, "vocab_size": 131072,
}  # fmt: skip

# LiquidAI/LFM2-1.2B's config.json in its first format (transformers 4.54's: full_attn_idxs, block_ff_dim,
# tie_embedding and block_* keys transformers ignores), as FastFlowLM/LFM2-1.2B-NPU2 and LiquidAI/LFM2-700M's
# refs/pr/8 copy it (the 700M's with its own shapes); the fine-tunes' re-saves give the 1.2B's shapes.
LFM2_12B = {
    "architectures": ["Lfm2ForCausalLM"], "block_auto_adjust_ff_dim": True, "block_dim": 2048, "block_ff_dim": 12288,
    "block_ffn_dim_multiplier": 1.0, "block_mlp_init_scale": 1.0, "block_multiple_of": 256, "block_norm_eps": 1e-05,
    "block_out_init_scale": 1.0, "block_use_swiglu": True, "block_use_xavier_init": True, "bos_token_id": 1,
    "conv_L_cache": 3, "conv_bias": False, "conv_dim": 2048, "conv_dim_out": 2048, "conv_use_xavier_init": True,
    "eos_token_id": 7, "full_attn_idxs": [2, 5, 8, 10, 12, 14], "hidden_size": 2048, "initializer_range": 0.02,
    "max_position_embeddings": 128000, "model_type": "lfm2", "norm_eps": 1e-05, "num_attention_heads": 32,
    "num_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pad_token_id": 0, "rope_theta": 1000000.0,
    "tie_embedding": True, "torch_dtype": "bfloat16", "transformers_version": "4.54.0.dev0", "use_cache": True,
    "use_pos_enc": True, "vocab_size": 65536,
}  # fmt: skip
# LiquidAI/LFM2-8B-A1B's config.json as a fine-tune re-saves it (Ba2han/augment-multi-ft2, transformers 5.3.0).
LFM2_8B_A1B = {
    "architectures": ["Lfm2MoeForCausalLM"], "bos_token_id": 1, "conv_L_cache": 3, "conv_bias": False,
    "dtype": "bfloat16", "eos_token_id": 7, "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 7168,
    "layer_types": ["conv", "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv",
                    "conv", "full_attention", "conv", "conv", "conv", "full_attention", "conv", "conv", "conv",
                    "full_attention", "conv", "conv", "full_attention", "conv", "conv"],
    "max_position_embeddings": 128000, "model_type": "lfm2_moe", "moe_intermediate_size": 1792, "norm_eps": 1e-05,
    "norm_topk_prob": True, "num_attention_heads": 32, "num_dense_layers": 2, "num_experts": 32,
    "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 8, "output_router_logits": False,
    "pad_token_id": 0, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
    "routed_scaling_factor": 1.0, "tie_word_embeddings": True, "transformers_version": "5.3.0", "use_cache": True,
    "use_expert_bias": True, "vocab_size": 65536,
}  # fmt: skip
# Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, key for key as NVIDIA-NeMo/Megatron-Bridge's unit test transcribes
# it (tests/unit_tests/models/qwen/test_qwen3_next_bridge.py, qwen3_next_80b_a3b_config_dict).
QWEN3_NEXT_80B = {
    "architectures": ["Qwen3NextForCausalLM"], "bos_token_id": 151643, "decoder_sparse_step": 1,
    "eos_token_id": 151645, "full_attention_interval": 4, "head_dim": 256, "hidden_act": "silu", "hidden_size": 2048,
    "initializer_range": 0.02, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "max_position_embeddings": 262144, "mlp_only_layers": [], "model_type": "qwen3_next",
    "moe_intermediate_size": 512, "norm_topk_prob": True, "num_attention_heads": 16, "num_experts": 512,
    "num_experts_per_tok": 10, "num_hidden_layers": 48, "num_key_value_heads": 2, "output_router_logits": False,
    "partial_rotary_factor": 0.25, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}  # fmt: skip
# MiniMaxAI/MiniMax-M2's config.json (refs/pr/57 of its repository, with ai-dynamo/aiconfigurator's copies of M2.5
# and M2.7 for the keys its excerpt cut), less its quantization_config (fp8 blocks: refused by name): MiniMax-M2's own
# keys (use_qk_norm, scoring_func, attn_type_list, the MTP modules) and MiniMax-01's leftovers, which transformers keeps
# and never reads.
MINIMAX_M2 = {
    "architectures": ["MiniMaxM2ForCausalLM"], "attn_type_list": [1] * 62, "bos_token_id": None,
    "eos_token_id": None, "head_dim": 128, "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 1536,
    "layernorm_full_attention_beta": 1.0, "layernorm_linear_attention_beta": 1.0, "layernorm_mlp_beta": 1.0,
    "max_position_embeddings": 196608, "mlp_intermediate_size": 8192, "model_type": "minimax_m2",
    "mtp_transformer_layers": 1, "num_attention_heads": 48, "num_experts_per_tok": 8, "num_hidden_layers": 62,
    "num_key_value_heads": 8, "num_local_experts": 256, "num_mtp_modules": 3, "qk_norm_type": "per_layer",
    "rms_norm_eps": 1e-06, "rope_theta": 5000000, "rotary_dim": 64, "scoring_func": "sigmoid",
    "shared_intermediate_size": 0, "tie_word_embeddings": False, "transformers_version": "4.46.1",
    "use_mtp": True, "use_qk_norm": True, "use_routing_bias": True, "vocab_size": 200064,
}  # fmt: skip

# MiniMaxAI/MiniMax-Text-01-hf's config.json (transformers' conversion of MiniMax-Text-01), its keys as mlx-lm's MiniMax
# port transcribes them (layer_types, the *_attn_*_factor and mlp_*_factor spellings MiniMaxConfig reads; the original
# code's postnorm, rotary_dim, shared_intermediate_size and shared_moe_mode, which transformers keeps and never reads),
# with the keys that transcription leaves out: model_type and architectures (MiniMaxConfig's), bos and eos null (as
# MiniMax-M1's published config.json has them).
MINIMAX_TEXT_01_HF = {
    "architectures": ["MiniMaxForCausalLM"], "bos_token_id": None, "eos_token_id": None,
    "full_attn_alpha_factor": 3.5565588200778455, "full_attn_beta_factor": 1.0, "head_dim": 128, "hidden_size": 6144,
    "intermediate_size": 9216,
    "layer_types": ["full_attention" if (i + 1) % 8 == 0 else "linear_attention" for i in range(80)],
    "linear_attn_alpha_factor": 3.5565588200778455, "linear_attn_beta_factor": 1.0,
    "max_position_embeddings": 10240000, "mlp_alpha_factor": 3.5565588200778455, "mlp_beta_factor": 1.0,
    "model_type": "minimax", "num_attention_heads": 64, "num_experts_per_tok": 2, "num_hidden_layers": 80,
    "num_key_value_heads": 8, "num_local_experts": 32, "postnorm": True, "rms_norm_eps": 1e-05,
    "rope_theta": 10000000, "rotary_dim": 64, "shared_intermediate_size": 0, "shared_moe_mode": "sigmoid",
    "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 200064,
}  # fmt: skip

# moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json as a public model-inspection report quotes it whole (its
# auto_map to the model's own code left out): linear_attn_config for layer_types and the KDA shapes (its layer lists
# from 1), first_k_dense_replace for mlp_layer_types, the spellings of the model's own code (num_experts,
# moe_renormalize, model_max_length, ...), keys transformers reads not at all (head_dim, mla_use_nope, use_grouped_topk,
# moe_layer_freq, num_nextn_predict_layers, rope_theta).
KIMI_LINEAR_48B = {
    "architectures": ["KimiLinearForCausalLM"], "bos_token_id": 163584, "dtype": "bfloat16", "eos_token_id": 163586,
    "first_k_dense_replace": 1, "head_dim": 72, "hidden_act": "silu", "hidden_size": 2304, "initializer_range": 0.02,
    "intermediate_size": 9216, "kv_lora_rank": 512,
    "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128,
                           "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
                           "num_heads": 32, "short_conv_kernel_size": 4},
    "mla_use_nope": True, "model_max_length": 1048576, "model_type": "kimi_linear", "moe_intermediate_size": 1024,
    "moe_layer_freq": 1, "moe_renormalize": True, "moe_router_activation_func": "sigmoid", "num_attention_heads": 32,
    "num_expert_group": 1, "num_experts": 256, "num_experts_per_token": 8, "num_hidden_layers": 27,
    "num_key_value_heads": 32, "num_nextn_predict_layers": 0, "num_shared_experts": 1, "pad_token_id": 163839,
    "q_lora_rank": None, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 10000.0, "routed_scaling_factor": 2.446, "tie_word_embeddings": False,
    "topk_group": 1, "transformers_version": "4.57.1", "use_cache": True, "use_grouped_topk": True,
    "v_head_dim": 128, "vocab_size": 163840,
}  # fmt: skip

# zai-org/GLM-4.5-Air's config.json as its derivative PrimeIntellect/INTELLECT-3-Base keeps it (zai-org's keys and
# values; its auto_map added, and here its runtime keys left out): the rope at the top level, one MTP layer.
GLM45_AIR = {
    "architectures": ["Glm4MoeForCausalLM"], "attention_bias": True, "eos_token_id": [151329, 151336, 151338],
    "first_k_dense_replace": 1, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 10944, "max_position_embeddings": 131072, "model_type": "glm4_moe",
    "moe_intermediate_size": 1408, "n_group": 1, "n_routed_experts": 128, "n_shared_experts": 1,
    "norm_topk_prob": True, "num_attention_heads": 96, "num_experts_per_tok": 8, "num_hidden_layers": 46,
    "num_key_value_heads": 8, "num_nextn_predict_layers": 1, "pad_token_id": 151329, "partial_rotary_factor": 0.5,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000, "routed_scaling_factor": 1.0,
    "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16", "use_qk_norm": False,
    "vocab_size": 151552,
}  # fmt: skip

# zai-org/GLM-4.7-Flash's config.json as naaviii/glm-code-next-4b keeps it whole (zai-org's keys and order, written by
# transformers 5.0.0rc0; runtime keys left out here): first_k_dense_replace for the later mlp_layer_types.
GLM47_FLASH = {
    "architectures": ["Glm4MoeLiteForCausalLM"], "attention_bias": False, "bos_token_id": 0,
    "eos_token_id": [154820, 154827, 154829], "first_k_dense_replace": 1, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 10240, "kv_lora_rank": 512, "max_position_embeddings": 202752,
    "model_type": "glm4_moe_lite", "moe_intermediate_size": 1536, "n_group": 1, "n_routed_experts": 64,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 20, "num_experts_per_tok": 4,
    "num_hidden_layers": 47, "num_key_value_heads": 20, "num_nextn_predict_layers": 1, "pad_token_id": 154820,
    "partial_rotary_factor": 1.0, "q_lora_rank": 768, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 1000000, "routed_scaling_factor": 1.8,
    "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 1, "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16", "v_head_dim": 256, "vocab_size": 154880,
}  # fmt: skip

# zai-org/GLM-5's config.json as ai-dynamo/aiconfigurator keeps it (model_configs/zai-org--GLM-5_config.json): the
# keys of its own code beside transformers' (scoring_func, topk_method, indexer_rope_interleave, moe_layer_freq), no
# indexer_types (every layer runs its indexer).
GLM5 = {
    "architectures": ["GlmMoeDsaForCausalLM"], "attention_bias": False, "dtype": "bfloat16",
    "eos_token_id": [154820, 154827, 154829], "ep_size": 1, "first_k_dense_replace": 3, "head_dim": 64,
    "hidden_act": "silu", "hidden_size": 6144, "index_head_dim": 128, "index_n_heads": 32, "index_topk": 2048,
    "indexer_rope_interleave": True, "intermediate_size": 12288, "kv_lora_rank": 512,
    "max_position_embeddings": 202752, "model_type": "glm_moe_dsa", "moe_intermediate_size": 2048,
    "moe_layer_freq": 1, "n_group": 1, "n_routed_experts": 256, "n_shared_experts": 1, "norm_topk_prob": True,
    "num_attention_heads": 64, "num_experts_per_tok": 8, "num_hidden_layers": 78, "num_key_value_heads": 64,
    "num_nextn_predict_layers": 1, "pad_token_id": 154820, "pretraining_tp": 1, "q_lora_rank": 2048,
    "qk_head_dim": 256, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05,
    "rope_interleave": True, "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
    "routed_scaling_factor": 2.5, "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 1,
    "topk_method": "noaux_tc", "transformers_version": "5.0.2.dev0", "v_head_dim": 256, "vocab_size": 154880,
}  # fmt: skip

# ibm-fms/Bamba-9B's config.json (huggingface.co/ibm-fms/Bamba-9B/blame/43f21514c01057cdbfbd5e3fbc97bd3df3360aba/
# config.json, the whole file).
BAMBA_9B = {
    "architectures": ["BambaForCausalLM"], "attention_dropout": 0.0, "attn_layer_indices": [9, 18, 27],
    "attn_rotary_emb": 64, "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "mamba_chunk_size": 256, "mamba_conv_bias": True,
    "mamba_d_conv": 4, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_dt_rank": 256, "mamba_expand": 2,
    "mamba_n_groups": 1, "mamba_n_heads": 128, "mamba_proj_bias": False, "model_type": "bamba",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_logits_to_keep": 1,
    "pad_token_id": 0, "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.47.0.dev0", "use_cache": True, "use_mamba_kernels": True, "vocab_size": 128256,
}  # fmt: skip

# ibm-granite/granite-4.0-h-tiny's config.json, the keys of its shapes, as an importer's fixture quotes it
# (GRANITE_H_TINY_HF in a GitHub test of Hugging Face configs' ingestion; the Hub is out of reach here).
GRANITE_H_TINY = {
    "model_type": "granitemoehybrid", "hidden_size": 1536, "num_hidden_layers": 40, "num_attention_heads": 12,
    "num_key_value_heads": 4, "intermediate_size": 512, "shared_intermediate_size": 1024, "num_local_experts": 64,
    "num_experts_per_tok": 6, "vocab_size": 100352, "tie_word_embeddings": True, "mamba_d_state": 128,
    "mamba_n_groups": 1, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_expand": 2, "mamba_d_conv": 4,
    "mamba_chunk_size": 256, "max_position_embeddings": 131072,
    "layer_types": (["mamba"] * 5 + ["attention"] + ["mamba"] * 9 + ["attention"] + ["mamba"] * 9 + ["attention"]
                    + ["mamba"] * 9 + ["attention"] + ["mamba"] * 4),
}  # fmt: skip

# tiiuae/Falcon-H1-7B-Instruct's config.json, the keys of its shapes, as an importer's fixture quotes it
# (FALCON_H1_7B_HF in a GitHub test of Hugging Face configs' ingestion; the Hub is out of reach here).
FALCON_H1_7B = {
    "model_type": "falcon_h1", "hidden_size": 3072, "num_hidden_layers": 44, "num_attention_heads": 12,
    "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 12288, "vocab_size": 130048,
    "tie_word_embeddings": False, "mamba_d_state": 256, "mamba_n_groups": 1, "mamba_n_heads": 24, "mamba_d_head": 128,
    "mamba_d_ssm": 3072, "mamba_expand": 2, "mamba_d_conv": 4, "mamba_chunk_size": 128,
    "max_position_embeddings": 262144,
}  # fmt: skip

# state-spaces/mamba-130m-hf's config.json, as NVIDIA-NeMo/Megatron-Bridge's tests/unit_tests/models/mamba/
# test_mamba_bridge.py copies it whole (mamba_ssm's own keys d_model, n_layer, d_inner, rms_norm... beside
# transformers'; no tie_word_embeddings: tied)
MAMBA_130M = {
    "architectures": ["MambaForCausalLM"], "bos_token_id": 0, "conv_kernel": 4, "d_inner": 1536, "d_model": 768,
    "eos_token_id": 0, "expand": 2, "fused_add_norm": True, "hidden_act": "silu", "hidden_size": 768,
    "initializer_range": 0.1, "intermediate_size": 1536, "layer_norm_epsilon": 1e-05, "model_type": "mamba",
    "n_layer": 24, "num_hidden_layers": 24, "pad_token_id": 0, "pad_vocab_size_multiple": 8,
    "rescale_prenorm_residual": False, "residual_in_fp32": True, "rms_norm": True, "ssm_cfg": {}, "state_size": 16,
    "time_step_floor": 0.0001, "time_step_init_scheme": "random", "time_step_max": 0.1, "time_step_min": 0.001,
    "time_step_rank": 48, "time_step_scale": 1.0, "torch_dtype": "float32", "transformers_version": "4.39.0.dev0",
    "use_bias": False, "use_cache": True, "use_conv_bias": True, "vocab_size": 50280,
}  # fmt: skip

# tiiuae/falcon-mamba-7b's config.json (danielgonzagat/penin-monorepo keeps a copy: SYSTEM/opt/llm_base/
# falcon-mamba-7b/config.json): expand 16 beside intermediate_size 8192, which transformers reads over it
FALCON_MAMBA_7B = {
    "architectures": ["FalconMambaForCausalLM"], "bos_token_id": 0, "conv_kernel": 4, "eos_token_id": 11,
    "expand": 16, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.1, "intermediate_size": 8192,
    "layer_norm_epsilon": 1e-05, "model_type": "falcon_mamba", "num_hidden_layers": 64, "pad_token_id": 11,
    "rescale_prenorm_residual": False, "residual_in_fp32": True, "state_size": 16, "tie_word_embeddings": False,
    "time_step_floor": 0.0001, "time_step_init_scheme": "random", "time_step_max": 0.1, "time_step_min": 0.001,
    "time_step_rank": 256, "time_step_scale": 1.0, "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0",
    "use_bias": False, "use_cache": True, "use_conv_bias": True, "vocab_size": 65024,
}  # fmt: skip

# ai21labs/AI21-Jamba-1.5-Mini's config.json, as sdpython/experimental-experiment copies it whole
# (experimental_experiment/torch_models/llm_model_helper.py, get_ai21_jamba_15_mini)
JAMBA_1_5_MINI = {
    "architectures": ["JambaForCausalLM"], "attention_dropout": 0.0, "attn_layer_offset": 4, "attn_layer_period": 8,
    "bos_token_id": 1, "eos_token_id": [2, 518], "expert_layer_offset": 1, "expert_layer_period": 2,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_state": 16, "mamba_dt_rank": 256, "mamba_expand": 2,
    "mamba_proj_bias": False, "max_position_embeddings": 262144, "model_type": "jamba", "num_attention_heads": 32,
    "num_experts": 16, "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_logits_to_keep": 1, "output_router_logits": False, "pad_token_id": 0, "rms_norm_eps": 1e-06,
    "router_aux_loss_coef": 0.001, "sliding_window": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2", "use_cache": True, "use_mamba_kernels": False, "vocab_size": 65536,
}  # fmt: skip

# meta-llama/Llama-4-Scout-17B-16E's text_config, its keys as transformers 4.51.0 printed the first revision's
# Llama4Config (a GitHub note of Llama 4's configs and parameter counts), its context and llama3 rope as the current
# revision's, which ports quote (aws-neuron's Scout mock config: 10,485,760; a Rust port's test of Scout's rotary:
# factor 16, low and high frequency factors 1); its model_type a text model's, as text-only re-saves have it. The file
# says attn_temperature_tuning 4, which transformers 5.24's strict Llama4TextConfig refuses (a bool expected): here the
# true it means (tests/families/test_llama4_text.py reads the 4 as true).
LLAMA4_SCOUT = {
    "model_type": "llama4_text", "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
    "attn_scale": 0.1, "attn_temperature_tuning": True, "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008],
    "floor_scale": 8192, "for_llm_compressor": False, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
    "initializer_range": 0.02, "interleave_moe_layer_step": 1, "intermediate_size": 8192,
    "intermediate_size_mlp": 16384, "max_position_embeddings": 10485760, "moe_layers": list(range(48)),
    "no_rope_layers": [int((i + 1) % 4 != 0) for i in range(48)], "num_attention_heads": 40, "num_experts_per_tok": 1,
    "num_hidden_layers": 48, "num_key_value_heads": 8, "num_local_experts": 16, "output_router_logits": False,
    "pad_token_id": 200018, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0, "torch_dtype": "bfloat16",
    "use_cache": True, "use_qk_norm": True, "vocab_size": 202048,
}  # fmt: skip
# meta-llama/Llama-4-Maverick-17B-128E's text_config as NVIDIA/TensorRT-LLM's tests/unittest/_torch/modeling/
# test_modeling_llama_min_latency.py quotes it, with its 48 layers (the test cuts them to 2 and adds
# no_rope_layer_interval 2, which the published file has not): no moe_layers, no no_rope_layers, no temperature keys.
LLAMA4_MAVERICK = {
    "model_type": "llama4_text", "attention_bias": False, "attention_chunk_size": 8192, "attention_dropout": 0.0,
    "bos_token_id": 200000, "eos_token_id": [200001, 200007, 200008], "for_llm_compressor": False, "head_dim": 128,
    "hidden_act": "silu", "hidden_size": 5120, "initializer_range": 0.02, "interleave_moe_layer_step": 2,
    "intermediate_size": 8192, "intermediate_size_mlp": 16384, "max_position_embeddings": 1048576,
    "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48, "num_key_value_heads": 8,
    "num_local_experts": 128, "output_router_logits": False, "pad_token_id": 200018, "rms_norm_eps": 1e-05,
    "rope_scaling": None, "rope_theta": 500000.0, "router_aux_loss_coef": 0.001, "router_jitter_noise": 0.0,
    "torch_dtype": "bfloat16", "use_cache": True, "use_qk_norm": False, "vocab_size": 202048,
}  # fmt: skip
# google/gemma-4-E2B-it's config.json as a Rust loader's test transcribes it whole (test_parse_gemma4_e2b_config; its
# vision_config and audio_config left out here): the text model, 4 sliding layers to 1 full, the last 20 sharing.
GEMMA4_E2B = {
    "model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "tie_word_embeddings": True,
    "image_token_id": 258880, "audio_token_id": 258881, "video_token_id": 258884, "boi_token_id": 255999,
    "eoi_token_id": 258882, "boa_token_id": 256000, "eos_token_id": [1, 106],
    "text_config": {
        "hidden_size": 1536, "num_hidden_layers": 35, "num_attention_heads": 8, "num_key_value_heads": 1,
        "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": None, "attention_k_eq_v": False,
        "sliding_window": 512, "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
        "hidden_size_per_layer_input": 256, "num_kv_shared_layers": 20, "use_double_wide_mlp": True,
        "intermediate_size": 6144, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
        "hidden_activation": "gelu_pytorch_tanh", "final_logit_softcapping": 30.0, "pad_token_id": 0,
        "bos_token_id": 2, "eos_token_id": 1,
        "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
    },
}  # fmt: skip

# google/gemma-4-26B-A4B's config.json as ai-dynamo/aiconfigurator keeps it whole
# (aic-core/src/aiconfigurator_core/model_configs/google--gemma-4-26B-A4B_config.json, 095f58a51c4c; its vision_config
# and audio_config left out here): 5 sliding layers to 1 full, K = V, 8 of 128 experts beside the dense MLP, and
# use_bidirectional_attention "vision" (an image's tokens see each other both ways; text, causal), once refused.
GEMMA4_26B_A4B = {
    "model_type": "gemma4", "architectures": ["Gemma4ForConditionalGeneration"], "tie_word_embeddings": True,
    "dtype": "bfloat16", "image_token_id": 258880, "audio_token_id": 258881, "video_token_id": 258884,
    "boi_token_id": 255999, "eoi_token_id": 258882, "boa_token_id": 256000, "eoa_token_id": 258883,
    "vision_soft_tokens_per_image": 280,
    "text_config": {
        "attention_bias": False, "attention_dropout": 0.0, "attention_k_eq_v": True, "bos_token_id": 2,
        "dtype": "bfloat16", "enable_moe_block": True, "eos_token_id": 1, "final_logit_softcapping": 30.0,
        "global_head_dim": 512, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2816,
        "hidden_size_per_layer_input": 0, "initializer_range": 0.02, "intermediate_size": 2112,
        "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5, "max_position_embeddings": 262144,
        "model_type": "gemma4_text", "moe_intermediate_size": 704, "num_attention_heads": 16, "num_experts": 128,
        "num_global_key_value_heads": 2, "num_hidden_layers": 30, "num_key_value_heads": 8,
        "num_kv_shared_layers": 0, "pad_token_id": 0, "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
        },
        "sliding_window": 1024, "tie_word_embeddings": True, "top_k_experts": 8,
        "use_bidirectional_attention": "vision", "use_cache": True, "use_double_wide_mlp": False,
        "vocab_size": 262144, "vocab_size_per_layer_input": 262144,
    },
}  # fmt: skip

DTYPE = ("torch_dtype", "dtype")
ROPE = ("rope_theta", "rope_parameters")
# family -> its published configs
PUBLISHED: dict[str, list[Published]] = {
    "gpt2": [Published("openai-community/gpt2", GPT2, "gpt2", ()),  # GPT2Config writes GPT-2's own keys back
             Published("GPT2Config.attribute_map's names, as other GPT-2 checkpoints spell them", GPT2_ALIASES, "gpt2",
                       (("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"), ("num_attention_heads", "n_head"),
                        ("max_position_embeddings", "n_positions")))],
    "llama": [
        Published("meta-llama/Llama-3.2-1B", LLAMA_32_1B, "llama3.2-1b", (DTYPE, ROPE, ("rope_scaling", "rope_parameters"))),
        Published("mistralai/Mistral-7B-v0.1", MISTRAL_7B, "mistral-7b", (DTYPE, ROPE, ("hidden_size", "head_dim")),
                  differs={"head_dim": (None, 128)}),  # transformers writes the head size D / H it derives
        Published("Qwen/Qwen2.5-0.5B", QWEN25_05B, "qwen2.5-0.5b", (DTYPE, ROPE)),
    ],
    "qwen3": [Published("Qwen/Qwen3-0.6B", QWEN3_06B, "qwen3-0.6b", (DTYPE, ROPE, ("max_window_layers", "layer_types")))],
    "gemma": [
        Published("google/gemma-2-2b", GEMMA2_2B, "gemma-2-2b", (DTYPE, ROPE)),
        Published("google/gemma-3-1b-pt", GEMMA3_1B, "gemma-3-1b",
                  (DTYPE, ("rope_local_base_freq", "rope_parameters"), ("sliding_window_pattern", "layer_types"))),
        Published("google/gemma-3-4b-pt", GEMMA3_4B, "gemma-3-4b", (("text_config", "num_hidden_layers"),),
                  differs={"model_type": ("gemma3", "gemma3_text")}),
    ],
    "olmo2": [Published("allenai/OLMo-2-1124-7B", OLMO2_7B, "olmo-2-7b", (DTYPE, ROPE))],
    "olmo3": [Published("allenai/Olmo-3-1025-7B (its copies: mlx-community/Olmo-3-7B-RLZero-Code-4bit, tiny-random/"
                        "olmo-3)", OLMO3_7B, "olmo-3-7b", (ROPE, ("rope_scaling", "rope_parameters")))],
    "smollm3": [Published("HuggingFaceTB/SmolLM3-3B (its fine-tunes' copies: sweatSmile/HF-SmolLM3-3B-Math-Formulas-"
                          "4bit, koutch/0.json_train_grpo_v1_dev; rope_theta: GitHub fixtures quoting it)", SMOLLM3_3B,
                          "smollm3-3b", (DTYPE, ROPE))],
    "glm4": [Published("zai-org/GLM-4-9B-0414 (a fine-tune's re-save: ccui46/hazardworld_per_chunk_act_glm_tokfix_"
                       "diffPrompt_2000)", GLM4_9B_0414, "glm-4-9b-0414", ())],
    "ernie4_5": [Published("baidu/ERNIE-4.5-0.3B-PT (transformers' Ernie4_5Config's defaults: the file was out of reach)",
                           ERNIE45_03B, "ernie-4.5-0.3b", (DTYPE, ROPE))],
    "cohere2": [Published("CohereForAI/c4ai-command-r7b-12-2024 (an abliterated copy keeping every key: huihui-ai/"
                          "c4ai-command-r7b-12-2024-abliterated)", COMMAND_R7B, "command-r7b",
                          (DTYPE, ROPE, ("sliding_window_pattern", "layer_types")))],
    "exaone4": [Published("LGAI-EXAONE/EXAONE-4.0-1.2B (as Megatron-Bridge's tests transcribe it)", EXAONE4_12B, None,
                          (ROPE, ("rope_scaling", "rope_parameters")))],
    "seed_oss": [Published("ByteDance-Seed/Seed-OSS-36B-Instruct (as mlx-rs and a Swift test transcribe it)",
                           SEED_OSS_36B, "seed-oss-36b", (ROPE, ("rope_scaling", "rope_parameters")))],
    "neox": [Published("EleutherAI/pythia-70m", PYTHIA_70M, "pythia-70m",
                       (DTYPE, ("rotary_pct", "rope_parameters"), ("rotary_emb_base", "rope_parameters")))],
    "phi3": [Published("microsoft/Phi-3.5-mini-instruct", PHI35_MINI, "phi-3.5-mini",
                       (DTYPE, ROPE, ("rope_scaling", "rope_parameters")))],
    "mixtral": [Published("mistralai/Mixtral-8x7B-v0.1", MIXTRAL_8X7B, "mixtral-8x7b", (DTYPE, ROPE))],
    "ernie4_5_moe": [Published("baidu/ERNIE-4.5-21B-A3B-PT (GitHub transcriptions: llm_memory_calculator, Ascend "
                               "atb_llm)", ERNIE45_21B_A3B, "ernie-4.5-21b-a3b", (ROPE,))],
    "gpt_oss": [Published("openai/gpt-oss-20b", GPT_OSS_20B, "gpt-oss-20b",
                          (DTYPE, ROPE, ("rope_scaling", "rope_parameters")))],
    "qwen3_moe": [Published("Qwen/Qwen3-30B-A3B", QWEN3_30B_A3B, "qwen3-30b-a3b",
                            (DTYPE, ROPE, ("num_experts", "num_local_experts")))],
    "deepseek_v3": [Published("deepseek-ai/DeepSeek-V3", DEEPSEEK_V3, "deepseek-v3",
                              (DTYPE, ROPE, ("rope_scaling", "rope_parameters")))],
    "deepseek_v32": [Published("deepseek-ai/DeepSeek-V3.2-Exp", DEEPSEEK_V32_EXP, "deepseek-v3.2-exp",
                               (DTYPE, ROPE, ("rope_scaling", "rope_parameters")))],
    "deepseek_v4": [Published("deepseek-ai/DeepSeek-V4-Flash (a serving engine's test copy)", DEEPSEEK_V4_FLASH,
                              "deepseek-v4-flash", (DTYPE,))],
    "qwen3_5": [Published("Qwen/Qwen3.5-27B", QWEN35_27B, "qwen3.5-27b", (("text_config", "num_hidden_layers"),),
                          differs={"model_type": ("qwen3_5", "qwen3_5_text")})],
    "lfm2": [Published("LiquidAI/LFM2-1.2B (its first format, as copies quote it)", LFM2_12B, "lfm2-1.2b",
                       (DTYPE, ROPE, ("block_ff_dim", "intermediate_size"), ("full_attn_idxs", "layer_types"),
                        ("tie_embedding", "tie_word_embeddings")))],
    "lfm2_moe": [Published("LiquidAI/LFM2-8B-A1B (as Ba2han/augment-multi-ft2 re-saves it)", LFM2_8B_A1B,
                           "lfm2-8b-a1b", ())],
    "qwen3_next": [Published("Qwen/Qwen3-Next-80B-A3B-Instruct (as Megatron-Bridge's test transcribes it)",
                             QWEN3_NEXT_80B, "qwen3-next-80b-a3b",
                             (DTYPE, ROPE, ("full_attention_interval", "layer_types")))],
    "minimax_m2": [Published("MiniMaxAI/MiniMax-M2 (refs/pr/57; ai-dynamo/aiconfigurator's M2.5 and M2.7 copies)",
                             MINIMAX_M2, "minimax-m2", (ROPE, ("rotary_dim", "rope_parameters")))],
    "glm4_moe": [Published("zai-org/GLM-4.5-Air (PrimeIntellect/INTELLECT-3-Base's copy)", GLM45_AIR, "glm-4.5-air",
                           (DTYPE, ROPE, ("partial_rotary_factor", "rope_parameters")))],
    "glm4_moe_lite": [Published("zai-org/GLM-4.7-Flash (naaviii/glm-code-next-4b's copy)", GLM47_FLASH, "glm-4.7-flash",
                                (DTYPE, ROPE, ("first_k_dense_replace", "mlp_layer_types")))],
    "glm_moe_dsa": [Published("zai-org/GLM-5 (ai-dynamo/aiconfigurator's copy)", GLM5, "glm-5",
                              (("first_k_dense_replace", "mlp_layer_types"),))],
    "minimax": [Published("MiniMaxAI/MiniMax-Text-01-hf (mlx-lm's transcription of its keys)", MINIMAX_TEXT_01_HF,
                          "minimax-text-01", (ROPE,))],
    "kimi_linear": [Published("moonshotai/Kimi-Linear-48B-A3B-Instruct (a model-inspection report's copy)",
                              KIMI_LINEAR_48B, "kimi-linear-48b-a3b",
                              (("linear_attn_config", "layer_types"), ("first_k_dense_replace", "mlp_layer_types")))],
    "mamba2": [Published("mistralai/Mamba-Codestral-7B-v0.1", CODESTRAL, "mamba-codestral-7b", (DTYPE,))],
    "nemotron_h": [
        Published("nvidia/Nemotron-H-8B-Base-8K", NEMOTRON_H_8B, "nemotron-h-8b",
                  (DTYPE, ("hybrid_override_pattern", "layers_block_type"), ("attention_head_dim", "head_dim"))),
        Published("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", NEMOTRON_3_NANO, "nemotron-3-nano-30b-a3b",
                  (DTYPE, ("hybrid_override_pattern", "layers_block_type"))),
    ],
    "bamba": [Published("ibm-fms/Bamba-9B", BAMBA_9B, "bamba-9b", (DTYPE,))],
    "granitemoehybrid": [Published("ibm-granite/granite-4.0-h-tiny (its shapes, as a GitHub fixture quotes them)",
                                   GRANITE_H_TINY, "granite-4.0-h-tiny", ())],
    # (its rope_theta is not among the shapes quoted: the preset has the family's 1e11, so this reads as no preset)
    "falcon_h1": [Published("tiiuae/Falcon-H1-7B-Instruct (its shapes, as a GitHub fixture quotes them)", FALCON_H1_7B,
                            None, ())],
    "mamba": [Published("state-spaces/mamba-130m-hf (as Megatron-Bridge's test copies it)", MAMBA_130M, "mamba-130m",
                        (DTYPE,))],
    "falcon_mamba": [Published("tiiuae/falcon-mamba-7b (a copy: danielgonzagat/penin-monorepo)", FALCON_MAMBA_7B,
                               "falcon-mamba-7b", (DTYPE,))],
    "jamba": [Published("ai21labs/AI21-Jamba-1.5-Mini (a copy: sdpython/experimental-experiment)", JAMBA_1_5_MINI,
                        "jamba-1.5-mini", (DTYPE,))],
    "gemma4": [Published("google/gemma-4-E2B-it (a Rust loader's test transcribing its config.json)", GEMMA4_E2B,
                         "gemma-4-e2b", (("text_config", "num_hidden_layers"), ("global_head_dim", "per_layer_config")),
                         differs={"model_type": ("gemma4", "gemma4_text")}),
               Published("google/gemma-4-26B-A4B (ai-dynamo/aiconfigurator's copy of its config.json)", GEMMA4_26B_A4B,
                         "gemma-4-26b-a4b",
                         (("text_config", "num_hidden_layers"), ("global_head_dim", "per_layer_config")),
                         differs={"model_type": ("gemma4", "gemma4_text")})],
    "llama4_text": [
        Published("meta-llama/Llama-4-Scout-17B-16E's text_config (a note of transformers 4.51.0's print; ports' "
                  "copies of the current context and rope)", LLAMA4_SCOUT, "llama-4-scout-17b-16e",
                  (DTYPE, ROPE, ("rope_scaling", "rope_parameters"))),
        Published("meta-llama/Llama-4-Maverick-17B-128E's text_config (NVIDIA/TensorRT-LLM's test copy, 48 layers)",
                  LLAMA4_MAVERICK, "llama-4-maverick-17b-128e", (DTYPE, ROPE)),
    ],
}  # fmt: skip
