"""What every family's config answers to, and the checks they share.

Each family reads its own config.json keys (families/*/config.py) into a frozen dataclass that derives
from `ModelConfig`: the same names for the shapes (n_layer, n_embd, n_head, n_kv_head, d_head, d_ff,
n_positions, vocab_size, sliding_window), so that counting, memory and reports need not know which
family they look at. Every option that changes inference is either honoured or refused by name: a
model that would silently compute something else than transformers' is worse than no model.

The keys that many families' config.json share are read here, once: the dtype, the shapes and ids of a Llama-like
config (`llama_keys`), the checks of a number or a flag; the rope's keys are read in rotary.py. Every family reads its
config.json through a `ConfigJson`, which records the defaults it takes; those that change the model's shapes
(`SHAPE_KEYS`) are said when a model is loaded. Errors name a key as the file spells it (`ModelConfig.json_keys`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..engine.kvcache import KeysValues, State
from ..errors import UserError
from . import rotary

if TYPE_CHECKING:
    from .rotary import Rope

# The activations of transformers' ACT2FN that this project computes (see ops.ACTIVATIONS).
SUPPORTED_ACTIVATIONS = (
    "gelu_new",
    "gelu_pytorch_tanh",
    "gelu_python_tanh",
    "gelu_fast",
    "gelu",
    "gelu_python",
    "quick_gelu",
    "relu",
    "relu2",
    "silu",
    "swish",
    "tanh",
    "sigmoid",
    "linear",
)


# The keys of a Llama-like config.json (Llama, Qwen3, Mixtral, OLMo 2, Gemma, gpt-oss, Qwen3-MoE) and the fields of
# the config that hold them.
LLAMA_KEYS = {
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "hidden_size": "n_embd",
    "intermediate_size": "n_inner",
    "vocab_size": "vocab_size",
    "num_key_value_heads": "n_kv_head",
    "head_dim": "head_dim",
    "max_position_embeddings": "n_positions",
    "rms_norm_eps": "rms_norm_eps",
    "hidden_act": "hidden_act",
    "bos_token_id": "bos_token_id",
    "eos_token_id": "eos_token_id",
}


class ModelConfig:
    """The shapes every family's config has, under one set of names (each family's dataclass holds the fields)."""

    family: ClassVar[str]  # the name of the family in the table (families/table.py)
    # config.json's spelling of each field whose name is not the file's (n_layer is num_hidden_layers in every family
    # but GPT-2), so that a refusal names the key as the file spells it; a family whose keys differ adds its own.
    json_keys: ClassVar[dict[str, str]] = {field: key for key, field in LLAMA_KEYS.items()} | {
        "n_experts": "num_local_experts",
        "top_k": "num_experts_per_tok",
    }
    name: str
    n_layer: int
    n_head: int
    n_embd: int
    n_positions: int
    vocab_size: int
    tie_word_embeddings: bool
    sliding_window: int | None
    eos_token_id: int | tuple[int, ...] | None
    # A mixture of experts (families/parts/moe.py): E experts in place of each layer's MLP, of which a router picks k
    # for each token; None in a dense model.
    n_experts: int | None = None
    top_k: int | None = None
    # Sparse attention (DeepSeek-V3.2's lightning indexer): each query attends to at most index_topk of the keys it can
    # see, those an indexer's scores over every key rank highest; None: every key it can see.
    index_topk: int | None = None

    if TYPE_CHECKING:  # what each family's dataclass gives, as fields or as properties
        n_kv_head: int

        @property
        def d_head(self) -> int: ...

        @property
        def d_ff(self) -> int: ...

        @property
        def checkpoint_kind(self) -> str: ...

        @classmethod
        def from_hf_dict(cls, hf: dict, name: str) -> ModelConfig: ...

        def to_dict(self) -> dict: ...

        def to_hf_dict(self) -> dict: ...

    def key(self, field: str) -> str:
        """The config.json key of a field, as the file spells it."""
        return self.json_keys.get(field, field)

    def require_positive(self, *fields: str) -> None:
        """Each field a positive integer, or refused under its config.json key."""
        for name in fields:
            check_positive(self.key(name), getattr(self, name))

    def require_positive_number(self, *fields: str) -> None:
        """Each field a positive number, or refused under its config.json key."""
        for name in fields:
            check_positive_number(self.key(name), getattr(self, name))

    @property
    def d_model(self) -> int:
        return self.n_embd

    @property
    def symbol_sizes(self) -> dict[str, int]:
        """Sizes of the symbols a family's shapes name beyond every family's (DeepSeek-V3's dc, dr, dv...): a pass's
        Dims carry them (Dims.of), so that its stages and traces read them like T or D."""
        return {}

    @property
    def d_value(self) -> int:
        """A head's value width: its key width d_head, unless keys and values differ (DeepSeek-V3's MLA)."""
        return self.d_head

    @property
    def d_index(self) -> int | None:
        """The width of an indexer's key (DeepSeek-V3.2: index_head_dim), cached beside each layer's K and V so that
        later queries can score every earlier position; None: no indexer."""
        return None

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head."""
        return self.n_head // self.n_kv_head

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        if self.eos_token_id is None:
            return ()
        return tuple(self.eos_token_id) if isinstance(self.eos_token_id, tuple) else (self.eos_token_id,)

    def check_fits(self, n_prompt: int, n_new: int) -> None:
        check_fits(self, n_prompt, n_new)

    # Layers may differ from one another (a sliding window on some, a dense MLP beside experts): a family whose
    # layers do overrides these three. Layers of one kind compute the same products, so count runs one of each.
    @property
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind, in order (transformers' names where it has them)."""
        kind = "full_attention" if self.sliding_window is None else "sliding_attention"
        return (kind,) * self.n_layer

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of a layer's attention (None: it sees every earlier position)."""
        return self.sliding_window

    def layer_cache(self, layer: int) -> KeysValues | State:
        """What a layer keeps from one pass for the next (engine/kvcache.py): an attention layer's keys and values,
        n_kv_head heads of d_head and d_value a position, read back from its window; a family whose layers keep
        something else (a recurrent state, nothing) says so here, and the cache, memory and reports follow. An
        indexer's keys (d_index) are kept beside K and V, a row of d_index numbers a position: index_keys."""
        rows = (("index_keys", (self.d_index,)),) if self.d_index is not None else ()
        return KeysValues(self.n_kv_head, self.d_head, self.d_value, self.layer_window(layer), rows)

    def prefix(self, n_layer: int) -> ModelConfig:
        """The same model cut to its first n_layer layers (count's twin)."""
        dataclass_config: Any = self  # every family's config is a dataclass
        return replace(dataclass_config, n_layer=n_layer)

    def rope(self, layer: int) -> Rope | None:
        """The rotary positions of a layer's attention (families/rotary.py), None where it has none (GPT-2's learned
        positions, a layer without attention)."""
        return None


class ConfigJson(dict):
    """A config.json's object as a family reads it (config_from_hf_dict hands each family one): a dict whose get()
    records every key the file does not have that was read with a default (transformers' default for the family),
    and that default, in `taken`, so that those which change the model's shapes can be said (shape_defaults). An
    object nested in it (a multimodal checkpoint's text_config) records into the same book under its dotted name, and
    a merge with another dict (|) stays a ConfigJson of the same book. A family's reader works as well on a plain dict
    (the API's, the tests'): it just records nothing. A read that must not count as a default taken (a key the family
    reads and then ignores) goes through `unnoted`."""

    def __init__(self, data: dict, taken: dict | None = None, prefix: str = "") -> None:
        super().__init__(data)
        self.taken: dict[str, Any] = {} if taken is None else taken
        self.prefix = prefix  # "text_config." for an object nested under that key

    def get(self, key, default=None):
        if key in self:
            value = self[key]
            if isinstance(value, dict) and not isinstance(value, ConfigJson):
                return ConfigJson(value, self.taken, f"{self.prefix}{key}.")
            return value
        if default is not None:  # a default of None is no default: the value follows from other keys (head_dim)
            self.taken.setdefault(self.prefix + key, default)
        return default

    def __or__(self, other):
        return ConfigJson({**self, **other}, self.taken, self.prefix)

    def __ror__(self, other):
        return ConfigJson({**other, **self}, self.taken, self.prefix)


def either(hf: dict, keys: tuple[str, ...], default=None):
    """The value of the first of `keys` (spellings of one setting: n_routed_experts or num_local_experts) that the
    file has, or `default`, taken for the first spelling."""
    for key in keys:
        if key in hf:
            return hf[key]
    return hf.get(keys[0], default)


def unnoted(hf: dict, key: str, default=None):
    """A key's value or `default`, without counting the default as one the model took (a key the family reads only
    to refuse what it cannot compute, or reads for layers the model does not have)."""
    return hf[key] if key in hf else default


# The config.json keys whose defaults change the model's shapes: a file that leaves one out gets transformers' default
# for its family and a note on stderr saying so (models/config.py), once per load. The rule: a key is a shape key
# when its value is a size or a count of what the model holds or runs: how many layers and the kind of each (which
# decides each layer's weights), widths (the model's, the MLP's, the experts', the low-rank latents'), heads and their
# sizes, the vocabulary, the context and a sliding window (a position table, what a layer's cache holds), the experts
# (how many, how many a token runs), an indexer's heads and the keys it keeps, a recurrent layer's heads, groups, state
# and conv kernel. Not shape keys: norms' epsilons, activations, rotary bases and scalings, token ids, biases' flags,
# scales and soft caps, a router's groups, chunk sizes (how a scan is computed, not what it holds or computes). A key
# the file leaves out whose value transformers works out from the file's other keys (head_dim as hidden_size /
# num_attention_heads, num_key_value_heads as num_attention_heads, GPT-2's n_inner as 4 n_embd) takes no default: it
# is read with None, and says nothing.
SHAPE_KEYS = frozenset({
    # layers, and which kind each is
    "num_hidden_layers", "n_layer", "layers_block_type", "layer_types", "hybrid_override_pattern",
    "full_attention_interval", "first_k_dense_replace", "mlp_layer_types", "decoder_sparse_step", "mlp_only_layers",
    "sliding_window_pattern", "max_window_layers",
    # widths
    "hidden_size", "n_embd", "intermediate_size", "n_inner", "moe_intermediate_size", "shared_expert_intermediate_size",
    "moe_shared_expert_intermediate_size", "moe_latent_size", "expand", "q_lora_rank", "kv_lora_rank",
    # heads and their sizes
    "num_attention_heads", "n_head", "num_key_value_heads", "head_dim", "qk_rope_head_dim", "qk_nope_head_dim",
    "v_head_dim",
    # vocabulary, context, window
    "vocab_size", "max_position_embeddings", "n_positions", "sliding_window",
    # experts
    "num_local_experts", "num_experts", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
    # an indexer
    "index_n_heads", "index_head_dim", "index_topk",
    # recurrent layers
    "num_heads", "mamba_num_heads", "mamba_head_dim", "state_size", "ssm_state_size", "n_groups", "conv_kernel",
    "linear_conv_kernel_dim", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
    "linear_value_head_dim",
})  # fmt: skip


def shape_defaults(hf: dict) -> dict[str, Any]:
    """The shape keys (SHAPE_KEYS) a config.json left out that its family read with a default, by their dotted names
    ("text_config.linear_num_value_heads"), and the default each took; {} for a plain dict."""
    taken = hf.taken if isinstance(hf, ConfigJson) else {}
    return {key: value for key, value in taken.items() if key.rsplit(".", 1)[-1] in SHAPE_KEYS}


def rope_dict(theta: float, scaling: tuple | None = None, **more) -> dict:
    """transformers 5's rope_parameters of a config: the rope type, theta and the scaling's keys (tuples as lists)."""
    rope: dict = {"rope_type": "default", "rope_theta": theta}
    for key, value in scaling or ():
        rope[key] = list(value) if isinstance(value, tuple) else value
    return rope | more


def flag(hf: dict, key: str) -> bool:
    """A true/false option; a string such as "false" would read as true, so it is refused."""
    value = hf.get(key, False)
    if not isinstance(value, bool):
        raise UserError(f"config {key} must be true or false, not {value!r}")
    return value


def check_positive(key: str, value) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"config {key} must be a positive integer, not {value!r}")


def check_positive_number(key: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UserError(f"config {key} must be a positive number, not {value!r}")


def check_experts(config: ModelConfig) -> None:
    """A mixture of experts' E and k, positive, and k at most E (each named as the family's config.json spells it)."""
    config.require_positive("n_experts", "top_k")
    if config.top_k > config.n_experts:  # type: ignore[operator]
        raise UserError(
            f"config {config.key('top_k')}={config.top_k} exceeds {config.key('n_experts')}={config.n_experts}"
        )


def number(hf: dict, key: str, default: float) -> float:
    """A number a config.json gives (or its default), as a float; anything else refused by name."""
    value = hf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UserError(f"config {key} must be a number, not {value!r}")
    return float(value)


def check_activation(key: str, value) -> None:
    if value not in SUPPORTED_ACTIVATIONS:
        raise UserError(f"config {key}={value!r} is not supported (supported: {', '.join(SUPPORTED_ACTIVATIONS)})")


def check_model_type(hf: dict, model_types: tuple[str, ...], what: str) -> str:
    """config.json's model_type, one of `model_types`, or refused as not `what` ("a Mixtral (mixtral)")."""
    model_type = hf.get("model_type")
    if model_type not in model_types:
        raise UserError(f"config model_type={model_type!r} is not {what}")
    return model_type


def check_dtype(hf: dict) -> None:
    """The weights' dtype a config.json states (transformers 5's dtype, or torch_dtype): float32, float16 or bfloat16,
    which the loader reads (and upcasts), or none."""
    dtype = hf.get("dtype", hf.get("torch_dtype"))
    if dtype not in (None, "float32", "float16", "bfloat16"):
        raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")


def token_ids(value):
    """A token id, or a list of them (config.json's eos_token_id) as a tuple: hashable."""
    return tuple(value) if isinstance(value, list) else value


def listed(value):
    """A config's tuple as JSON writes it, a list (an eos_token_id of several ids, a per-layer list)."""
    return list(value) if isinstance(value, tuple) else value


def llama_keys(hf: dict, defaults: dict, rope: dict | None = None) -> dict:
    """The shapes, norm, activation and ids of a Llama-like config.json, as its config's fields, each the config.json's
    value or, where it has none, the family's default (`defaults`, by config.json key: transformers' defaults for
    that model_type; a key it leaves out defaults to None); tie_word_embeddings, a flag; and the rope's theta and
    scaling where `rope` is given (rotary.read's)."""
    fields = {field: hf.get(key, defaults.get(key)) for key, field in LLAMA_KEYS.items()}
    fields["eos_token_id"] = token_ids(fields["eos_token_id"])
    fields["tie_word_embeddings"] = flag(hf, "tie_word_embeddings")
    if rope is not None:
        fields |= {"rope_theta": rope.pop("rope_theta"), "rope_scaling": rotary.scaling(rope)}
    return fields


FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' layer types of attention with and without window


def check_layer_kinds(kinds: tuple[str, ...], n_layer: int) -> None:
    """A config's layer_types: one for each layer, each full_attention or sliding_attention."""
    if len(kinds) != n_layer:
        raise UserError(f"config layer_types has {len(kinds)} entries for num_hidden_layers={n_layer}")
    unknown = sorted(set(kinds) - {FULL, SLIDING})
    if unknown:
        raise UserError(
            f"config layer_types {', '.join(map(repr, unknown))} is not supported (supported: {FULL}, {SLIDING})"
        )


def check_fits(config, n_prompt: int, n_new: int) -> None:
    """Refuse a prompt plus new tokens that the context cannot hold, saying how many would fit."""
    if n_prompt + n_new <= config.n_positions:
        return
    room = config.n_positions - n_prompt
    if room > 0:
        fits = f"at most {room:,} new token{'' if room == 1 else 's'} fit"
    else:
        fits = "the prompt alone fills it" if room == 0 else "the prompt alone is too long"
    raise UserError(
        f"a {n_prompt:,}-token prompt plus {n_new:,} new token{'' if n_new == 1 else 's'} exceed "
        f"{config.name}'s context of {config.n_positions:,} positions; {fits}"
    )


def read_config_json(path: Path) -> dict:
    """The JSON object of a config.json, refused in one line if it is missing, unreadable or empty."""
    try:
        hf = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UserError(f"{path} is not valid JSON ({err}); re-download or fix the file") from None
    if not isinstance(hf, dict):
        raise UserError(f"{path} holds {type(hf).__name__}, not a JSON object; re-download or fix the file")
    if not hf:
        raise UserError(f"{path} is empty ({{}}): no shapes to build a model from; re-download or fix the file")
    return hf
