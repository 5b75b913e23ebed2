"""What every family's config answers to, and how a config is read and written from its declaration.

Each family's config (families/*/config.py) is a frozen dataclass deriving from `ModelConfig`, under the same names for
the shapes (n_layer, n_embd, n_head, n_kv_head, d_head, d_ff, n_positions, vocab_size, sliding_window, layer_types,
norm_eps), so that counting, memory and reports need not know which family they look at.

A config is a declaration: each field that a config.json key fills says so where it is declared, `key(json key,
transformers' default, kind)` (families/keys.py), and that one line is the whole of what the code knows of the key:
ModelConfig reads a config.json (`from_hf_dict`), writes one back (`to_hf_dict`) and writes the JSON's "model" object
(`to_dict`) from the declarations alone. Beside its keys, a family declares its `classes` (which transformers class
each of its model types is), the settings spelled over several keys (`groups`: the rope, families/rotary.py), the
options transformers has that it does not compute (`refusals`, each refused by name: a model that would silently
compute something else than transformers' is worse than no model), and the checks that relate its fields (`validate`,
with the checks here that families share).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..engine.kvcache import KeysValues, State
from ..errors import UserError
from .keys import (
    FULL,
    SLIDING,
    ConfigJson,
    Fixed,
    Group,
    Key,
    Missing,
    Refusal,
    check_dtype,
    jsonable,
    quantized,
    slides,
    unnoted,
)

if TYPE_CHECKING:
    from .rotary import Rope


def check_windows(config: Any, no_window: str = "sliding_window is null") -> None:
    """A config whose layers are full or sliding attention (its layer_types): a window where some layer slides
    (`no_window` says why there is none), none where no layer does (a window no layer uses is none, as the reports
    say)."""
    sliding = any(slides(kind) for kind in config.layer_types)
    if sliding and config.sliding_window is None:
        raise UserError(f"config {config.key('layer_types')} has {SLIDING} layers but {no_window}")
    if not sliding:
        object.__setattr__(config, "sliding_window", None)


# Quantized weights (a quantization_config: fp8 blocks with their scales, MXFP4, NVFP4, GPTQ...) are read by no
# family: every family refuses them, naming the method (a family may say more in its own refusals, read first).
QUANTIZED = quantized()


# --- the config -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Named:
    """A config's name, which no config.json holds (a preset's, a model directory's); by default its family's first
    model type (ModelConfig.__post_init__). Not compared: two configs of the same shapes are equal whatever their
    names."""

    name: str = field(default="", compare=False)


class ModelConfig(Named):
    """The shapes every family's config has, under one set of names (each family's dataclass holds the fields), and
    the reading and writing of config.json from the fields' declarations (`key`)."""

    # the name of the family in the table (families/table.py): its first model type, unless the family says otherwise
    family: ClassVar[str]
    what: ClassVar[str]  # the family as a refusal names it ("a Mixtral")
    # model_type -> the class transformers' AutoModelForCausalLM makes of it (config.json's "architectures", and what
    # validate compares with): the one place that says it
    classes: ClassVar[dict[str, str]] = {}
    multimodal: ClassVar[dict[str, str]] = {}  # a checkpoint's model_type -> its text model's, read from text_config
    model_types: ClassVar[tuple[str, ...]] = ()  # the config.json model_type values the family reads: the two above
    inherited: ClassVar[tuple[str, ...]] = ()  # keys a text model takes from its checkpoint's config where it has none
    groups: ClassVar[tuple[Group, ...]] = ()  # settings spelled over several keys (the rope)
    refusals: ClassVar[tuple[Refusal, ...]] = ()
    padding_refused: ClassVar[str] = ""  # why a left-padded batch is refused ("": it is taken), said before any pass
    dict_first: ClassVar[tuple[str, ...]] = ()  # properties the JSON's "model" object has before the fields
    dict_last: ClassVar[tuple[str, ...]] = ("d_head", "d_ff")  # and after them
    n_layer: int
    n_head: int
    n_embd: int
    n_positions: int
    vocab_size: int
    norm_eps: float
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
        n_inner: Any  # the MLP's width, where a family names it so (None in some: its d_ff says what then)
        head_dim: int | None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "classes" in vars(cls) and "family" not in vars(cls):
            cls.family = next(iter(cls.classes))
        cls.model_types = (*cls.classes, *cls.multimodal)

    # --- the declaration, read and written ------------------------------------------------------------------------
    @classmethod
    def keys(cls) -> list[tuple[str, Key]]:
        """(field, its Key) of every field a config.json key fills, in the order of the fields."""
        return [(f.name, f.metadata["key"]) for f in fields(cls) if "key" in f.metadata]

    @classmethod
    def shape_keys(cls) -> set[str]:
        """Every config.json key the family reads that sets the model's shapes (its spellings too)."""
        found, todo = set(), [k for _, k in cls.keys()]
        while todo:
            entry = todo.pop()
            todo += entry.reads
            if entry.kind.shape:
                found |= {entry.json, *entry.aliases}
        return found

    def key(self, field_name: str) -> str:
        """The config.json key of a field, as the file spells it (errors name it so)."""
        return next((k.json for name, k in self.keys() if name == field_name), field_name)

    @classmethod
    def from_hf_dict(cls, hf: dict, name: str | None = None) -> Any:
        """Read a transformers config.json dict (its model_type one of the family's), with transformers' defaults for
        what it leaves out, refusing what would change inference unseen."""
        model_type = cls.read_model_type(hf)
        for refusal in (*cls.refusals, QUANTIZED):  # a family's own words for quantized weights first, where it has
            refusal.check(hf, model_type)
        if model_type in cls.multimodal:
            return cls.from_text_config(hf, model_type, name)
        check_dtype(hf)
        values: dict[str, Any] = {}
        missing: list[str] = []
        for field_name, entry in cls.keys():
            if missing and entry.read is not None:  # it reads fields before it, some of which the file lacks
                continue
            try:
                values[field_name] = entry.get(hf, model_type, values)
            except Missing:
                missing.append(entry.json)
        if missing:
            raise UserError(
                f"config.json lacks {', '.join(missing)}: a {model_type} model needs its shapes spelled out"
            )
        for group in cls.groups:
            values |= group.read(hf, cls, model_type)
        if "model_type" in cls.__dataclass_fields__:
            values["model_type"] = model_type
        return cls(**values, **({"name": name} if name is not None else {}))

    @classmethod
    def read_model_type(cls, hf: dict) -> str:
        """config.json's model_type, one of the family's (GPT-2's where it has none, as old checkpoints), or refused
        as not this family's."""
        model_type = hf.get("model_type", "gpt2")
        if model_type not in cls.model_types:
            raise UserError(f"config model_type={model_type!r} is not {cls.what} ({', '.join(cls.model_types)})")
        return model_type

    @classmethod
    def from_text_config(cls, hf: dict, model_type: str, name: str | None) -> Any:
        """A multimodal checkpoint's config read as its text model's (text_config), as transformers' ...ForCausalLM
        reads it, keeping the checkpoint's model_type (it says where the weights are)."""
        text = hf.get("text_config") or {}
        if not isinstance(text, dict):
            raise UserError(f"config text_config must be an object, not {text!r}")
        text = text | {"model_type": cls.multimodal[model_type]}
        for inherited in cls.inherited:
            if inherited not in text and inherited in hf:
                text[inherited] = hf[inherited]
        return replace(cls.from_hf_dict(text, name), model_type=model_type)

    def to_hf_dict(self) -> dict:
        """The config.json transformers reads for this config, every key the family reads spelled out (a multimodal
        checkpoint's: its text model's, what is counted here)."""
        model_type = self.read_as
        hf: dict = {"architectures": [self.classes[model_type]]} if model_type in self.classes else {}
        hf["model_type"] = model_type
        for field_name, entry in self.keys():
            hf |= entry.writes(self, field_name, model_type)
        for group in self.groups:
            hf |= group.write(self)
        return hf

    def to_dict(self) -> dict:
        """The config as the JSON's "model" object holds it: the family, its fields, then its derived sizes."""
        d: dict = {"family": self.family} | {name: jsonable(getattr(self, name)) for name in self.dict_first}
        for f in self.in_dict_order():
            entry = f.metadata.get("key")
            name = f.name if entry is None or entry.dict_key == "" else entry.dict_key
            if name is not None:
                value = getattr(self, f.name)
                d[name] = entry.dict_value(value) if entry is not None and entry.dict_value else jsonable(value)
        return d | {name: jsonable(getattr(self, name)) for name in self.dict_last}

    def in_dict_order(self) -> list:
        """The fields as to_dict writes them: the name beside the model type (last where the family keeps none)."""
        ordered = [f for f in fields(self) if f.name != "name"]
        at = next((i + 1 for i, f in enumerate(ordered) if f.name == "model_type"), len(ordered))
        ordered.insert(at, self.__dataclass_fields__["name"])
        return ordered

    def __post_init__(self) -> None:
        """The name, where none is given; each field its key's kind (a NumPy number made the Python one it holds; a None
        that follows from other fields made so; a None that is the default needs no check), then the family's own checks
        (validate), a mixture's k of E, then each group's."""
        if not self.name:
            object.__setattr__(self, "name", next(iter(self.classes), self.family))
        for field_name, entry in self.keys():
            value = getattr(self, field_name)
            if isinstance(value, np.generic):  # a NumPy number (a size read from an array) is the number it holds
                object.__setattr__(self, field_name, value := value.item())
            if value is None and entry.follows_from is not None:  # its rule at transformers' defaults
                object.__setattr__(self, field_name, value := entry.kind.read(entry.follows_from({}, vars(self))))
            default = entry.default_for(self.read_as)
            if not isinstance(default, Fixed) and not (value is None and default is None):
                entry.kind.check(entry.json, value)
        layer_types = getattr(self, "layer_types", ())
        if layer_types is None:  # a family without a rule for them (LFM2-MoE's): transformers' config needs them too
            raise UserError(
                f"config {self.key('layer_types')} is needed: a {self.family} model names each layer's kind"
            )
        if "layer_types" in self.__dataclass_fields__ and len(self.layer_types) != self.n_layer:
            raise UserError(
                f"config {self.key('layer_types')} must name {self.n_layer} layers, not {len(self.layer_types)}"
            )
        if self.n_experts is not None and self.n_experts > MAX_EXPERTS:  # each expert's tensors are walked one by one
            raise UserError(
                f"config {self.key('n_experts')}={self.n_experts:,} is more experts than a layer can have here (at "
                f"most {MAX_EXPERTS:,}: 10**7 ran for minutes); give the checkpoint's own number"
            )
        self.validate()
        if self.routes and self.top_k is not None:  # a mixture's k of E, whatever else it checks
            check_experts(self)
        for group in self.groups:
            group.check(self)

    def validate(self) -> None:
        """The family's checks of its fields together (heads that divide evenly...): none here."""

    @property
    def routes(self) -> bool:
        """Whether some layer routes its tokens among experts (a family whose config can leave it none says so)."""
        return self.n_experts is not None

    @property
    def read_as(self) -> str:
        """The model_type whose keys the config holds: a multimodal checkpoint's text model's."""
        model_type = getattr(self, "model_type", self.family)
        return self.multimodal.get(model_type, model_type)

    # --- what the rest of the code asks (a family whose sizes are named otherwise says so) ---------------------------
    @property
    def d_model(self) -> int:
        return self.n_embd

    @property
    def d_head(self) -> int:
        """A head's width: the config's head_dim, or D / H."""
        return getattr(self, "head_dim", None) or self.n_embd // self.n_head

    @property
    def d_ff(self) -> int:
        """The MLP's width (n_inner: config.json's intermediate_size)."""
        return self.n_inner

    @property
    def n_kv_head(self) -> int:
        """Key/value heads: one a query head (a family whose heads share keys and values has a field)."""
        return self.n_head

    @property
    def checkpoint_kind(self) -> str:
        """What a checkpoint of this config is called in messages: "mistral model"."""
        return f"{getattr(self, 'model_type', self.family)} model"

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
    def eos_token_ids(self) -> tuple[int, ...]:
        if self.eos_token_id is None:
            return ()
        return tuple(self.eos_token_id) if isinstance(self.eos_token_id, tuple) else (self.eos_token_id,)

    def check_fits(self, n_prompt: int, n_new: int) -> None:
        check_fits(self, n_prompt, n_new)

    # Layers may differ from one another (a sliding window on some, a dense MLP beside experts): a family whose layers
    # do keeps their kinds in a field `layer_types`, one a layer; layers of one kind compute the same products, so
    # count runs one of each.
    @cached_property  # asked of every layer (layer_window, layer_cache, a count of 10,000 layers 120,000 times)
    def layer_types(self) -> tuple[str, ...]:
        """Each layer's kind, in order (transformers' names where it has them): here every layer alike."""
        kind = FULL if self.sliding_window is None else SLIDING
        return (kind,) * self.n_layer

    @property
    def layers_holding_each_kind(self) -> int:
        """The fewest first layers that hold one layer of each kind (1 where all are alike): the model a count runs,
        whatever its depth, and a stage table's dry run."""
        kinds = self.layer_types
        return 1 + max(kinds.index(kind) for kind in set(kinds))

    def layer_window(self, layer: int) -> int | None:
        """The sliding window of a layer's attention (None: it sees every earlier position)."""
        return self.sliding_window if slides(self.layer_types[layer]) else None

    def layer_chunk(self, layer: int) -> int | None:
        """The chunk of a layer's chunked attention (Llama 4's attention_chunk_size: a query reads only the keys of its
        own chunk of that many positions), None where it has none; its layer_window is then the chunk, which holds
        every key its queries read."""
        return None

    def layer_cache(self, layer: int) -> KeysValues | State:
        """What a layer keeps from one pass for the next (engine/kvcache.py): an attention layer's keys and values,
        n_kv_head heads of d_head and d_value a position, read back from its window; a family whose layers keep
        something else (a recurrent state, nothing) says so here, and the cache, memory and reports follow. An
        indexer's keys (d_index) are kept beside K and V, a row of d_index numbers a position: index_keys."""
        rows = (("index_keys", (self.d_index,)),) if self.d_index is not None else ()
        return KeysValues(self.n_kv_head, self.d_head, self.d_value, self.layer_window(layer), rows)

    def prefix(self, n_layer: int) -> Any:
        """The same model cut to its first n_layer layers (count's twin)."""
        names = self.__dataclass_fields__
        cut: dict[str, Any] = {"n_layer": n_layer} if "n_layer" in names else {}
        if "layer_types" in names:
            cut["layer_types"] = self.layer_types[:n_layer]
        return replace(self, **cut)

    def rope(self, layer: int) -> Rope | None:
        """The rotary positions of a layer's attention (families/rotary.py), None where it has none (GPT-2's learned
        positions, a layer without attention)."""
        return None


def shape_defaults(hf: dict) -> dict[str, Any]:
    """The keys that change the model's shapes which a config.json left out and its family read with a default, by
    their dotted names ("text_config.linear_num_value_heads"), and the default each took; {} for a plain dict."""
    if not isinstance(hf, ConfigJson):
        return {}
    return {key: value for key, value in hf.taken.items() if key in hf.shapes}


def heads_of_width(heads: int | None = None, width: int | None = None) -> Refusal:
    """A head_dim other than hidden_size / num_attention_heads (the file's, or `heads` and `width` where it has none),
    refused: the attention's heads are D / H wide whatever head_dim says (GPT-NeoX's, Phi-3's rotary would read it,
    their attention would not)."""

    def other(head_dim, hf: dict) -> bool:
        H, D = hf.get("num_attention_heads", heads), hf.get("hidden_size", width)
        return head_dim is not None and not (type(head_dim) is int and type(H) is int and head_dim * H == D)

    return Refusal("head_dim", "other than hidden_size / num_attention_heads is not supported", other)


def own_kv_heads(heads: int) -> Refusal:
    """num_key_value_heads other than the query heads (num_attention_heads, `heads` where the file has none), refused:
    multi-head latent attention (MLA) gives each head its own keys and values, which eager attention would repeat.
    Query heads that are not a number are refused under their own key."""

    def other(kv_heads, hf: dict) -> bool:
        query = unnoted(hf, "num_attention_heads", heads)
        return kv_heads is not None and type(query) is int and kv_heads != query

    return Refusal("num_key_value_heads", "is not supported: MLA gives each head its own keys and values", other)


class SharedExperts:
    """A mixture whose shared experts are one gated MLP as wide as n_shared_experts routed ones (DeepSeek-V3's and
    -V4's, GLM-4.5's; parts/moe.py's SharedExpert reads d_shared)."""

    n_shared_experts: int
    moe_inner: int  # a routed expert's width (moe_intermediate_size)

    @property
    def d_shared(self) -> int:
        return self.n_shared_experts * self.moe_inner


def check_multiple(config: ModelConfig, whole: str, part: str, why: str = "") -> None:
    """A field a multiple of another (heads sharing keys, value heads per key head), refused under their config.json
    keys."""
    many, each = getattr(config, whole), getattr(config, part)
    if many % each:
        raise UserError(f"config {config.key(whole)}={many} is not a multiple of {config.key(part)}={each}{why}")


# The most experts a layer may have: 32 times the most any model here has (Qwen3.5's and Qwen3-Next's 512); each
# expert's tensors and records are walked one by one, so 10**5 took 8 s to count and 10**7 minutes and gigabytes.
MAX_EXPERTS = 16_384


def check_experts(config: ModelConfig) -> None:
    """A mixture of experts' k at most E (each named as the family's config.json spells it)."""
    if config.top_k > config.n_experts:  # type: ignore[operator]
        raise UserError(
            f"config {config.key('top_k')}={config.top_k} exceeds {config.key('n_experts')}={config.n_experts}"
        )


def check_fits(config, n_prompt: int, n_new: int) -> None:
    """Refuse a prompt plus new tokens that the context cannot hold, saying how many would fit. They take n_prompt +
    n_new - 1 positions: the last new token is never fed back (a prompt that fills the context still gives one)."""
    fed = n_prompt + n_new - 1
    if fed <= config.n_positions:
        return
    room = config.n_positions - n_prompt + 1
    fits = (
        f"at most {room:,} new token{'s fit' if room > 1 else ' fits'}" if room > 0 else "the prompt alone is too long"
    )
    raise UserError(
        f"a {n_prompt:,}-token prompt plus {n_new:,} new token{'' if n_new == 1 else 's'} exceed "
        f"{config.name}'s context of {config.n_positions:,} positions (they take {fed:,}: every token but the last "
        f"new one is fed to the model); {fits}"
    )


def read_config_json(path: Path) -> dict:
    """The JSON object of a config.json, refused in one line if it is missing, unreadable or empty."""
    try:
        hf = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist") from None
    except OSError as err:  # not readable by this user, a directory
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None
    except ValueError as err:  # not JSON, not UTF-8, or a number past Python's 4,300 digits
        raise UserError(f"{path} is not valid JSON ({err}); re-download or fix the file") from None
    except RecursionError:  # arrays or objects nested past Python's recursion limit
        raise UserError(f"{path} nests too deeply to be a config.json; re-download or fix the file") from None
    if not isinstance(hf, dict):
        raise UserError(f"{path} holds {type(hf).__name__}, not a JSON object; re-download or fix the file")
    if not hf:
        raise UserError(f"{path} is empty ({{}}): no shapes to build a model from; re-download or fix the file")
    return hf
