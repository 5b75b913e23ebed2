"""Weights from a Hugging Face-format directory: memory-mapped safetensors, checked against the config.

The arrays are read-only views into the mapped files: loading costs no copy of float32 weights and
the operating system pages them in as the forward pass first touches them. float16 and bfloat16
files are upcast to float32 once at load (the arithmetic is float32 end to end). For the float64
reference (load_model(..., dtype="float64")) every weight is upcast to float64 at load instead, a
copy in memory twice the float32 size; the upcast is exact, so both read the same numbers. Pickled
PyTorch files (`.bin`, `.pt`) are never opened: unpickling runs arbitrary code.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from safetensors import SafetensorError, safe_open

from ..engine.precision import Format, Precision, checked_finite, widened
from ..errors import UserError, readable
from ..families.architecture import ELEMENTWISE_KINDS, INDEX_KINDS
from ..families.config import ModelConfig
from ..families.parts.decoder import tree_of
from ..families.table import architecture_of

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def expected_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every weight tensor of the model by its Hugging Face name, without the base model's prefix."""
    return architecture_of(config).layout.shapes(config)


def token_embedding(params: SimpleNamespace, config: ModelConfig):
    """The token embedding W_te [V, D] of a weight tree (the family's layout names it)."""
    node = params
    for part in architecture_of(config).layout.embedding.split("."):
        node = getattr(node, part)
    return node


def as_tree(flat: Mapping[str, object], config: ModelConfig) -> SimpleNamespace:
    """{"h.0.attn.c_attn.weight": w, ...} -> tree.h[0].attn.c_attn.weight, mirroring the checkpoint
    (the blocks are `h` in a GPT-2, `layers` in a Llama: the family's layout says)."""
    return tree_of(flat, architecture_of(config).layout.layers, config.n_layer)


@dataclass(frozen=True)
class _TensorInfo:
    file: Path
    dtype: str
    shape: tuple[int, ...]
    start: int  # byte offsets into the file
    end: int


_DTYPES: dict[str, np.dtype] = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}
# Index tables a checkpoint keeps as integers (DeepSeek-V4's hash routing, tid2eid [V, k]): read as they are, never
# a weight of a product
_INDEX_DTYPES: dict[str, np.dtype] = {"I64": np.dtype("<i8"), "I32": np.dtype("<i4")}


def _read_header(path: Path) -> dict[str, _TensorInfo]:
    """Let safetensors validate the file, then locate each tensor's bytes for mapping."""
    readable(path)  # safetensors says "No such file" of a file it may not read
    try:
        with safe_open(str(path), framework="numpy"):
            pass
    except (SafetensorError, OSError) as err:
        raise UserError(f"{path} is not a readable safetensors file ({err}); re-download it") from None
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    data_start = 8 + header_len
    header.pop("__metadata__", None)
    return {
        name: _TensorInfo(
            path, h["dtype"], tuple(h["shape"]), data_start + h["data_offsets"][0], data_start + h["data_offsets"][1]
        )
        for name, h in header.items()
    }


def _weight_files(directory: Path) -> list[Path]:
    index = directory / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text("utf-8"))["weight_map"]
            files = sorted(set(weight_map.values()))
            if not all(isinstance(f, str) for f in files):
                raise TypeError("a shard is not named by a string")
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):  # ValueError: a number too long too
            raise UserError(f"{index} is not a valid safetensors index; re-download the model") from None
        outside = [f for f in files if Path(f).is_absolute() or ".." in Path(f).parts]
        if outside:
            raise UserError(f"{index} names a shard outside {directory} ({outside[0]}); re-download the model")
        missing = [f for f in files if not (directory / f).is_file()]
        if missing:
            raise UserError(f"{directory} is missing shard {missing[0]} listed in {SAFETENSORS_INDEX}; re-download")
        return [directory / f for f in files]
    if (directory / SAFETENSORS).is_file():
        return [directory / SAFETENSORS]
    pickles = sorted(p.name for p in directory.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise UserError(
            f"{directory} has only pickled PyTorch weights ({pickles[0]}), which minitransformer never unpickles; "
            f"convert them to {SAFETENSORS} (for example with transformers' save_pretrained(..., safe_serialization=True))"
        )
    raise UserError(f"{directory} has no weights: expected {SAFETENSORS} or {SAFETENSORS_INDEX}")


def load_weights(
    directory: Path,
    config: ModelConfig,
    dtype=np.float32,
    precision: Precision | None = None,
    weights: str = "auto",
    events: list | None = None,
) -> SimpleNamespace:
    """Map every tensor of the checkpoint, check names, shapes and dtypes, return the tree of arrays: float64 for the
    reference; else float32, the matrices of a float16 or bfloat16 file kept in its bytes as `weights` says
    ("stored", "float32" or "auto"); or, at a `precision`, each rounded to its format (the module's docstring), the
    weights that left its range in `events` (RangeEvent, role "weight")."""
    architecture = architecture_of(config)
    tensors, prefix = _tensors_by_our_names(directory, architecture)
    expected = expected_shapes(config)
    if config.tie_word_embeddings:
        _check_tied_head(directory, tensors, architecture)
        tensors.pop("lm_head.weight", None)  # a tied head saved twice is the same tensor as wte
    drafting = _mtp_shapes(architecture, config, tensors, directory)
    _check_names(directory, config, architecture, tensors, expected, drafting)
    keep_stored = weights == "stored" or (weights == "auto" and not _upcast_fits(tensors.values()))
    maps: dict[Path, np.memmap] = {}
    arrays = {}
    for name, shape in expected.items():
        info = tensors[name]
        _check_tensor(directory, config, architecture, name, info, shape)
        if info.file not in maps:
            maps[info.file] = np.memmap(info.file, dtype=np.uint8, mode="r")
        if info.dtype in _INDEX_DTYPES:  # an index table: its integers as they are
            bytes_ = maps[info.file][info.start : info.end]
            arrays[name] = bytes_.view(_INDEX_DTYPES[info.dtype]).view(np.ndarray).reshape(shape).astype(np.int64)
            continue
        raw = maps[info.file][info.start : info.end].view(_DTYPES[info.dtype]).view(np.ndarray).reshape(shape)
        if np.dtype(dtype) == np.float64 or (precision is None and (not keep_stored or info.dtype == "F32")):
            arrays[name] = _upcast(raw, info.dtype, np.dtype(dtype))
        else:
            arrays[name] = _held(
                raw,
                info.dtype,
                precision,
                _read_by_products(architecture, name, shape, config),
                name == architecture.layout.embedding,
                prefix + name,
                events,
            )
    tree = as_tree(arrays, config)
    if drafting:  # the MTP layers' weights, as float32 (or float64) whatever the precision: a tree of their own
        mtp = {
            n: _upcast(_raw(maps, tensors[n], s), tensors[n].dtype, np.dtype(dtype)) for n, s in drafting.items() if s
        }
        tree.mtp = mtp_tree(mtp, architecture.layout.layers, config.n_layer)
    return tree


def _tensors_by_our_names(directory: Path, architecture) -> tuple[dict[str, _TensorInfo], str]:
    """Every tensor of the checkpoint's files by the name the family's layout reads (the base model's prefix taken off,
    the layout's renames applied), and the prefix the last one carried (load_weights names a weight's range events
    with it)."""
    tensors: dict[str, _TensorInfo] = {}
    named: dict[str, str] = {}  # ours -> the checkpoint's name it was read from
    prefixes = sorted({architecture.layout.prefix, *architecture.layout.prefixes}, key=len, reverse=True)
    prefix = ""
    for file in _weight_files(directory):
        for name, info in _read_header(file).items():
            prefix = next((p for p in prefixes if name.startswith(p)), "")
            ours = name[len(prefix) :]
            for pattern, replacement in architecture.layout.renamed:
                ours = re.sub(pattern, replacement, ours)
            if named.setdefault(ours, name) != name:  # two tensors for one weight: which one is meant is a guess
                raise UserError(
                    f"{directory}: the weight {ours} is stored twice, as {named[ours]} and as {name}; keep one"
                )
            tensors[ours] = info
    return tensors, prefix


def _check_tied_head(directory: Path, tensors: dict, architecture) -> None:
    """A config that ties the unembedding to the embedding, beside a checkpoint that stores a head of its own: the
    same numbers (a tied head saved twice) are dropped; different ones refused (transformers would keep the stored
    head untied, against config.json)."""
    head, table = tensors.get("lm_head.weight"), tensors.get(architecture.layout.embedding)
    if head is None or table is None:
        return  # nothing stored twice
    if head.dtype not in _DTYPES:  # dropped below, it would never reach _check_tensor (an F64 head went unread)
        raise _unread_dtype(directory, "lm_head.weight", head.dtype)
    if table.dtype not in _DTYPES:
        return  # _check_tensor refuses it
    maps: dict[Path, np.memmap] = {}
    same = head.shape == table.shape
    if same and head.dtype == table.dtype:  # the stored numbers themselves, read from the mapped files, no copy
        same = np.array_equal(_raw(maps, head, head.shape), _raw(maps, table, table.shape))
    elif same:
        widened = [_upcast(_raw(maps, t, t.shape), t.dtype, np.dtype(np.float32)) for t in (head, table)]
        same = np.array_equal(widened[0], widened[1])
    if not same:
        raise UserError(
            f"{directory}: config.json ties the unembedding to the embedding (tie_word_embeddings), but the checkpoint "
            f"stores a different lm_head.weight; set tie_word_embeddings to false to use it"
        )


def _check_names(
    directory: Path, config: ModelConfig, architecture, tensors: dict, expected: dict, drafting: dict
) -> None:
    """Refuse a checkpoint with a tensor the config does not make (the layout's ignored ones and the MTP layers'
    aside), or without one it makes: the first of either, by name."""
    ignored = architecture.layout.ignored_pattern
    unexpected = sorted(n for n in tensors if n not in expected and n not in drafting and not ignored.match(n))
    if unexpected:
        kind = config.checkpoint_kind
        raise UserError(f"{directory}: unexpected tensor {unexpected[0]} for a {kind} with this config.json")
    missing = [n for n in expected if n not in tensors]
    if missing:
        raise UserError(f"{directory}: tensor {missing[0]} is missing from the weights{_listed(directory, missing[0])}")


def _listed(directory: Path, name: str) -> str:
    """Where the shard index says a tensor missing from its shards is (an index that lists it in the wrong file), or
    nothing."""
    index = directory / SAFETENSORS_INDEX
    if not index.is_file():
        return ""
    weight_map = json.loads(index.read_text("utf-8"))["weight_map"]  # read and checked by _weight_files already
    shard = next((f for listed, f in weight_map.items() if listed == name or listed.endswith("." + name)), None)
    return f" ({SAFETENSORS_INDEX} lists it in {shard}, which does not hold it; re-download)" if shard else ""


def _check_tensor(directory: Path, config: ModelConfig, architecture, name: str, info: _TensorInfo, shape) -> None:
    """Refuse a tensor whose shape is not the config's, or whose dtype is no float we read (an integer one only where
    the family declares an index table)."""
    if info.shape != shape:
        raise UserError(
            f"{directory}: tensor {name} has shape {list(info.shape)} but config.json implies {list(shape)}"
        )
    if info.dtype not in _DTYPES and not (info.dtype in _INDEX_DTYPES and _is_index_table(architecture, name, config)):
        raise _unread_dtype(directory, name, info.dtype)


def _unread_dtype(directory: Path, name: str, dtype: str) -> UserError:
    return UserError(f"{directory}: tensor {name} is {dtype}; only F32, F16 and BF16 weights are supported")


def _mtp_shapes(architecture, config: ModelConfig, tensors: dict, directory: Path) -> dict[str, tuple[int, ...]]:
    """The checkpoint's multi-token-prediction tensors where the family has them (families/parts/mtp.py) and the
    checkpoint holds them, by name -> shape (() for the copies of the embedding and head, not read); {} where it has
    none. Half of them is refused by the first missing."""
    mtp = getattr(architecture.forward, "mtp", None)
    if mtp is None or not mtp.n_layers(config):
        return {}
    shapes = {name: tensor.shape for name, tensor in mtp.tensors(config).items()}
    if not any(name in tensors for name in shapes):
        return {}
    missing = [name for name in shapes if name not in tensors]
    if missing:
        raise UserError(f"{directory}: tensor {missing[0]} of the multi-token-prediction layers is missing")
    for name, shape in shapes.items():
        if tensors[name].shape != shape or tensors[name].dtype not in _DTYPES:
            raise UserError(
                f"{directory}: tensor {name} has shape {list(tensors[name].shape)} ({tensors[name].dtype}) "
                f"but config.json implies {list(shape)} in F32, F16 or BF16"
            )
    return shapes | dict.fromkeys(mtp.copies(config), ())


def _raw(maps: dict, info: _TensorInfo, shape: tuple[int, ...]) -> np.ndarray:
    if info.file not in maps:
        maps[info.file] = np.memmap(info.file, dtype=np.uint8, mode="r")
    return maps[info.file][info.start : info.end].view(_DTYPES[info.dtype]).view(np.ndarray).reshape(shape)


def mtp_tree(flat: Mapping[str, object], layers: str, n_layer: int) -> list:
    """{"layers.61.eh_proj.weight": w, ...} -> a list of the MTP layers' trees (mtp[0].eh_proj.weight)."""
    renumbered = {}
    for name, value in flat.items():
        _, index, rest = name.split(".", 2)
        renumbered[f"{layers}.{int(index) - n_layer}.{rest}"] = value
    n = 1 + max(int(name.split(".")[1]) for name in renumbered)
    return getattr(tree_of(renumbered, layers, n), layers)


def _is_index_table(architecture, name: str, config: ModelConfig) -> bool:
    """Whether a tensor is one of the integer tables a family's parts declare (a kind of INDEX_KINDS)."""
    return architecture.layout.kind(name, config) in INDEX_KINDS


def _upcast_fits(tensors) -> bool:
    """Whether a float32 copy of the checkpoint's 2-byte tensors fits in half the memory available now."""
    wide = sum(4 * int(np.prod(t.shape)) for t in tensors if t.dtype in ("F16", "BF16"))
    return wide == 0 or wide <= available_memory() / 2


def available_memory() -> float:
    """Bytes of memory available to a new allocation (Linux: MemAvailable), or infinity where not known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import os

        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return float("inf")


def holds_narrow(tree) -> bool:
    """Whether a weight tree holds any array in a format narrower than float32 (kept as stored, or at a precision)."""
    if isinstance(tree, SimpleNamespace):
        return any(holds_narrow(v) for v in vars(tree).values())
    if isinstance(tree, list):
        return any(holds_narrow(v) for v in tree)
    return isinstance(tree, np.ndarray) and tree.dtype.kind != "i" and tree.dtype not in (np.float32, np.float64)


def held_formats(params: SimpleNamespace, config: ModelConfig) -> dict[str, str]:
    """The formats narrower than float32 the weights are really held in, read from the arrays themselves:
    {"weights": the matrices products read, "embedding": the token embedding where it differs}. At fp8 the two
    differ (matrices in float8_e4m3fn, the embedding, a stage's values once looked up, in bfloat16); a 2-byte
    checkpoint kept as stored holds both in its format; {} where everything is float32 or float64."""
    embedding = token_embedding(params, config)
    matrices: set[str] = set()

    def visit(node) -> None:
        if isinstance(node, SimpleNamespace):
            for value in vars(node).values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)
        elif isinstance(node, np.ndarray) and node is not embedding and node.ndim >= 2:
            if node.dtype not in (np.float32, np.float64) and node.dtype.kind != "i":  # an index table is no weight
                matrices.add(node.dtype.name)

    visit(params)
    held = {"weights": ", ".join(sorted(matrices))} if matrices else {}
    if isinstance(embedding, np.ndarray) and embedding.dtype not in (np.float32, np.float64):
        if embedding.dtype.name != held.get("weights"):
            held["embedding"] = embedding.dtype.name
    return held


def _read_by_products(architecture, name: str, shape: tuple[int, ...], config: ModelConfig) -> bool:
    """A matrix that only products (and the token lookup) read: every tensor of two or more dimensions but a
    position table (GPT-2's W_pe, added to the embeddings), the biases of gpt-oss's experts and what element-wise
    stages read (ELEMENTWISE_KINDS: a scan's decays)."""
    kind = architecture.layout.kind(name, config)
    return len(shape) >= 2 and not name.endswith("bias") and kind not in ("position_embedding", *ELEMENTWISE_KINDS)


def _held(
    raw: np.ndarray,
    stored: str,
    precision: Precision | None,
    matrix: bool,
    embedding: bool,
    name: str = "",
    events: list | None = None,
) -> np.ndarray:
    """A stored tensor as the forward pass holds it beside a float16 or bfloat16 file, or at a precision.

    float32 (precision None): a matrix kept as a view of the file in its 2 bytes, the rest widened. At a precision:
    a product's matrix in the operands' format, the token embedding (looked up, then a stage's values) and the
    small tensors in the values' format; the small ones widened back to float32 for the element-wise stages."""
    if precision is None:
        return _kept(_narrow_view(raw, stored)) if matrix or embedding else _upcast(raw, stored, np.dtype(np.float32))
    fmt = precision.operands if matrix and not embedding else precision.values
    assert fmt is not None  # a precision other than float32 rounds both
    held = _in_format(raw, stored, fmt)
    if events is not None and held.base is None:  # rounded here (not the file's own bytes): did it leave the range?
        events.extend(
            Precision.range_events(fmt, _upcast(raw, stored, np.dtype(np.float32)), widened(held), name, "weight")
        )
    return _kept(held) if matrix or embedding else widened(held)


def _kept(held: np.ndarray) -> np.ndarray:
    """A matrix held narrow, for products to widen as they read it: read-only (the file's bytes are; a copy rounded
    here is made so), and float16 marked where it holds no infinity or NaN (precision.checked_finite)."""
    held.flags.writeable = False
    return checked_finite(held)


def _narrow_view(raw: np.ndarray, stored: str) -> np.ndarray:
    """A float16 file's tensor as it is; a bfloat16 one viewed as ml_dtypes' bfloat16: no copy either way."""
    if stored != "BF16":
        return raw
    import ml_dtypes

    return raw.view(ml_dtypes.bfloat16)


def _in_format(raw: np.ndarray, stored: str, fmt: Format) -> np.ndarray:
    """A stored tensor in `fmt`: its own bytes where the file holds that format, else rounded from float32 (a copy)."""
    if stored != "F32" and _narrow_view(raw, stored).dtype == fmt.dtype:
        return _narrow_view(raw, stored)
    return fmt.round(_upcast(raw, stored, np.dtype(np.float32)))


def _upcast(raw: np.ndarray, stored: str, dtype: np.dtype) -> np.ndarray:
    """A stored tensor (F32, F16 or BF16) as `dtype`: every stored number is exactly a float32 and a float64."""
    if stored == "F32":
        return raw if dtype == np.float32 else raw.astype(dtype)  # float32: a read-only view of the file, no copy
    if stored == "F16" and dtype != np.float32:
        return raw.astype(dtype)  # float64 from float16 itself (a NaN keeps float16's payload)
    as_float32 = widened(_narrow_view(raw, stored))  # exact: precision.widened, the one way to float32
    return as_float32 if dtype == np.float32 else as_float32.astype(dtype)
