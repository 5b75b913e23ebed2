"""Trace: one prompt's life through the forward pass, stage by stage, with shapes, counts and values.

`trace(model, prompt, new_tokens=N)` runs the N passes that generate N greedy tokens (the prefill,
then N - 1 cached decode steps: generate's own loop, verbs/trace.py) and prints every stage in the
order it runs: its name, its equation, what it reads and what it makes, each shape written
symbolically and concretely (`[H, T, t] = [12, 5, 5]`), its dot products if it is a matrix product,
and a summary of its values. Blocks that were not asked for fold into one line.

It is a watcher on the tape (tape.py) plus the ledger's records: nothing here computes the model.
With a `Stepper` it stops at each stage and asks what to do (`trace --step`).
"""

from __future__ import annotations

import os
import re
import select
import signal
import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from ..engine.kvcache import KeysValues
from ..engine.ledger import Phase, Record
from ..engine.tape import Dims
from ..errors import UserError, note, writable
from ..models.model import Model, refuse_empty
from ..models.options import LoadOptions
from ..models.registry import resolve
from ..text import count, pass_name, plural, s_for
from ..verbs.attention_maps import AttentionRecorder
from ..verbs.choices import chosen_layers
from ..verbs.drift import drift
from ..verbs.generate import Continuation
from ..verbs.trace import trace_passes
from .drift_report import drift_report
from .files import Destination
from .html_report import attention_fits, trace_data, write_page
from .report import describe_model, ties_line

NAME_WIDTH = 24  # the column of stage names
_BRACKETS = re.compile(r"\[([^\]]*)\]")  # a symbolic shape, "[H, T, dh]", as the stage table writes it


# --- reading layer choices ----------------------------------------------------------------------------
def default_layers(n_layer: int) -> list[int]:
    """The first and the last block: where the embedding arrives and where the answer is made."""
    return sorted({0, n_layer - 1})


def parse_layers(text: str | None, n_layer: int) -> list[int]:
    """ "0,11", "2-4", "all" or None (the default) -> sorted block numbers, refused if out of range."""
    if text is None:
        return default_layers(n_layer)
    if text.strip().lower() == "all":
        return list(range(n_layer))
    chosen: set[int] = set()
    for part in text.split(","):
        bounds = part.strip().split("-")
        if len(bounds) > 2 or not all(b.strip().isdigit() for b in bounds):
            raise UserError(f"--layers takes block numbers such as 0,{n_layer - 1} or 1-3, or 'all'; not {text!r}")
        low, high = int(bounds[0]), int(bounds[-1])
        for layer in (low, high):
            if layer >= n_layer:
                raise UserError(f"--layers: block {layer} does not exist; this model has blocks 0..{n_layer - 1}")
        if low > high:
            raise UserError(f"--layers: the range {part.strip()} runs backwards; write {high}-{low}")
        chosen.update(range(low, high + 1))
    return sorted(chosen)


# --- shapes and values, as text -----------------------------------------------------------------------
def concrete(symbolic: str, dims: Dims) -> str:
    """ "Q [H, T, dh], K^T [H, dh, t]" -> "Q [H, T, dh] = [4, 5, 16], K^T [H, dh, t] = [4, 16, 5]" """

    def sizes(match: re.Match) -> str:
        symbols = [s.strip() for s in match.group(1).split(",")]
        try:
            return f"{match.group(0)} = [{', '.join(str(dims.size(s)) for s in symbols)}]"
        except (AttributeError, KeyError, ValueError):  # a size of a piece of the pass (a scan's chunks): as written
            return match.group(0)

    return _BRACKETS.sub(sizes, symbolic)


def summary(tensor: np.ndarray, masked_as: str | None = None) -> str:
    """mean, std, min, max over the finite values, how many entries are -inf (on a mask's stage, `masked_as` says
    which keys those are) and how many other values are not finite (inf or NaN: an overflow, not a mask)."""
    finite = np.isfinite(tensor)
    values = tensor if finite.all() else tensor[finite]
    text = (
        f"mean {values.mean():.4g}  std {values.std():.4g}  min {values.min():.4g}  max {values.max():.4g}"
        if values.size
        else "no finite values"
    )
    if not tensor.size - values.size:
        return text
    minus = int(np.isneginf(tensor).sum())
    said = [f"{minus} of {tensor.size} entries -inf" + (f": {masked_as}" if masked_as else "")] if minus else []
    other = tensor.size - values.size - minus
    said += [f"{other} of {tensor.size} entries inf or NaN"] if other else []
    return f"{text}  ({'; '.join(said)})"


def masked_keys(dims: Dims) -> str:
    """Which keys the -inf entries of a stage of a layer of sizes `dims` stand for: the future's (of a pass of several
    positions), those before a sliding window or of earlier chunks, those an indexer did not choose."""
    kinds = ["the future"] if dims.T > 1 else []
    last = dims.past + dims.T - 1  # the pass's last query: the keys it cannot read are the most cut
    if dims.chunk is not None and last - last % dims.chunk > dims.start:
        kinds.append("keys of earlier chunks")
    elif dims.chunk is None and dims.window is not None and last - dims.window + 1 > dims.start:
        kinds.append("keys before the window")
    if dims.selected is not None and dims.t > dims.selected:
        kinds.append("keys the indexer did not choose")
    return "the masked future" if kinds == ["the future"] else "masked: " + ", ".join(kinds) if kinds else "masked"


def statistics(tensor: np.ndarray) -> str:
    """The longer summary behind the stepper's `s`."""
    finite = tensor[np.isfinite(tensor)]
    lines = [f"shape {list(tensor.shape)}  {tensor.dtype}  {tensor.size:,} values ({tensor.nbytes:,} bytes)"]
    if finite.size:
        flat = np.where(np.isfinite(tensor), tensor, np.nan)
        low, high = (
            np.unravel_index(np.nanargmin(flat), tensor.shape),
            np.unravel_index(np.nanargmax(flat), tensor.shape),
        )
        lines += [
            f"mean {finite.mean():.6g}   std {finite.std():.6g}   mean |x| {np.abs(finite).mean():.6g}",
            f"min {finite.min():.6g} at {list(map(int, low))}   max {finite.max():.6g} at {list(map(int, high))}",
            f"zeros {int((finite == 0).sum()):,}   L2 norm {float(np.sqrt((finite.astype(np.float64) ** 2).sum())):.6g}",
        ]
    if finite.size < tensor.size:
        lines.append(
            f"-inf (masked) {int(np.isneginf(tensor).sum()):,}   other non-finite "
            f"{int((~np.isfinite(tensor) & ~np.isneginf(tensor)).sum()):,}"
        )
    return "\n".join("    " + line for line in lines)


def printed(tensor: np.ndarray) -> str:
    """NumPy's own printing, summarised beyond a few hundred values (edges shown, middle elided)."""
    with np.printoptions(threshold=200, edgeitems=3, precision=4, suppress=True, linewidth=110):
        return np.array2string(tensor, prefix="    ")  # continuation lines indented as far as the prefix


def dot_products(r: Record) -> str:
    if r.kind != "matmul":
        return f"no dot products ({r.kind})"
    text = f"{count(r.dot_products)} dot products of length {count(r.dot_length)} = {count(r.macs)} MACs"
    if r.attention == "scores":
        text += f" (causal: {count(r.causal_dot_products or 0)} needed)"
    return text


# --- the interactive stops ----------------------------------------------------------------------------
class Quit(Exception):
    """The person at the terminal ended the trace (q, or end of input)."""


def terminal_line(prompt: str) -> str:
    """A line typed at the terminal, after `prompt` (on stderr, as input() writes it at a terminal), as input()
    reads one, but with no moment at which a Ctrl-C is held back. input() blocks in read() once its prompt is out:
    a Ctrl-C that comes between the prompt and the read (a busy machine's scheduler may leave the process there for
    seconds) trips Python's flag but interrupts no read, so it waited for the next key. Here the wait is a select()
    on the terminal and on a pipe that the signal's arrival itself writes to (signal.set_wakeup_fd, armed before the
    prompt is written), so a Ctrl-C at any moment since wakes it, and its handler raises KeyboardInterrupt as usual.
    Where select cannot wait on a terminal, or off the main thread, it is input()."""
    if os.name != "posix" or threading.current_thread() is not threading.main_thread():
        return input(prompt)
    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    os.set_blocking(wake, False)
    armed = signal.set_wakeup_fd(woken)
    try:
        sys.stdout.flush()
        sys.stderr.write(prompt)
        sys.stderr.flush()
        return _wait_for_line(sys.stdin.fileno(), wake)
    finally:
        signal.set_wakeup_fd(armed)
        os.close(wake)
        os.close(woken)


def _wait_for_line(terminal: int, wake: int) -> str:
    """The next line from `terminal` (a terminal in its line mode hands over a whole line, or end of input), while
    any signal that arrives writes to `wake`: that wakes the wait, and the signal's handler runs here, in Python
    code, at once (Ctrl-C's raises KeyboardInterrupt; another's returns, and the wait goes on). A function of its
    own: entering it runs the handler of a signal that came before the pipe was armed."""
    while True:
        ready, _, _ = select.select([terminal, wake], [], [])
        if wake in ready:
            os.read(wake, 512)  # the signal's own handler runs between this loop's instructions
            continue
        line = os.read(terminal, 4096)
        if not line:
            raise EOFError
        return line.decode(errors="replace").rstrip("\n")


class Stepper:
    """The stops of `trace --step`: after each stage is printed, ask what to do next."""

    KEYS = "[Enter] next  n layer  c continue  p print  s stats  q quit > "
    HELP = "Enter: next stage, n: on to the next layer, c: run to the end, p: print the tensor, s: statistics, q: quit"

    def __init__(self, read=terminal_line, out=sys.stdout) -> None:
        self.read, self.out = read, out
        self.mode = "stage"  # stage: stop at every stage | layer: stop when the layer changes | run: no stops
        self.leaving: tuple | None = None  # with mode "layer": the (pass, layer) to get out of

    def stop(self, where: tuple, name: str, tensor: np.ndarray) -> None:
        """Called after each printed stage; `where` is (pass, layer), the unit that `n` skips."""
        if self.mode == "run" or (self.mode == "layer" and where == self.leaving):
            return
        self.mode = "stage"
        while True:
            try:
                answer = self.read(self.KEYS).strip().lower()
            except EOFError:
                self.out.write("\n")
                raise Quit("end of input") from None
            if answer == "":
                return
            if answer == "n":
                self.mode, self.leaving = "layer", where
                return
            if answer == "c":
                self.mode = "run"
                return
            if answer == "q":
                raise Quit("q")
            if answer == "p":
                print(f"  {name} {list(tensor.shape)} =\n    {printed(tensor)}", file=self.out)
            elif answer == "s":
                print(f"  {name}\n{statistics(tensor)}", file=self.out)
            else:
                print(f"  {answer!r}? {self.HELP}", file=self.out)


# --- the trace ----------------------------------------------------------------------------------------
@dataclass
class TraceResult:
    prompt_tokens: list[int]
    new_tokens: list[int] = field(default_factory=list)  # chosen greedily, one per pass that finished
    phases: list[Phase] = field(default_factory=list)  # the ledger of each pass
    stopped_at: str | None = None  # the stage where q, end of input or Ctrl-C ended it
    passes: Continuation | None = field(default=None, repr=False)  # the loop that ran them (verbs/generate.py)


class _Tracer:
    """The watcher of one pass: prints shown stages, folds the other blocks, stops where asked."""

    def __init__(self, shown: set[int], dims: Dims, step: int, out, stepper: Stepper | None) -> None:
        self.shown, self.dims, self.step, self.out, self.stepper = shown, dims, step, out, stepper
        self.last_record: Record | None = None
        self.folded: list[Record] = []
        self.current = ""

    def __call__(self, name: str, tensor, record: Record):
        self.current = name
        if record.layer is not None and record.layer not in self.shown:
            if record is not self.last_record:
                self.folded.append(record)
            if name == f"blocks.{record.layer}.resid_post":  # the block's last stage, whatever its op computes
                self._fold(record, tensor)
        else:
            self._show(name, tensor, record)
            if self.stepper is not None:
                self.stepper.stop((self.step, record.layer), name, tensor)
        self.last_record = record
        return tensor

    def _show(self, name: str, tensor, r: Record) -> None:
        output = r.stage.names.index(name if r.layer is None else name.split(".", 2)[2])  # q, k or v of one split
        dims = self._sizes(r)
        makes = f"{dims.symbolic(r.output_spec(output))} = {list(np.shape(tensor))}"  # the sizes it came out with
        if r is self.last_record:  # k and v come out of the same split as q
            lines = [f"{name:<{NAME_WIDTH}}  (same stage, next output)", f"    out  {makes}"]
        else:
            reads = concrete(r.stage.reads, dims)
            lines = [
                f"{name:<{NAME_WIDTH}}  {r.equation}",
                f"    in   {reads}",
                f"    out  {makes}   {dot_products(r)}",
            ]
            if r.breakdown is not None:  # a mixture of experts: what each expert computed
                lines.append(
                    "    experts  "
                    + ", ".join(f"{p.expert}: {p.tokens} token{'' if p.tokens == 1 else 's'}" for p in r.breakdown)
                )
        lines.append(f"    values  {summary(tensor, masked_keys(dims) if r.stage.kind == 'mask' else None)}")
        print("\n".join(lines), file=self.out)

    def _sizes(self, r: Record) -> Dims:
        """The sizes of the symbols as the stage's layer saw them (its window, its heads, its MLP's width), where the
        pass recorded them; the pass's own else."""
        return r.dims if r.dims is not None else self.dims

    def _fold(self, last: Record, tensor) -> None:
        records = self.folded
        self.folded = []
        macs = sum(r.macs for r in records)
        products = sum(r.dot_products for r in records)
        dims = self._sizes(last)
        stream = f"{dims.symbolic(last.output_spec())} = {list(np.shape(tensor))}"  # [T, D]; [T, N, D] of N streams
        print(
            f"{f'blocks.{last.layer}':<{NAME_WIDTH}}  folded: {len(records)} stages, {count(products)} dot products, "
            f"{count(macs)} MACs; {stream} -> {stream}; values  {summary(tensor)}",
            file=self.out,
        )


def trace(
    model: Model,
    prompt: str | list[int],
    new_tokens: int = 2,
    layers: list[int] | None = None,
    out=sys.stdout,
    stepper: Stepper | None = None,
) -> TraceResult:
    """Print the passes that generate `new_tokens` greedy tokens, stage by stage: the prefill, then
    new_tokens - 1 cached decode steps (the same passes as generate's, verbs/trace.py).

    The prefill picks the first new token; decode step k feeds new token k through the model
    (T = 1 position attending to t = prompt + k) and picks the next one. `layers`: the blocks shown
    stage by stage (default: the first and the last); the others fold into one line per pass.
    """
    writable(out)
    passes = trace_passes(model, prompt, new_tokens)
    tokenizer = model.tokenizer
    (ids,) = passes.rows
    c = model.config
    layers = default_layers(c.n_layer) if layers is None else chosen_layers(layers, c.n_layer)
    decodes = new_tokens - 1
    steps = f"prefill + {decodes} decode step{'s' if decodes != 1 else ''}" if decodes else "prefill only"
    print(_heading(model, ids, new_tokens, steps, layers), file=out)

    assert passes.book is not None  # a trace keeps its ledger: the passes append their phases to result.phases
    result = TraceResult(ids, passes.new_tokens[0], passes.book.phases, passes=passes)
    tracer: _Tracer | None = None

    def watch(phase: Phase) -> _Tracer:
        nonlocal tracer
        dims, windowed, chunked = pass_sizes(c, phase)
        last = result.new_tokens[-1] if phase.step else None
        fed = f"ids {ids}" if last is None else f"id {last} {tokenizer.token_str(last)!r}"
        print(_opening(phase, dims, fed, windowed, chunked), file=out)
        tracer = _Tracer(set(layers), dims, phase.step, out, stepper)
        return tracer

    def chosen(token: int, _text: str) -> None:
        if token >= 0:  # (< 0: the end of the continuation's text, not a token)
            print(_closing(result.phases[len(result.new_tokens) - 1], token, tokenizer), file=out)

    try:
        passes.run(on_token=chosen, watch=watch)
    except Quit as why:  # the pass it stopped in did not finish, and is not in the ledger (Continuation.run)
        result.stopped_at = tracer.current if tracer is not None else None
        print(f"trace stopped at {result.stopped_at} ({why})", file=out)
        return result
    except KeyboardInterrupt:
        result.stopped_at = tracer.current if tracer else None
        print(f"\ntrace interrupted at {result.stopped_at}", file=out)
        out.flush()
        raise
    dots, macs = sum(p.dot_products for p in result.phases), sum(p.macs for p in result.phases)
    continuation = tokenizer.decode(result.new_tokens)
    print(f"\n{steps}: {count(dots)} dot products, {count(macs)} MACs; greedy continuation {continuation!r}", file=out)
    return result


def pass_sizes(c, phase: Phase) -> tuple[Dims, list[Dims], set]:
    """A pass's sizes (t: the keys attended, which a sliding window may cut), as its first kind of layer sees them;
    the sizes of the layers of each other window, where layers differ; the windows that are Llama 4's chunks."""
    dims = Dims.of(c, phase.tokens, past=phase.context - phase.tokens, R=1)
    windows = sorted({c.layer_window(i) for i in range(c.n_layer)}, key=lambda w: -1 if w is None else w)
    dims = dims.with_window(windows[0]) if len(windows) > 1 else dims
    chunked = {c.layer_window(i) for i in range(c.n_layer) if c.layer_chunk(i) is not None}
    return dims, [dims.with_window(w) for w in windows[1:]], chunked


def _opening(phase: Phase, dims: Dims, fed: str, windowed: list[Dims], chunked: set) -> str:
    """A pass's first lines: which pass, its T and t, what it is fed, and the size of every symbol; `windowed`: the
    sizes of the layers of another sliding window (or chunk: those in `chunked`), where layers differ (each stage's
    lines show its layer's)."""
    T = phase.tokens
    kind = lambda d: "chunk" if d.window in chunked else "window"  # noqa: E731
    others = "".join(f", {d.t} in the layers of a {kind(d)} of {d.window}" for d in windowed)
    return (
        f"\n=== {pass_name(phase.step)}: T = {T} new position{s_for(T)} attending to t = {dims.t}{others}; {fed} ===\n"
        f"    sizes: {dims.describe()}" + "".join(f"; {kind(d)}={d.window}: t={d.t}" for d in windowed)
    )


def _closing(phase: Phase, token: int, tokenizer) -> str:
    """A pass's last line: its dot products and MACs and the token it chose; where a router's or an indexer's choice
    tied, which settled it."""
    tied = ties_line([phase])
    return (
        f"=== {pass_name(phase.step)}: {count(phase.dot_products)} dot products, {count(phase.macs)} MACs; "
        f"next token {tokenizer.token_str(token)!r} (id {token}) ===" + (f"\n{tied}" if tied else "")
    )


def _heading(model: Model, ids: list[int], new_tokens: int, steps: str, layers: list[int]) -> str:
    """What a trace follows: the model, the prompt's ids and tokens, the passes, the blocks shown, the symbols."""
    n_layer, tokenizer = model.config.n_layer, model.tokenizer
    if sorted(set(layers)) == list(range(n_layer)):
        shown = f"every block shown stage by stage (0..{n_layer - 1})"
    else:
        shown = (
            f"blocks shown stage by stage: {', '.join(map(str, sorted(set(layers))))} (the others fold into one line)"
        )
    return "\n".join(
        [
            f"model {describe_model(model.describe(), model.source)}",
            f"prompt {plural(len(ids), 'token')} {ids} = {' '.join(repr(tokenizer.token_str(i)) for i in ids)}",
            f"{new_tokens} new token{'s' if new_tokens != 1 else ''}: {steps}, greedy; {shown}",
            f"symbols: {model.stage_table.symbols}",
        ]
    )


def trace_command(
    prompt: str | list[int],
    model_name: str | None,
    new_tokens: int,
    layers: str | None,
    step: bool,
    html_to=None,
    load: LoadOptions = LoadOptions(),
) -> None:
    """`minitransformer trace`: checks what it can before loading the model, then traces to stdout
    (and, given `html_to`, a destination checked by files.check_destination, writes the HTML report there)."""
    refuse_empty([prompt], "trace")
    if new_tokens < 1:
        raise UserError(f"--new-tokens must be 1 or more (1 traces the prefill only), not {new_tokens}")
    if layers is not None and not re.fullmatch(r"\s*(all|[\d\s,-]+)\s*", layers, re.IGNORECASE):
        raise UserError(f"--layers takes block numbers such as 0,11 or 1-3, or 'all'; not {layers!r}")
    stepper = None
    if step:
        if sys.stdin is not None and sys.stdin.isatty():
            stepper = Stepper()
        else:  # held with the command's notes: a refusal after it is its one line
            note("minitransformer: --step needs a terminal on stdin; tracing without stopping")
    model = resolve(model_name, load)
    chosen = parse_layers(layers, model.config.n_layer)
    if html_to is None:
        trace(model, prompt, new_tokens, chosen, sys.stdout, stepper)
        if model.precision is not None and model.precision.values is not None:  # what it cost, against float64
            print(f"\n{drift_report(drift(model, prompt))}")
    else:
        trace_to_page(html_to, model, prompt, new_tokens, chosen, stepper)


def trace_to_page(
    destination: Destination,
    model: Model,
    prompt: str | list[int],
    new_tokens: int,
    layers: list[int],
    stepper: Stepper | None = None,
) -> None:
    """`trace --html`: the trace as usual (on stderr if the page goes to stdout), the chosen layers' attention
    kept while it runs, then the page of the passes that finished."""
    out = sys.stderr if destination.is_stdout else sys.stdout
    positions = len(model.tokenizer.encode(prompt) if isinstance(prompt, str) else prompt) + new_tokens
    attending = [i for i in layers if isinstance(model.config.layer_cache(i), KeysValues)]  # a state has no map
    kept = attending if attention_fits(model.config, positions) else attending[:1]
    recorder = AttentionRecorder(model, kept) if kept else None
    with recorder or nullcontext():
        result = trace(model, prompt, new_tokens, layers, out, stepper)
    if not result.phases:
        print("no pass finished, so there is no report to write", file=out)
        return
    assert result.passes is not None
    ledger = result.passes.generations()[0].ledger  # with what the same passes cost without the cache (a count)
    assert ledger is not None
    maps = recorder.maps() if recorder is not None else None
    page = trace_data(ledger, model.tokenizer, result.prompt_tokens, result.new_tokens, maps)
    if model.precision is not None and model.precision.values is not None:  # what the precision cost, on the page too
        measured = drift(model, prompt)
        print(f"\n{drift_report(measured)}", file=out)
        page["document"]["drift"] = measured.to_dict()
    write_page(destination, page, out)
