"""What every output of a run must hold, read back from the files the CLI wrote: shared by the test of count's outputs
on one preset of every family (tests/views/test_every_output.py) and the conformance suite's test of generate's,
trace's and count's on every family's random model (tests/families/test_conformance.py).

Each check compares one output with another that says the same thing another way: the CSV's rows with the JSON's
records, the page's data and tables with the JSON and with what the terminal printed, the PNG's size with the products
it draws. A failing check says which numbers it compared.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import re
import struct
from collections import Counter
from html.parser import HTMLParser

import numpy as np
import pytest

from minitransformer.families.table import architecture_of
from minitransformer.views.colours import PRODUCT_COLOURS
from minitransformer.views.html_report import unfold_layers
from minitransformer.views.plots import DPI, WIDTH, figure_height


# --- reading the files back -------------------------------------------------------------------------------------
class _Tables(HTMLParser):
    """Every table's body rows (the text of each cell), by the table's class, and every paragraph's text by its."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.paragraphs: dict[str, list[str]] = {}
        self._table: list[str] = []  # the classes of the tables we are in
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._body = False
        self._paragraph: tuple[str, list[str]] | None = None

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "table":
            self._table.append(cls)
        elif tag == "tbody":
            self._body = True
        elif tag == "tr" and self._body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "p":
            self._paragraph = (cls, [])

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables.setdefault(self._table[-1], []).append(self._row)
            self._row = None
        elif tag == "tbody":
            self._body = False
        elif tag == "table":
            self._table.pop()
        elif tag == "p" and self._paragraph is not None:
            cls, text = self._paragraph
            self.paragraphs.setdefault(cls, []).append(" ".join("".join(text).split()))
            self._paragraph = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self._paragraph is not None:
            self._paragraph[1].append(data)


@functools.lru_cache(maxsize=2)  # the checks of one page read it once
def page_parts(html: str) -> _Tables:
    parser = _Tables()
    parser.feed(html)
    return parser


def page_data(html: str) -> dict:
    """The data a page carries: its JSON ledger (identical layers folded) and what the page made of it."""
    match = re.search(r'<script type="application/json" class="mt-data">(.*?)</script>', html, re.S)
    assert match, "the page carries no data"
    return json.loads(match.group(1).replace("<\\/", "</"))


def number(text: str) -> int:
    return int(text.replace(",", ""))


# --- the checks -------------------------------------------------------------------------------------------------
def page_carries_the_ledger(html: str, document: dict) -> dict:
    """The page is whole, and the ledger it carries is the JSON's (its folded layers unfolded): returns its data."""
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), (html[:40], html[-40:])
    data = page_data(html)
    carried = data["document"]
    assert [p["step"] for p in carried["phases"]] == [p["step"] for p in document["phases"]]
    for folded, full in zip(carried["phases"], document["phases"]):
        if "layers" in full:
            assert unfold_layers(folded) == full, f"step {full['step']}: the page's layers are not the JSON's"
        else:
            assert folded == full
    for key in ("model", "totals", "cache", "memory"):
        assert carried.get(key) == document.get(key), key
    return data


def matmul_records(phase: dict) -> Counter:
    """(op, dot products, MACs) of every matrix product of a pass shown in full, each as often as the layers that
    computed it (and the logits once)."""
    found: Counter = Counter()
    for layer in phase["layers"]:
        for r in layer["ops"]:
            if r["kind"] == "matmul":
                found[(r["op"], r["dot_products"], r["macs"])] += 1
    for r in (*phase["embed"], *phase["final"], phase["logits"]):
        if r and r["kind"] == "matmul":
            found[(r["op"], r["dot_products"], r["macs"])] += 1
    return found


def csv_is_the_json(text: str, document: dict) -> int:
    """Every CSV row (a product of a pass, once per kind of layer, with its number of layers) is a record of the JSON's
    pass as often as it has layers, and nothing else is: returns the rows read."""
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows, "an empty CSV"
    for phase in document["phases"]:
        if "layers" not in phase:
            continue
        mine = [r for r in rows if int(r["step"]) == phase["step"]]
        assert mine, f"no CSV row for step {phase['step']}"
        from_csv: Counter = Counter()
        for r in mine:
            assert (int(r["tokens"]), int(r["context"])) == (phase["tokens"], phase["context"]), r
            from_csv[(r["op"], int(r["dot_products"]), int(r["macs"]))] += int(r["layers"])
            assert int(r["all_layers_macs"]) == int(r["layers"]) * int(r["macs"]), r
        assert from_csv == matmul_records(phase), (phase["step"], from_csv, matmul_records(phase))
        assert sum(int(r["all_layers_macs"]) for r in mine) == phase["macs"], phase["step"]
    return len(rows)


def png_is_the_plot(data: bytes, document: dict) -> None:
    """A whole PNG, as wide as the figure and as tall as its share panel needs for the products the passes computed,
    each kind of product drawn in its colour."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data.endswith(b"IEND\xaeB`\x82")
    width, height = struct.unpack(">II", data[16:24])
    ops = {
        r["op"]
        for p in document["phases"]
        if "layers" in p
        for layer in p["layers"]
        for r in layer["ops"]
        if r["kind"] == "matmul"
    } | {r["op"] for p in document["phases"] if "layers" in p for r in (*p["embed"], *p["final"]) if r and r["kind"] == "matmul"} | {"logits"}  # fmt: skip
    assert (width, height) == (round(WIDTH * DPI), round(figure_height(len(ops)) * DPI)), (width, height, len(ops))
    image = pytest.importorskip("matplotlib.image", reason="matplotlib (the plot extra) decodes the PNG")
    pixels = (image.imread(io.BytesIO(data), format="png")[..., :3] * 255).round().astype(np.int64)
    painted = set(np.unique(pixels @ np.array([1 << 16, 1 << 8, 1])).tolist())  # each colour as 0xRRGGBB
    stages = architecture_of(document["model"]).all_stages().stages
    for kind in {stages[op].product for op in ops}:
        assert int(PRODUCT_COLOURS[kind][1:], 16) in painted, f"no {kind} product drawn in {PRODUCT_COLOURS[kind]}"


def totals_are_the_terminal_s(html: str, terminal: str, document: dict) -> None:
    """The page's total, the terminal's and the JSON's: the same dot products and MACs."""
    totals = document["totals"]
    said = f"{totals['dot_products']:,} dot products, {totals['macs']:,} MACs"
    assert said in terminal, f"the terminal does not say {said!r}"
    shown = page_parts(html).paragraphs.get("totals", [])
    assert shown and said in shown[0], (said, shown)


def passes_are_the_json_s(html: str, document: dict) -> None:
    """The page's table of passes: each pass's MACs as the JSON has them."""
    rows = page_parts(html).tables["passes-table"]
    listed = {number(r[0]): r for r in rows if r[0].replace(",", "").isdigit()}
    for phase in document["phases"]:
        if phase["step"] in listed:
            assert phase["macs"] in [number(c) for c in listed[phase["step"]][4:] if re.fullmatch(r"[\d,]+", c)], (
                phase["step"],
                phase["macs"],
                listed[phase["step"]],
            )


def ops_are_the_terminal_s(html: str, terminal: str) -> int:
    """count's "Where the MACs go" table and the page's, op by op: the same MACs and shares in the prefill, the decode
    step and the whole generation. Returns the ops compared."""
    lines = terminal.split("\nWhere the MACs go\n", 1)[1].splitlines()[1:]
    terminal_ops = {}
    for line in lines:
        cells = line.split()
        if not cells or cells[0] == "total":
            break
        if any(
            number(c) for c in cells[1::2]
        ):  # count lists its family's every product, a layer kind's it has not at 0
            terminal_ops[cells[0]] = cells[1:]
    page_ops = {
        r[0]: r[1:-1] for r in page_parts(html).tables["ops-table"] if r[0] not in ("total",) and "(" not in r[0]
    }
    assert page_ops == terminal_ops, (page_ops, terminal_ops)
    return len(page_ops)


def memory_is_the_terminal_s(html: str, terminal: str, document: dict) -> list[str]:
    """memory_rows_are_the_terminal_s of the page's memory table."""
    return memory_rows_are_the_terminal_s(page_parts(html).tables["memory-table"], terminal, document)


def memory_rows_are_the_terminal_s(rows: list[list[str]], terminal: str, document: dict) -> list[str]:
    """The page's memory table (the text of each row's cells) against count's memory lines: each row's bytes as the
    terminal says them, in the terminal's line for the same thing (the weights, a kind of layer's keys and values or
    state, the whole cache), and a state row for every kind of layer that keeps one; a cache of streams, stream by
    stream (cache_streams_are_the_terminal_s). Returns the rows' names."""
    memory: list[str] = []
    block = terminal.split("\nMemory (", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    for text in block:
        if text.startswith(" " * 15) and memory:  # a continuation: one line of its entry
            memory[-1] += " " + text.strip()
        else:
            memory.append(text)

    def line(start: str, *words: str) -> str:
        found = [m for m in memory if m.startswith(start) and all(w in m for w in words)]
        assert len(found) == 1, (start, words, memory)
        return found[0]

    by_name = {r[0]: r for r in rows}
    cache = document["memory"]["cache"]["layer_types"]
    states = [kind for kind, k in cache.items() if k.get("state")]  # a hybrid layer's state beside its K and V too
    assert [name.split(", ")[1].removesuffix(" layers") for name in by_name if name.startswith("state, ")] == states

    def state(kind: str) -> int:  # the bytes of a kind's state: all it keeps, or what it keeps beside K and V
        return cache[kind].get("state_bytes", cache[kind]["bytes"] if cache[kind].get("state") else 0)

    if any("window" in k for k in cache.values()):  # DeepSeek-V4's streams: a row each, its terminal line's number
        return cache_streams_are_the_terminal_s(by_name, block, cache, line)
    for name, (_, exact, human, note, _) in by_name.items():
        if name == "weights":
            assert human in line("  weights", note.split()[0]), name
        elif name.startswith("state, "):
            kind = name.split(", ")[1].removesuffix(" layers")
            assert number(exact) == state(kind) and "the same at any context" in note, name
            assert f"{human}, the same at any context" in line("  state", f" {kind} layer"), name
        elif name.startswith("KV cache, ") and name.endswith(" layers"):
            kind = name.removeprefix("KV cache, ").removesuffix(" layers")
            assert number(exact) == cache[kind]["bytes"] - state(kind), name
            assert human in line("  KV cache", f" {kind} layer"), name
            assert f"x {cache[kind]['layers']} {kind} layer" in note, (note, cache[kind])
        elif name.startswith("cache, "):
            assert human in line("  cache"), name
        elif name.startswith("KV cache, "):
            assert human in line("  KV cache"), name
        elif name == "of which the indexer's keys":
            assert "indexer's key of" in line("  KV cache"), name
        else:
            assert name.startswith("activations, "), name
    return list(by_name)


def cache_streams_are_the_terminal_s(by_name: dict, block: list[str], cache: dict, line) -> list[str]:
    """A cache of streams (DeepSeek-V4's): count prints a line for each kind of layer, its streams side by side
    ("window 128 x 512 (K = V): 524 KB; compressed ...: 154 KB; ..."), and the page a row for each (its name the
    stream's and the kind's): the same streams in both, each row's bytes the JSON's and its size the terminal's
    segment's, each kind's streams summing to its bytes; then the whole cache."""
    terminal: dict[tuple[str, str], str] = {}
    for text in block:
        found = re.fullmatch(r" {15}(\d[\d,]*) (\S+) layers?: (.*)", text)
        if found:
            layers, kind = number(found[1]), found[2]
            assert layers == cache[kind]["layers"], (text, cache[kind])
            for segment in found[3].split("; "):
                what, human = segment.rsplit(": ", 1)
                terminal[kind, "state" if what == "compressors' state" else what.split(" ")[0]] = human
    page = {(name.split(", ", 1)[1].removesuffix(" layers"), name.split(", ", 1)[0]): row
            for name, row in by_name.items() if name.endswith(" layers")}  # fmt: skip
    assert set(page) == set(terminal), (sorted(page), sorted(terminal))
    for (kind, stream), (_, exact, human, note, _) in page.items():
        k = cache[kind]
        held = {"window": k["window"]["bytes"], "state": k.get("state_bytes")}.get(stream)
        assert number(exact) == (k["compressed"][stream]["bytes"] if held is None else held), (kind, stream, exact)
        assert human == terminal[kind, stream], (kind, stream, human, terminal[kind, stream])
        assert f"x {k['layers']} {kind} layer" in note, (kind, stream, note)
    for kind, k in cache.items():
        assert sum(number(r[1]) for (of, _), r in page.items() if of == kind) == k["bytes"], (kind, k)
    for name in ("cache, this run", "cache, whole context"):
        assert by_name[name][2] in line("  cache"), (name, by_name[name])
    others = {name for name in by_name if not name.endswith(" layers") and not name.startswith("activations, ")}
    assert others == {"weights", "cache, this run", "cache, whole context"}, sorted(by_name)
    assert by_name["weights"][2] in line("  weights", by_name["weights"][3].split()[0])
    return list(by_name)
