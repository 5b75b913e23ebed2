"""The layout of the JSON files (views/export.py's json_text): standard JSON, indented a space a level, each object or
array that holds only numbers, strings and arrays of them on a line of its own, so that a product's record is one
line (json.dumps(indent=1) wrote a line per field and per number, in Python: DeepSeek-V4-Pro's count took 1.7 s to
encode, a million lines)."""

from __future__ import annotations

import json
import math

import pytest

from minitransformer.families.table import PRESETS
from minitransformer.verbs.count import count_generation
from minitransformer.views.export import json_chunks, json_text

ODD = [
    {},
    [],
    "text",
    7,
    {"a": {}, "b": [], "c": [[]], "d": [{}]},  # empty containers inside: written as json writes them
    {1: "int key", 2.5: "float key", False: "a bool key", None: "no key", "é": "ünïcode"},
    {"tuples": (1, (2, 3), ()), "deep": {"er": {"est": [1, [2, [3, {"x": None}]]]}}},
    [[1.5, -0.0, 1e300], {"k": [True, False, None]}],
]


@pytest.mark.parametrize("value", ODD, ids=range(len(ODD)))
def test_the_text_is_what_json_reads_back_as_the_value(value):
    text = json_text(value)
    print(text)
    assert json.loads(text) == json.loads(json.dumps(value))
    assert json_text(value, indent=None) == json.dumps(value)


def test_a_number_json_cannot_hold_is_null_wherever_it_is():
    value = {"a": [1.0, math.nan], "b": {"c": {"d": math.inf}}, "e": [[-math.inf]]}
    for indent in (1, None):
        text = json_text(value, indent)
        print(text)
        assert json.loads(text) == {"a": [1.0, None], "b": {"c": {"d": None}}, "e": [[None]]}


def test_an_object_of_numbers_strings_and_arrays_of_them_is_one_line_and_the_rest_indented_a_space_a_level():
    value = {"ops": [{"op": "q", "shape": [2, 3]}, {"op": "k", "shape": None}], "shapes": [[2, 3], [4]],
             "more": {"in": {"x": {"y": 1}}}}  # fmt: skip
    lines = json_text(value).split("\n")
    print("\n".join(lines))
    assert lines == ['{', ' "ops": [', '  {"op": "q", "shape": [2, 3]},', '  {"op": "k", "shape": null}', ' ],',
                     ' "shapes": [[2, 3], [4]],', ' "more": {', '  "in": {', '   "x": {"y": 1}', '  }', ' }',
                     '}']  # fmt: skip


def _flat_objects(value) -> list[dict]:
    """The objects of a document that hold no other (a product's record; an expert's line of its breakdown)."""
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    found = [o for item in inner for o in _flat_objects(item)]
    if (
        isinstance(value, dict)
        and not found
        and not any(isinstance(i, list) and i and isinstance(i[0], list) for i in inner)
    ):
        return [value]
    return found


def test_every_record_of_a_count_s_json_is_a_line_of_its_own():
    """Each product's record is a line; one with a breakdown (a mixture's experts, each on its rows) has an expert a
    line."""
    count = count_generation(PRESETS["qwen3-30b-a3b"], 300, 2)
    text = "".join(json_chunks(count, 1.0))
    document = json.loads(text)
    lines = {line.strip().removesuffix(",") for line in text.split("\n")}
    lines |= {line.split('": ', 1)[-1] for line in lines if line.startswith('"')}  # a key's value: "logits": {...}
    flat = _flat_objects(document["phases"])
    records = [r for p in document["phases"] if "layers" in p for layer in p["layers"] for r in layer["ops"]]
    assert len(records) > 100 and sum(1 for r in records if "breakdown" in r) > 10
    assert len(flat) > len(records)
    missing = [o for o in flat if json.dumps(o) not in lines]
    assert not missing, missing[:3]
    assert document == json.loads("".join(json_chunks(count, 1.0, indent=None)))
