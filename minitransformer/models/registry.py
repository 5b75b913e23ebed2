"""Which model a name means: a directory, a GPT-2 by name (on disk, in the HF cache, or downloaded), or a demo.

`load_model(name_or_dir)`, the API's way in, lives here, beside the names it resolves.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..engine.precision import precision_of, widening
from ..errors import UserError, note
from ..families.table import architecture_of
from ..text import short_path
from . import hub
from .config import load_config
from .model import Model
from .options import LoadOptions
from .tokenizer import gpt2_tokenizer_of, tokenizer_of
from .weights import holds_narrow, load_weights

DEMO = "demo"
DEMO_LLAMA = "demo-llama"
DEMOS = (DEMO, DEMO_LLAMA)  # small trained models shipped inside the package, by the name each answers to


def demo_dir(name: str = DEMO) -> Path:
    """A small trained model shipped inside the package (see weights/<name>/README.md): the GPT-2
    "demo" by default, or "demo-llama", a Llama of the same size trained on the same facts."""
    return Path(str(resources.files("minitransformer") / "data" / name))


def known_names() -> list[str]:
    return [*hub.HUB_REPOS, *DEMOS]


def from_directory(directory: Path, name: str | None = None, options: LoadOptions = LoadOptions()) -> Model:
    directory = Path(directory)
    if not (directory / "config.json").is_file():
        raise UserError(f"{directory} has no config.json; a model directory needs config.json and model.safetensors")
    config = load_config(directory / "config.json", name=name or directory.resolve().name)
    own = architecture_of(config).own_tokenizer
    tokenizer = tokenizer_of(directory) if own else gpt2_tokenizer_of(directory)  # None: the shipped GPT-2 one
    policy = precision_of(options.precision)
    events: list = []  # weights that left the precision's range when rounded to it
    params = load_weights(directory, config, options.compute_dtype, policy, options.held, events)
    if policy is None and holds_narrow(params):
        policy = widening()  # float32 products over matrices kept in their 2 bytes
    model = Model(config, params, source=str(directory), tokenizer=tokenizer, precision=policy)
    model.weight_events = events
    return model


def on_disk(name: str) -> Path | None:
    """A complete local copy of a hub model, without touching the network."""
    if hub.is_complete(hub.local_dir(name)):
        return hub.local_dir(name)
    return hub.find_in_hf_cache(name)


def load_model(
    name_or_dir: str | Path | None = None,
    dtype: str = "float32",
    precision: str = "float32",
    weights: str | None = None,
) -> Model:
    """A model by name ("gpt2", "demo", "demo-llama", ...) or from a Hugging Face-format directory
    (GPT-2, Llama, Mistral or Qwen2).

    dtype="float64" runs every forward pass in float64, the weights upcast on load: a reference to measure
    a float32 pass against (validate does), at twice the memory and up to twice the time (a 124M GPT-2 on
    2 cores: prefill of 128 tokens 1.5x, decode steps, which read every weight, 1.8x).

    precision="bfloat16", "float16", "fp8_e4m3" or "fp8_e5m2" emulates that format over the float32 passes: each
    weight rounded to it once at load and held in it, every product's operands and output and every stage's
    values rounded to it (engine/precision.py); at fp8 the products' operands and matrices are fp8, their
    outputs, the stages' values and the token embedding bfloat16. It is a property of the model, as dtype is,
    because the weights are held in it; drift(model, prompt) measures what it costs against float64.

    weights: a float16 or bfloat16 checkpoint is upcast to float32 once at load ("float32": twice the memory of its
    file, the fastest decoding), or its matrices kept in their 2 bytes, memory-mapped, each widened as a product
    reads it ("stored": little more memory than the file); "auto" (the default) upcasts where the copy fits in
    half the memory available, else keeps them stored. float32 passes only.

    The three are one LoadOptions (models/options.py), checked when it is made; resolve(name_or_dir, options)
    takes one already made.
    """
    return resolve(name_or_dir, LoadOptions(dtype, precision, weights))


def resolve(name_or_dir: str | Path | None, options: LoadOptions = LoadOptions()) -> Model:
    """The model a name or directory means, loaded as `options` say (load_model says how)."""
    if name_or_dir is None:
        return default_model(options)
    text = refuse_empty_name(str(name_or_dir))
    if Path(text).is_dir():
        return from_directory(Path(text), options=options)
    if text in DEMOS:
        return from_directory(demo_dir(text), text, options)
    if text in hub.HUB_REPOS:
        return from_directory(on_disk(text) or hub.download(text), text, options)
    raise not_a_model(text)


def refuse_empty_name(text: str) -> str:
    """`text`, a model's name or directory, refused where it is empty or blank: Path("") is the current directory,
    so an empty name would read whatever model lies there."""
    if not text.strip():
        raise UserError(
            "the model's name or directory is empty; give one (gpt2, demo, a path), or none for the default"
        )
    return text


def not_a_model(text: str, also: str = "") -> UserError:
    """The refusal of a --model that names no model here and no directory: a path (a file, or nothing there) said to
    be one, else the names known; `also`, what else the command takes (count's presets)."""
    if os.sep in text or text.startswith(".") or Path(text).exists():
        return UserError(
            f"{text} is not a directory; pass a model name ({', '.join(known_names())}) or a directory{also}"
        )
    return UserError(f"unknown model {text!r}; known models: {', '.join(known_names())}, or a directory{also}")


def default_model(options: LoadOptions = LoadOptions()) -> Model:
    """GPT-2 small if its weights are here or can be fetched in a few seconds, else the shipped demo model."""
    if on_disk("gpt2"):
        return resolve("gpt2", options)
    try:
        return from_directory(hub.download("gpt2"), "gpt2", options)
    except UserError:
        if not (demo_dir() / "config.json").is_file():
            raise
        card = short_path(str(demo_dir() / "README.md"))
        note(
            "minitransformer: GPT-2 is not on this machine and the Hugging Face Hub is out of reach, so the demo "
            f"model answers (a small GPT-2 trained on country facts: {card}); where the hub is "
            "reachable, `minitransformer download gpt2` gets GPT-2 small"
        )
        return from_directory(demo_dir(), DEMO, options)
