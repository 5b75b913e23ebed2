"""Hooks and captures: look at (or replace) any named intermediate tensor of the forward pass.

Every stage of the forward pass goes through the tape, which hands its output to one optional
watcher (tape.py). This module builds that watcher from what people asked for:

- hooks, `model.add_hook("blocks.3.attn.weights", fn)`: `fn(tensor, name)` reads the tensor and
  may return a replacement (None keeps it); they stay until their handle is removed;
- a capture, `model.run_with_cache(ids)`: references to the stage outputs, kept in an
  `ActivationCache` for one call;
- a breakpoint, `model.break_at(name)`: a hook that opens pdb with the tensor in scope.

When nobody asked for anything the watcher is None and the tape skips the call altogether: tracing
that is off costs nothing. A capture keeps the arrays the forward pass made, never copies: the ops
return new arrays and never write into their inputs (ops.py), so a kept tensor stays as it was.

Names are the interface (stages.py): `embed`, `blocks.{i}.ln_1`, `blocks.{i}.attn.qkv`,
`blocks.{i}.attn.q` / `.k` / `.v`, `blocks.{i}.attn.keys` / `.values`, `blocks.{i}.attn.qk`,
`blocks.{i}.attn.scaled`, `blocks.{i}.attn.scores`, `blocks.{i}.attn.weights`,
`blocks.{i}.attn.mix`, `blocks.{i}.attn.z`, `blocks.{i}.attn.out`, `blocks.{i}.resid_mid`,
`blocks.{i}.ln_2`, `blocks.{i}.mlp.up`, `blocks.{i}.mlp.act`, `blocks.{i}.mlp.down`,
`blocks.{i}.resid_post`, `ln_f`, `last` (generation only), `logits`. A Llama-family model has the
same names where a stage plays the same part, and its own where it differs: `attn.q_proj`,
`attn.k_proj`, `attn.v_proj` (the three products), `attn.q_rot`, `attn.k_rot` (after RoPE),
`mlp.gate`, `mlp.mul` (stages.py lists them all). Wherever a name is expected, a glob
(`blocks.*.attn.weights`) works too.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterable, Mapping

import numpy as np

from ..errors import UserError
from ..text import human
from .ledger import Record
from .lens_names import Alias, as_lens, from_lens, is_lens_name, lens_matches
from .shapes import ShapeOnly
from .stages import StageTable
from .tape import Watcher

Hook = Callable[[np.ndarray, str], "np.ndarray | None"]  # fn(tensor, name) -> a replacement, or None


def stage_names(n_layer: int, stage_table: StageTable) -> list[str]:
    """Every capture name of a model with n_layer blocks, in the order the forward pass produces them."""
    return stage_table.stage_names(n_layer)


def selector(
    which, known: list[str], what: str = "names=", aliases: dict[str, Alias] | None = None
) -> Callable[[str], bool]:
    """A predicate over stage names from a name, a glob, a list of them, or a predicate.

    A name or glob that matches none of `known` is refused: a typo should not capture nothing silently. A name with
    "hook_" in it is TransformerLens's (lens_names.py): it selects the stages of ours its `aliases` entries read.
    """
    if which is None:
        return lambda name: True
    if callable(which):
        return which
    patterns = as_patterns(which, what)
    lensed = {ours for alias in lens_aliases_of(patterns, aliases or {}, known) for ours in alias.ours}
    patterns = [p for p in patterns if not is_lens_name(p)]
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in known):
            close = difflib.get_close_matches(_from_transformer_lens(pattern), known, n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else f"; names look like {known[1]!r}"
            raise UserError(f"no stage is named {pattern!r}{hint} (model.stage_names lists them all)")
    exact = {p for p in patterns if not any(c in p for c in "*?[")} | lensed
    globs = [p for p in patterns if p not in exact]
    return lambda name: name in exact or any(fnmatch.fnmatchcase(name, g) for g in globs)


def as_patterns(which, what: str) -> list[str]:
    """Names or globs given as one or as any collection of them (a list, a set, a dict's keys...), refused in words
    otherwise."""
    patterns = [which] if isinstance(which, str) else list(which) if isinstance(which, Iterable) else None
    if patterns is None or not all(isinstance(p, str) for p in patterns):
        raise UserError(f"{what} must be a name, a glob, a list of them or a predicate, not {which!r:.60}")
    return patterns


def lens_aliases_of(patterns: list, aliases: dict[str, Alias], known: list[str]) -> list[Alias]:
    """The TransformerLens names (lens_names.py) among `patterns`, each refused if it names no stage of this model."""
    found: list[Alias] = []
    for pattern in patterns:
        if not (isinstance(pattern, str) and is_lens_name(pattern)):
            continue
        names = lens_matches(pattern, aliases)
        if not names:
            close = difflib.get_close_matches(pattern, list(aliases), n=3)
            hint = f"; did you mean {' or '.join(close)}?" if close else ""
            raise UserError(
                f"no stage of this model has TransformerLens's name {pattern!r}{hint} (docs/api.md lists them)"
            )
        found += [aliases[name] for name in names]
    return found


def _from_transformer_lens(pattern: str) -> str:
    """TransformerLens habits ("blocks.0.attn.hook_pattern") pointed at our names, for suggestions only."""
    for theirs, ours in (("pattern", "weights"), ("attn_scores", "scores"), ("hook_", "")):
        pattern = pattern.replace(theirs, ours)
    return pattern


class HookHandle:
    """What add_hook returns: `.remove()` takes the hook off again (removing twice is harmless)."""

    def __init__(self, registry: HookRegistry, hook: _Hook) -> None:
        self._registry, self._hook = registry, hook

    def remove(self) -> None:
        self._registry._remove(self._hook)

    def __enter__(self) -> HookHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "active" if self._hook in self._registry._hooks else "removed"
        return f"HookHandle({self._hook.label}, {state})"


class _Hook:
    def __init__(self, label: str, matches: Callable[[str], bool], fn, with_record: bool) -> None:
        self.label, self.matches, self.fn, self.with_record = label, matches, fn, with_record


class HookRegistry:
    """A model's hooks, in the order they were added: on a stage they run one after the other."""

    def __init__(self, names: Callable[[], list[str]], aliases: Callable[[], dict[str, Alias]] = dict) -> None:
        self._names = names  # the model's stage names, to check patterns against
        self._aliases = aliases  # and their TransformerLens names (lens_names.py)
        self._hooks: list[_Hook] = []
        self._by_name: dict[str, tuple[_Hook, ...]] = {}  # which hooks a name meets, worked out once

    def __len__(self) -> int:
        return len(self._hooks)

    def __repr__(self) -> str:
        return f"HookRegistry([{', '.join(h.label for h in self._hooks)}])"

    def add(self, which, fn: Hook | Callable, with_record: bool = False) -> HookHandle:
        if not callable(fn):
            raise UserError(f"a hook is a function fn(tensor, name), not {fn!r:.60}")
        label = f"{which!r} -> {getattr(fn, '__qualname__', repr(fn))}"
        patterns = None if callable(which) else as_patterns(which, "hook names")  # None too: "*" hooks every stage
        if patterns is not None and any(is_lens_name(p) for p in patterns):
            fn, with_record = _lensed(fn, which, self._names(), self._aliases(), with_record), True
            which = [name for alias in lens_aliases_of(patterns, self._aliases(), []) for name in alias.ours] + [
                p for p in patterns if not is_lens_name(p)
            ]
        hook = _Hook(label, selector(which, self._names(), "hook names"), fn, with_record)
        self._hooks.append(hook)
        self._by_name.clear()
        return HookHandle(self, hook)

    def _remove(self, hook: _Hook) -> None:
        if hook in self._hooks:
            self._hooks.remove(hook)
            self._by_name.clear()

    def clear(self) -> None:
        self._hooks.clear()
        self._by_name.clear()

    def watcher(self, then: Watcher | None = None, settle=None) -> Watcher | None:
        """The tape's watcher: these hooks, then `then` (a capture or a trace) on what they return; `settle(name,
        tensor)` stores a replacement as the pass stores its own values (in a narrower format's numbers: the tape
        rounded the stage before the hooks saw it).

        None when there is nothing to call, so that the tape does no work at all.
        """
        if not self._hooks:
            return then
        hooks_of = self._hooks_of

        def watch(name: str, tensor, record: Record):
            given = tensor
            for hook in hooks_of(name):
                result = hook.fn(tensor, name, record) if hook.with_record else hook.fn(tensor, name)
                tensor = checked(tensor, result, name, f"hook {hook.label}")
            if tensor is not given and settle is not None:
                tensor = settle(tensor, name)
            return tensor if then is None else then(name, tensor, record)

        return watch

    def _hooks_of(self, name: str) -> tuple[_Hook, ...]:
        found = self._by_name.get(name)
        if found is None:
            found = self._by_name[name] = tuple(h for h in self._hooks if h.matches(name))
        return found


def _lensed(fn, which, known: list[str], aliases: dict[str, Alias], with_record: bool):
    """A hook given TransformerLens's names: fn sees each of them in its layout and name, and its replacement goes
    back into ours; under our names in the same list, fn sees ours as they are."""
    patterns = [which] if isinstance(which, str) else list(which)
    by_ours: dict[str, list[Alias]] = {}
    for alias in lens_aliases_of(patterns, aliases, known):
        for name in alias.ours:
            by_ours.setdefault(name, []).append(alias)
    ours = [p for p in patterns if not is_lens_name(p)]
    plain = selector(ours, known, "hook names") if ours else (lambda name: False)

    def call(tensor, name: str, record: Record):
        if plain(name):
            result = fn(tensor, name, record) if with_record else fn(tensor, name)
            tensor = checked(tensor, result, name, "a hook")  # before TransformerLens's name reads it
        batched = has_batch_axis(tensor, name, record)
        for alias in by_ours.get(name, ()):
            theirs = as_lens(tensor, alias, batched)
            result = fn(theirs, alias.name, record) if with_record else fn(theirs, alias.name)
            if result is not None and result is not theirs:  # same size in another order would be scrambled
                result = checked(theirs, result, alias.name, "a hook", f" ({alias.layout.shape})")
                tensor = from_lens(result, alias, tensor.shape, batched)
        return tensor

    call.__qualname__ = getattr(fn, "__qualname__", repr(fn))
    return call


def has_batch_axis(tensor, name: str, record: Record) -> bool:
    """Whether a stage's tensor has a batch axis in front: more axes than its shape in symbols (of this output of
    the stage, where it makes several) says."""
    index = next((i for i, n in enumerate(record.stage.names) if name == n or name.endswith("." + n)), 0)
    return np.ndim(tensor) > len(record.output_spec(index).split())


def checked(tensor, result, name: str, who: str, layout: str = ""):
    """What the pass continues with after a hook returned `result` for `tensor` (None or itself: the tensor): numbers
    of the stage's kind (numbers_of: an array of objects became NaN, a complex one lost its imaginary part), of its
    shape (`layout`: TransformerLens's, where named so), in its dtype."""
    if result is None or result is tensor:
        return tensor
    result = numbers_of(result, tensor, name, who)
    if result.shape != tensor.shape:
        raise UserError(
            f"{who} returned shape {list(result.shape)} for {name}, which is {list(tensor.shape)}{layout}; "
            "a replacement must keep the shape"
        )
    return result if result.dtype == tensor.dtype else result.astype(tensor.dtype)  # the pass keeps its dtype


def numbers_of(result, tensor, name: str, who: str):
    """A hook's result as an array of numbers the pass can continue with, of the stage's kind (whole numbers where the
    stage holds indices), or refused in words; a shape-only stand-in as it is (a shape-only model's hook)."""
    if isinstance(result, ShapeOnly):
        return result
    given = f"an array of {result.dtype}" if isinstance(result, np.ndarray) else f"a {type(result).__name__}"
    try:
        result = np.asarray(result)
    except ValueError:  # a ragged sequence: no array at all
        result = np.asarray(None)
    kinds = "iu" if tensor.dtype.kind in "iu" else "biuf"
    if result.dtype.kind not in kinds:
        wanted = "whole numbers (the stage's indices)" if kinds == "iu" else "real numbers"
        raise UserError(
            f"{who} returned {given} for {name}; a replacement is an array of {wanted} (the stage's are {tensor.dtype})"
        )
    return result


class ActivationCache(Mapping):
    """The named intermediate tensors of one forward pass: a read-only mapping name -> np.ndarray.

    Made by `model.run_with_cache(ids)`. Names are those of hooks.py, in the order they were
    computed (`list(cache)`); `cache["blocks.0.attn.weights"]` is [H, T, t] for one prompt (heads
    first for attention tensors; a [B, T] batch of ids puts B in front of every shape). The arrays
    are the forward pass's own, not copies: do not write into them (copy first to experiment).
    """

    def __init__(
        self, model: str, known: list[str], wanted: Callable[[str], bool], aliases: dict[str, Alias] | None = None
    ) -> None:
        self.model = model
        self._known = known
        self._wanted = wanted
        self._aliases = aliases or {}  # TransformerLens's names (lens_names.py)
        self._tensors: dict[str, np.ndarray] = {}
        self._batched: dict[str, bool] = {}  # whether the stage's tensor has a batch axis in front
        self._computed: set[str] = set()  # names this pass produced, for a helpful KeyError

    def capture(self, name: str, tensor, record: Record):
        """The watcher that fills the cache: keeps a reference, hands the tensor back unchanged."""
        self._computed.add(name)
        if self._wanted(name):
            self._tensors[name] = tensor
            self._batched[name] = has_batch_axis(tensor, name, record)
        return tensor

    def lens(self) -> dict[str, np.ndarray]:
        """Every captured tensor under TransformerLens's name (lens_names.py), in its layout: {name: array}."""
        return {
            name: self[name] for name, alias in self._aliases.items() if any(n in self._tensors for n in alias.ours)
        }

    def __getitem__(self, name: str) -> np.ndarray:
        if not isinstance(name, str):  # a KeyError, as a Mapping's: `5 in cache` is then False, not a TypeError
            raise KeyError(f"stage names are str (list(cache) lists them), not {name!r:.40}")
        if is_lens_name(name) and name in self._aliases:
            alias = self._aliases[name]
            ours = next((n for n in alias.ours if n in self._tensors), alias.ours[0])
            return as_lens(self[ours], alias, self._batched[ours])
        try:
            return self._tensors[name]
        except KeyError:
            raise KeyError(self._why_missing(name)) from None

    def _why_missing(self, name: str) -> str:
        if name in self._computed:
            return f"{name!r} was not captured: it is outside the names= filter of run_with_cache"
        if name == "last":
            return "'last' exists only in generation passes: use run_with_cache(ids, all_positions=False)"
        close = difflib.get_close_matches(name, list(self._tensors) or self._known, n=3)
        return f"no stage is named {name!r}" + (f"; did you mean {' or '.join(close)}?" if close else "")

    def __iter__(self):
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)

    @property
    def nbytes(self) -> int:
        """Bytes the captured arrays span (views of one buffer, such as q, k and v, each count in full)."""
        return sum(t.nbytes for t in self._tensors.values())

    def __repr__(self) -> str:
        size = human(self.nbytes)
        size += "B" if size[-1].isalpha() else " B"
        lines = [
            f"ActivationCache({self.model}: {len(self)} tensors, {size}; "
            f"cache[name] -> np.ndarray, list(cache) for every name)"
        ]
        names = list(self._tensors)
        shown: list[str | None] = [*names] if len(names) <= 24 else [*names[:20], None, *names[-3:]]
        width = max((len(n) for n in names), default=0)
        for name in shown:
            if name is None:
                lines.append(f"  ... {len(names) - 23} more")
            else:
                tensor = self._tensors[name]
                lines.append(f"  {name:<{width}}  {list(tensor.shape)} {tensor.dtype}")
        return "\n".join(lines)


def breakpoint_hook(tensor, name: str, record: Record):
    """A breakpoint: pdb opens here, with this stage's `tensor`, its `name` and its ledger `record` in scope.

    `c` continues the forward pass; assigning `tensor = ...` here before `c` replaces the stage's output.
    """
    import pdb

    print(
        f"minitransformer: stopped at {name} {list(tensor.shape)}: `tensor`, `name` and `record` are in scope; "
        f"`c` continues"
    )
    pdb.set_trace()  # noqa: T100 - the point of break_at
    return tensor
