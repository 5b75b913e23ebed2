"""How a config.json key is declared, read, checked and written back: the vocabulary of a family's config
(families/config.py says what a config is; each family's config.py declares its keys with these).

`key(json key, transformers' default, kind)` declares a config field as the key it holds; a `Kind` checks a value
(refused under the key as the file spells it), turns the file's value into the field's and back, and says whether the
key sets the model's shapes (SIZE states the rule); a `Refusal` names an option transformers has that a family does not
compute; a `Group` reads and writes a setting spelled over several keys (the rope: families/rotary.py). Every
config.json is read as a `ConfigJson`, which records the defaults taken, so that those that set the shapes can be
said.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, replace
from typing import Any, Protocol

from ..errors import UserError

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


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _beyond_numpy(key: str, value) -> str:
    """The refusal of a whole number past LARGEST_SIZE (below: "", the kind's own words)."""
    if _whole(value) and value > LARGEST_SIZE:
        return f"config {key}={value} is more than a tensor of NumPy's can hold (2**62); give the checkpoint's own size"
    return ""


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def listed(value):
    """A config's tuple as JSON writes it, a list (an eos_token_id of several ids, a per-layer list)."""
    return list(value) if isinstance(value, tuple) else value


def _token_ids(value) -> bool:
    """null, an integer (not true or false, not 2.0) or a list of integers: what generate compares tokens with."""
    ids = value if isinstance(value, (list, tuple)) else [value]  # a list in the file, a tuple in a preset
    return value is None or all(type(i) is int for i in ids)


def token_ids(value):
    """A token id, or a list of them (config.json's eos_token_id) as a tuple: hashable."""
    return tuple(value) if isinstance(value, list) else value


def jsonable(value):
    """A field's value as the JSON's "model" object holds it: sorted (key, value) pairs (a rope scaling) as an object,
    a tuple as a list."""
    if isinstance(value, tuple) and value and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        if all(isinstance(k, str) for k, _ in value):
            return {k: listed(v) for k, v in value}
    return listed(value)


FULL, SLIDING = "full_attention", "sliding_attention"  # transformers' layer types of attention with and without window


def slides(kind: str) -> bool:
    """A kind of layer whose attention sees a window: transformers' sliding_attention, and a family's kind named from it
    (SmolLM3's sliding_attention_nope: a window and no rotary positions)."""
    return kind.startswith(SLIDING)


# --- kinds of value -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kind:
    """What a config.json value is: the check it passes (else it is refused under the key as the file spells it), how
    the file's value becomes the field's and back, and whether it sets the model's shapes (a default taken for it is
    then said on stderr; SIZE's comment states the rule)."""

    what: str  # "a positive integer": the words of its refusal
    valid: Callable[[Any], bool] = lambda value: True
    shape: bool = False
    read: Callable[[Any], Any] = lambda value: value  # the file's value (valid) -> the field's
    write: Callable[[Any], Any] = listed  # the field's value -> the file's
    refusal: str | Callable[[str, Any], str] = "config {key} must be {what}, not {value!r}"

    def check(self, key: str, value) -> None:
        if not self.valid(value):
            if callable(self.refusal):
                raise UserError(self.refusal(key, value))
            raise UserError(self.refusal.format(key=key, what=self.what, value=value))

    def or_null(self, what: str | None = None) -> Kind:
        """The same kind, or null (a value that follows from other keys, or none at all)."""
        valid, read = self.valid, self.read
        return replace(
            self,
            what=what or self.what,
            valid=lambda value: value is None or valid(value),
            read=lambda value: None if value is None else read(value),
        )


# A key sets the model's shapes when its value is a size or a count of what the model holds or runs: how many layers
# and the kind of each (which decides each layer's weights), widths (the model's, the MLP's, the experts', the low-rank
# latents'), heads and their sizes, the vocabulary, the context and a sliding window (a position table, what a layer's
# cache holds), the experts (how many, how many a token runs), an indexer's heads and the keys it keeps, a recurrent
# layer's heads, groups, state and conv kernel: SIZE, or a kind with shape=True. Not shapes: norms' epsilons,
# activations, rotary bases and scalings, token ids, biases' flags, scales and soft caps, a router's groups, chunk
# sizes (how a scan is computed, not what it holds or computes). A key the file leaves out whose value transformers
# works out from the file's other keys (head_dim as hidden_size / num_attention_heads, num_key_value_heads as
# num_attention_heads, GPT-2's n_inner as 4 n_embd) has the default None: it takes no default, and says nothing.
# At most 2**62, what NumPy can describe of a tensor's elements (verbs/count.py's LARGEST_TENSOR): a size of 10**30
# ended in an OverflowError deep in a pass (a C ssize_t), not in this key's words.
LARGEST_SIZE = 2**62
SIZE = Kind(
    "a positive integer",
    lambda value: _whole(value) and 0 < value <= LARGEST_SIZE,
    shape=True,
    refusal=lambda key, value: _beyond_numpy(key, value) or f"config {key} must be a positive integer, not {value!r}",
)
POSITIVE = replace(SIZE, shape=False)  # a positive integer that is no size: a router's groups, a scan's chunk
# The layers, at most MAX_LAYERS: the code keeps a kind per layer and walks them (a count of 10,000 layers takes about
# 5 s), so a mistyped 10**12 must be refused in its words before that list is made, not die in it
MAX_LAYERS = 10_000  # a hundred times the deepest model here (GPT-3 175B's 96 layers)
LAYER_COUNT = Kind(
    f"a positive integer of at most {MAX_LAYERS:,}", lambda value: _whole(value) and 0 < value <= MAX_LAYERS, shape=True
)
WINDOW = SIZE.or_null()  # a sliding window, or none
COUNT = Kind(
    "a whole number >= 0",
    lambda value: _whole(value) and 0 <= value <= LARGEST_SIZE,
    refusal=lambda key, value: _beyond_numpy(key, value) or f"config {key} must be a whole number >= 0, not {value!r}",
)
NUMBER = Kind("a number", _number, read=float)
POSITIVE_NUMBER = Kind("a positive number", lambda value: _number(value) and value > 0)
SCALE = replace(POSITIVE_NUMBER, read=float)  # a positive number kept as a float (a router's scaling factor)
FLAG = Kind("true or false", lambda value: isinstance(value, bool))  # a string such as "false" would read as true
TRUTHY = Kind("anything", read=bool)  # read as transformers' `if config.x` reads it: null is false
TOKENS = Kind("a token id or a list of them", _token_ids, read=token_ids)
ANY = Kind("anything")
ACTIVATION = Kind(
    "an activation",
    lambda value: value in SUPPORTED_ACTIVATIONS,
    refusal="config {key}={value!r} is not supported (supported: " + ", ".join(SUPPORTED_ACTIVATIONS) + ")",
)


INDICES = Kind("a list of layer indices", lambda v: isinstance(v, list) and all(type(i) is int for i in v), shape=True)


def layer_kinds(*kinds: str, named: Mapping[str, str] | None = None, written: Mapping[str, str] | None = None) -> Kind:
    """Each layer's kind, one of `kinds`, in a list (read as a tuple: hashable); `named`, where the family names a
    kind otherwise than the file (DeepSeek-V3.2's "sparse" is "moe"), and `written`, back."""
    named, written = named or {}, written or {}

    def refusal(key: str, value) -> str:
        if not isinstance(value, (list, tuple)):
            return f"config {key} must be a list, not {value!r}"
        return f"config {key}={list(value)!r} is not supported (each layer one of {', '.join(kinds)})"

    known = {*kinds, *named.values()}  # a file's names, or the family's (a config made in Python)
    valid = lambda value: isinstance(value, (list, tuple)) and bool(value) and set(value) <= known  # noqa: E731
    return Kind(
        f"a list of {', '.join(kinds)}",
        valid,
        shape=True,
        refusal=refusal,
        read=lambda value: tuple(named.get(kind, kind) for kind in value),
        write=lambda value: [written.get(kind, kind) for kind in value],
    )


def every(kind: str) -> Callable[[dict, Mapping], list[str]]:
    """The rule of a layer_types that the file leaves out where every layer is of one kind (n_layer read before)."""
    return lambda hf, values: [kind] * values["n_layer"]


def derived(rule: Callable[[dict, Mapping], Any]) -> dict:
    """Key's fields for a field the file never sets (a rule of the others) and nothing is written back for."""
    return {"read": rule, "rule": rule, "write": lambda config: {}, "dict_key": None}


def multipliers(json: str, n: int) -> Any:
    """A field of n numbers under `json` (a tuple: hashable), each 1 where the file gives none (null, transformers'
    default); the JSON's "model" object names it as the file does."""
    valid = lambda v: isinstance(v, (list, tuple)) and len(v) == n and all(NUMBER.valid(x) for x in v)  # noqa: E731
    kind = Kind(f"a list of {n} numbers", valid, read=lambda v: tuple(float(x) for x in v)).or_null()
    return key(json, None, kind, rule=lambda hf, values: (1.0,) * n, dict_key=json)


# --- keys, groups, refusals -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fixed:
    """A model type that reads no such key (Mistral's attention has no biases): its field is this value, and the
    config.json written for it has no such key."""

    value: Any


@dataclass(frozen=True)
class Key:
    """One config.json key of a family: transformers' default where the file leaves it out (MISSING: the file must
    give it) and the kind of its value, and how the field it fills is read, written and shown."""

    json: str  # the key as transformers 5 writes it
    default: Any = MISSING
    kind: Kind = ANY
    aliases: tuple[str, ...] = ()  # the same setting as older files spell it, read where the file lacks `json`
    required: bool = False  # refused where the file leaves it out, whatever transformers' default (GPT-2's depth)
    by_type: Mapping[str, Any] = field(default_factory=dict)  # model_type -> its own default, or Fixed
    read: Callable[[dict, dict], Any] | None = None  # (file, fields read before) -> the value, where it is not one key
    # where the file has none (or null): the value that follows from the fields read before and the file's other keys,
    # (file, fields) -> value; or `follows`, the value of another field (num_key_value_heads: num_attention_heads)
    rule: Callable[[dict, Mapping], Any] | None = None
    follows: str | None = None
    reads: tuple[Key, ...] = ()  # the keys `read` or `rule` read beside this one
    write: Callable[[Any], dict] | None = None  # config -> the config.json keys it writes, where it is not one key
    dict_key: str | None = ""  # the JSON's "model" object's name for the field ("": the field's; None: left out)
    dict_value: Callable[[Any], Any] | None = None  # the field -> the JSON's value (None: jsonable)

    def default_for(self, model_type: str | None):
        return self.by_type.get(model_type, self.default) if model_type is not None else self.default

    def get(self, hf: dict, model_type: str | None = None, values: dict | None = None):
        """The field's value from a config.json: the file's (as the first of json and its aliases spells it) or the
        default, which a ConfigJson records as taken; checked under the key as the file spells it."""
        default = self.default_for(model_type)
        if isinstance(default, Fixed):
            return default.value
        if self.read is not None:
            value, spelled = self.read(hf, values or {}), self.json
        else:
            spelled = next((k for k in (self.json, *self.aliases) if k in hf), "")
            if not spelled and (self.follows_from is None or default is not None):  # transformers' default
                if default is MISSING or self.required:
                    raise Missing(self.json)
                take(hf, self.json, default, self.kind.shape)
                return default
            value = hf[spelled] if spelled else None
            if value is None and self.follows_from is not None:  # absent with no default of its own, or null
                value, spelled = self.follows_from(hf, values or {}), spelled or self.json
        self.kind.check(spelled, value)
        return self.kind.read(value)

    @property
    def follows_from(self) -> Callable[[dict, Mapping], Any] | None:
        """The rule of a value that follows from others (`rule`, or `follows`), or None."""
        if self.follows is not None:
            return lambda hf, values: values.get(self.follows)  # None where that field is itself missing (refused)
        return self.rule

    def writes(self, config: Any, name: str, model_type: str) -> dict:
        """The config.json keys of the field's value: none for a model type that reads no such key, nor for a null
        that is also the default (the value follows from other keys, or there is none: transformers takes the same)."""
        default = self.default_for(model_type)
        if isinstance(default, Fixed):
            return {}
        if self.write is not None:
            return self.write(config)
        value = getattr(config, name)
        return {} if value is None and default is None else {self.json: self.kind.write(value)}


class Missing(Exception):
    """A key the file must give and does not (Key.required, or no default)."""


def key(json: str, default: Any = MISSING, kind: Kind = ANY, **more: Any) -> Any:
    """A config field filled from config.json's key `json` (Key's fields), with `default` as the dataclass's default
    too (a config made in Python takes transformers' defaults as one read from a file does)."""
    declared = Key(json, default, kind, **more)
    if default is MISSING:
        return field(metadata={"key": declared})
    return field(default=default.value if isinstance(default, Fixed) else default, metadata={"key": declared})


def eps(json: str, default: float) -> Any:
    """The norms' epsilon (norm_eps in every family), named in the JSON's "model" object as the file names it."""
    return key(json, default, POSITIVE_NUMBER, dict_key=json)


class Group(Protocol):
    """A setting that config.json spells over several keys (the rope: its type, theta, scaling and share of a head;
    families/rotary.py), read into one or more fields (their defaults the config class's) and written back."""

    def read(self, hf: dict, config: type, model_type: str) -> dict: ...  # the fields it fills

    def write(self, config: Any) -> dict: ...  # the config.json keys it writes

    def check(self, config: Any) -> None: ...


def shown(value) -> str:
    """A value as a refusal names it: "=true" as the file spells it (nothing for a list or an object)."""
    return "" if isinstance(value, (list, dict)) else f"={json.dumps(value)}"


def truthy(value, hf: dict) -> bool:
    return bool(value)


def zero(value, hf: dict) -> bool:
    return type(value) is int and value == 0


def false(value, hf: dict) -> bool:
    return value is False


def null(value, hf: dict) -> bool:
    return value is None


def present(value, hf: dict) -> bool:
    """Any value at all (a key the model never reads, whose mere presence says the file means another model)."""
    return True


def unread(why: str, *jsons: str) -> tuple[Refusal, ...]:
    """Keys transformers' model never reads, where a file that gives them means something by them: each refused."""
    return tuple(Refusal(json, why, present) for json in jsons)


@dataclass(frozen=True)
class Refusal:
    """An option transformers' model has that changes inference and is not computed here, refused by name: the key,
    which of its values are refused (refused(value, the file): any true one by default), and the rest of the message
    ("(why) is not supported", what to do); only for the model types named, where it is theirs alone."""

    json: str
    why: str
    refused: Callable[[Any, dict], bool] = truthy
    types: tuple[str, ...] = ()
    show: Callable[[Any], str] = shown  # the value as the message names it

    def check(self, hf: dict, model_type: str) -> None:
        if self.json in hf and (not self.types or model_type in self.types) and self.refused(hf[self.json], hf):
            raise UserError(f"config {self.json}{self.show(hf[self.json])} {self.why}")


@dataclass(frozen=True)
class Written:
    """config.json keys a family writes for transformers that it reads nowhere (a value its model fixes): a group
    that reads nothing."""

    write: Callable[[Any], dict]

    def read(self, hf: dict, config: type, model_type: str) -> dict:
        return {}

    def check(self, config: Any) -> None:
        pass


def take(hf: dict, key: str, default, shape: bool) -> None:
    """Record a default taken for `key` in a ConfigJson's book (a plain dict records nothing)."""
    if isinstance(hf, ConfigJson) and default is not None:
        hf.taken.setdefault(hf.prefix + key, default)
        if shape:
            hf.shapes.add(hf.prefix + key)


class ConfigJson(dict):
    """A config.json's object as a family reads it (config_from_hf_dict hands each family one): a dict in which every
    key the file does not have that was read with a default (transformers' default for the family) is recorded, with
    that default, in `taken`, and in `shapes` where it changes the model's shapes, so that those can be said
    (shape_defaults). An object nested in it (a multimodal checkpoint's text_config) records into the same book under
    its dotted name, and a merge with another dict (|) stays a ConfigJson of the same book. A family's reader works as
    well on a plain dict (the API's, the tests'): it just records nothing."""

    def __init__(self, data: dict, taken: dict | None = None, shapes: set | None = None, prefix: str = "") -> None:
        super().__init__(data)
        self.taken: dict[str, Any] = {} if taken is None else taken
        self.shapes: set[str] = set() if shapes is None else shapes
        self.prefix = prefix  # "text_config." for an object nested under that key

    def get(self, key, default=None):
        if key in self:
            value = self[key]
            if isinstance(value, dict) and not isinstance(value, ConfigJson):
                return ConfigJson(value, self.taken, self.shapes, f"{self.prefix}{key}.")
            return value
        take(self, key, default, shape=False)  # a default of None is no default: the value follows from other keys
        return default

    def __or__(self, other):
        return ConfigJson({**self, **other}, self.taken, self.shapes, self.prefix)

    def __ror__(self, other):
        return ConfigJson({**other, **self}, self.taken, self.shapes, self.prefix)


def unnoted(hf: dict, key: str, default=None):
    """A key's value or `default`, without counting the default as one the model took (a key the family reads only
    to refuse what it cannot compute, or reads for layers the model does not have)."""
    return hf[key] if key in hf else default


def check_dtype(hf: dict) -> None:
    """The weights' dtype a config.json states (transformers 5's dtype, or torch_dtype): float32, float16 or bfloat16,
    which the loader reads (and upcasts), or none."""
    dtype = hf.get("dtype", hf.get("torch_dtype"))
    if dtype not in (None, "float32", "float16", "bfloat16"):
        raise UserError(f"config dtype={dtype!r} is not supported (float32, float16 or bfloat16 weights)")


def quantized(what: str = "", advice: str = "dequantize the weights first") -> Refusal:
    """Quantized weights (a quantization_config), refused naming their method."""

    def method(value) -> str:
        name = value.get("quant_method") if isinstance(value, dict) else None
        return f" ({name or '?'}{what})"

    return Refusal("quantization_config", f"is not supported: {advice}", show=method)
