"""Which model to count, from what a person gave: a name or directory (its config.json only: no weights are read),
a preset, a config.json, or sizes (`count` and `params` take them as flags; the API takes the same words)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..families.config import ModelConfig as Config
from ..families.gpt2.config import GPT2Config
from ..families.keys import MAX_LAYERS
from ..families.llama.config import LlamaConfig
from ..families.table import PRESETS
from ..models.config import load_config


def select_config(
    model: str | None = None,
    preset: str | None = None,
    config: str | None = None,
    layers: int | None = None,
    d_model: int | None = None,
    heads: int | None = None,
    d_ff: int | None = None,
    vocab: int | None = None,
    ctx: int | None = None,
    kv_heads: int | None = None,
    head_dim: int | None = None,
    gated_mlp: bool = False,
) -> Config:
    """The shapes of the model to count: by name or directory (its config.json only: no weights are read),
    by preset, from a config.json, or from sizes. Default: the gpt2 preset.

    Sizes make a GPT-2 block, unless kv_heads, head_dim or gated_mlp is given: then a Llama block
    (RMSNorm, rotary positions, q, k, v as three products with kv_heads key/value heads, a gated MLP,
    no biases).
    """
    sizes = {
        "--layers": layers,
        "--d-model": d_model,
        "--heads": heads,
        "--d-ff": d_ff,
        "--vocab": vocab,
        "--ctx": ctx,
        "--kv-heads": kv_heads,
        "--head-dim": head_dim,
    }
    chosen = (("--model", model), ("--preset", preset), ("--config", config))
    given = [flag for flag, value in chosen if value is not None]
    if (
        len(given) == 1
        and ctx is not None
        and not gated_mlp
        and all(v is None for f, v in sizes.items() if f != "--ctx")
    ):
        return past_its_context(select_config(model, preset, config), ctx)
    by_sizes = gated_mlp or any(v is not None for v in sizes.values())
    if by_sizes:
        given.append("sizes (--layers ...)")
    if len(given) > 1:
        raise UserError(f"choose one way to give the model, not {' and '.join(given)}")
    if preset is not None:
        if preset not in PRESETS:
            raise UserError(f"unknown preset {preset!r}; presets: {', '.join(PRESETS)}")
        return PRESETS[preset]
    if model is not None:
        return _config_of_model(model)
    if config is not None:
        if not config.strip():  # Path("") is the current directory
            raise UserError("--config is empty; give the path of a config.json file")
        return _config_from_file(Path(config))
    if by_sizes:
        return _config_from_sizes(sizes, gated_mlp)
    return PRESETS["gpt2"]


def past_its_context(config: Config, ctx: int) -> Config:
    """The model given, counted at a context of `ctx` positions in place of the one it was trained to (a model card
    that compares two models at a million positions): its shapes, and so its counts at any length, are the same;
    what it would answer past its training is not promised (count says so)."""
    from ..families.table import architecture_of

    if ctx < 1:
        raise UserError(f"--ctx must be at least 1, not {ctx}")
    tensors = architecture_of(config).layout.tensors(config)
    learned = [name for name, tensor in tensors.items() if tensor.kind == "position_embedding"]
    if ctx != config.n_positions and learned:  # its context is a shape: another one is another model
        raise UserError(
            f"{config.name} learns a table of {config.n_positions:,} positions ({', '.join(learned)}): its context is "
            f"part of its shapes; leave --ctx out (and give fewer --tokens for a shorter run)"
        )
    return replace(config, n_positions=ctx)  # type: ignore[call-arg]  # a field of every family's dataclass, not of Named's


def _config_of_model(name: str) -> Config:
    from ..models.registry import DEMOS, demo_dir, not_a_model, refuse_empty_name

    path = Path(refuse_empty_name(name)).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(
                f"{name} has no config.json to read the model's shapes from; give a checkpoint's directory, a preset "
                "(--preset, `minitransformer config --list`) or --config FILE"
            )
        return _config_from_file(path / "config.json", name=path.resolve().name)
    if name in DEMOS:  # first: a name no preset has, and asking the presets for it would load every family
        return _config_from_file(demo_dir(name) / "config.json", name=name)
    if name in PRESETS:  # a hub name or a preset: its shapes are known, no download needed
        return PRESETS[name]
    raise not_a_model(name, f" (presets: {', '.join(PRESETS)})")


def _config_from_file(path: Path, name: str | None = None) -> Config:
    """A config.json of any supported family (gpt2, llama, mistral, qwen2)."""
    if path.is_dir():
        raise UserError(f"{path} is a directory; --config takes a config.json file (--model takes a directory)")
    try:
        return load_config(path, name=name)
    except OSError as err:
        raise UserError(f"cannot read {path}: {err.strerror or err}") from None


def gated_mlp_width(d_model: int) -> int:
    """Llama's rule for the MLP width when none is given: 2/3 of 4 D (a gated MLP's three matrices then hold
    what a 4 D two-matrix MLP holds), rounded up to a multiple of 256: 11,008 for D = 4,096."""
    return 256 * -(-(8 * d_model // 3) // 256)


def _config_from_sizes(sizes: dict[str, int | None], gated_mlp: bool) -> Config:
    missing = [flag for flag in ("--layers", "--d-model", "--heads") if sizes[flag] is None]
    if missing:
        raise UserError(
            f"a model given by its sizes needs --layers, --d-model and --heads (missing {', '.join(missing)})"
        )
    for flag, value in sizes.items():
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, not {value}")
    if int(sizes["--layers"] or 0) > MAX_LAYERS:
        raise UserError(f"--layers must be at most {MAX_LAYERS:,}, not {sizes['--layers']:,}")
    D, L, H = int(sizes["--d-model"] or 0), int(sizes["--layers"] or 0), int(sizes["--heads"] or 0)  # given: above
    kv: Any = sizes["--kv-heads"]  # None: as many as query heads (LlamaConfig says so)
    dh = sizes["--head-dim"]
    vocab, ctx = sizes["--vocab"] or 50257, sizes["--ctx"] or 1024
    if not (gated_mlp or kv is not None or dh is not None):
        if D % H:
            raise UserError(f"--d-model {D} is not divisible by --heads {H}")
        return GPT2Config(
            n_layer=L,
            n_head=H,
            n_embd=D,
            n_inner=sizes["--d-ff"],
            vocab_size=vocab,
            n_positions=ctx,
            name=f"custom-{L}x{D}",
        )
    if kv is not None and H % kv:
        raise UserError(
            f"--kv-heads {kv} does not divide --heads {H}: each key/value head serves a whole group of query heads"
        )
    if dh is None:
        if D % H:
            raise UserError(f"--d-model {D} is not divisible by --heads {H}; give --head-dim for heads of another size")
        if (D // H) % 2:
            raise UserError(
                f"--d-model {D} / --heads {H} = {D // H} is an odd head size; rotary embeddings turn "
                f"pairs of numbers (give an even --head-dim)"
            )
    elif dh % 2:
        raise UserError(f"--head-dim {dh} is odd; rotary embeddings turn pairs of numbers")
    return LlamaConfig(
        n_layer=L,
        n_head=H,
        n_embd=D,
        n_inner=sizes["--d-ff"] or gated_mlp_width(D),
        vocab_size=vocab,
        n_kv_head=kv,
        head_dim=dh,
        n_positions=ctx,
        name=f"custom-llama-{L}x{D}",
    )
