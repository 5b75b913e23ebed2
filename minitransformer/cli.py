"""`python -m minitransformer ...`: a thin layer over the Python API.

Bad input never ends in a traceback: a one-line message on stderr that says what to do, exit
status 2, and no output file half-written. Output paths are checked before any work (files.py).
"""

from __future__ import annotations

import argparse
import codecs
import io
import re
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from .engine.precision import PRECISIONS
from .errors import OptionError, UserError, held_notes, say_held_notes
from .families.config import ModelConfig
from .families.parts.moe import ROUTINGS
from .families.table import ARCHITECTURES, PRESETS, model_types
from .models.hub import HUB_REPOS, download
from .models.model import refuse_empty
from .models.options import DTYPES, WEIGHTS, LoadOptions, RunOptions
from .models.registry import known_names, resolve
from .models.tokenizer import NoTokenizer
from .text import plural
from .verbs.attribute import attribute, count_attribute
from .verbs.count import check_run, counted, sweep_per_token
from .verbs.crosscheck import crosscheck, default_ids, require_hf
from .verbs.draft import count_drafts, mtp_of
from .verbs.drift import drift
from .verbs.generate import batch_to_dict, check_padding, continue_rows
from .verbs.hardware import machine
from .verbs.hardware import names as hardware_names
from .verbs.lens import TOP_TOKENS, count_lens, logit_lens
from .verbs.memory import DEFAULT_BALANCE
from .verbs.options import GenerationOptions
from .verbs.params import parameters
from .verbs.patch import count_patch, patch
from .verbs.presets import preset_config_json, preset_lines
from .verbs.roofline import roofline
from .verbs.select import select_config
from .verbs.validate import PRECISION_TOLERANCES, validate, validate_precision
from .version import __version__
from .views import report
from .views.attribute_report import attribute_report
from .views.count_report import count_report
from .views.crosscheck_report import crosscheck_report
from .views.draft_report import draft_report
from .views.drift_report import drift_report
from .views.export import csv_chunks, json_chunks, json_text
from .views.files import Destination, check_destination, check_destinations, write_text, write_together
from .views.html_report import (
    analysis_data,
    attention_layers,
    batch_data,
    count_data,
    generation_data,
    page,
    say_written,
)
from .views.lens_report import bill_report, lens_report
from .views.params_report import params_report
from .views.patch_report import patch_report
from .views.plots import plots_png, require_matplotlib
from .views.roofline_report import roofline_report
from .views.trace import trace_command

T = TypeVar("T")


# Help that names the table's families, model types or presets holds a placeholder, filled in when help is shown:
# the names are the whole table's, and reading it whole loads every family (families/table.py), where a command that
# runs one model builds this parser too.
_TABLE_NAMES = {
    "{families}": lambda: ", ".join(ARCHITECTURES),
    "{model_types}": lambda: ", ".join(model_types()),
    "{presets}": lambda: ", ".join(PRESETS),
}


def _with_table_names(text: str) -> str:
    for placeholder, names in _TABLE_NAMES.items():
        if placeholder in text:
            text = text.replace(placeholder, names())
    return text


_ASCII_SPACES = re.compile(r"\s+", re.ASCII)  # what argparse joins before it wraps (a no-break space stays)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's, with the table's names put in (before it wraps the lines)."""

    def _format_text(self, text: str) -> str:
        return super()._format_text(_with_table_names(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return _with_table_names(super()._expand_help(action))

    # argparse's wrapping breaks a word after its hyphens: a preset's name read "seed-" at a line's end and "oss-36b"
    # on the next. These wrap at spaces only, so every name in a help reads whole and copies as one.
    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(_ASCII_SPACES.sub(" ", text).strip(), width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        words = _ASCII_SPACES.sub(" ", text).strip()
        return textwrap.fill(words, width, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)


class _Parser(argparse.ArgumentParser):
    commands: dict[str, argparse.ArgumentParser] = {}  # the top-level parser's subcommands, by name

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"formatter_class": _HelpFormatter, **kwargs})
        # A value that starts with "-" is read as a flag unless argparse sees a negative number in it, and it sees none
        # in -inf, -1e-3, -nan or a list of ids -5,3 ("expected one argument"): they are numbers here too, for the
        # option to judge.
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$|^-\d+(\s*,\s*-?\d*)+$", re.I
        )

    def error(self, message: str):  # argparse's default prints the whole usage; we print one line
        raise UserError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args=None, namespace=None):
        """argparse leaves the arguments a subcommand does not take to the top-level parser, whose error would send
        the user to the top-level help: they are refused by the subcommand's parser instead, which points to its
        own help, and a flag that another command takes says which."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            command = self.commands.get(getattr(parsed, "command", None) or "", self)
            flags = [a.split("=")[0] for a in extras if a.startswith("--")]
            owners = {
                flag: [name for name, p in self.commands.items() if flag in p._option_string_actions] for flag in flags
            }
            elsewhere = "".join(f"; {flag} is an option of {_listed(names)}" for flag, names in owners.items() if names)
            command.error(f"unrecognized arguments: {' '.join(extras)}{elsewhere}")
        return parsed


def _listed(names: list[str]) -> str:
    """["a", "b", "c"] -> "a, b and c"."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


HTML_HELP = "write the report as one self-contained HTML page, to open in a browser (- for stdout; default: none)"
JSON_HELP = "write the ledger as JSON (- for stdout; default: none)"
ANALYSIS_JSON_HELP = "write the analysis as JSON, the model's description first (- for stdout; default: none)"
IDS_HELP = "token ids instead of text, for a model without tokenizer.json (default: none)"
ANALYSIS_IDS_HELP = (
    "the prompt's token ids instead of its text, for a model without tokenizer.json; --target and --versus (and "
    "patch's --corrupt) are then token ids too (default: none)"
)
NO_CACHE_HELP = "recompute the whole sequence at every step (default: off, the KV cache holds the keys and values)"
DEFAULT_TOKENS = 100  # count's prompt length when --tokens is not given (fewer where the context holds fewer)
DEFAULT_MODEL = "gpt2 if its weights are on this machine or the hub answers, else the demo model"
DENSE_HELP = (
    "compute every T x t attention score, as transformers' eager attention does (and the textbook "
    "counts); by default a prompt longer than 128 positions computes attention in chunks of query rows, "
    "each against only the keys it can see: the same logits, about half the score MACs at long prompts (default: off)"
)


def _add_load_options(
    p: argparse.ArgumentParser, what: str, precisions: tuple[str, ...] = PRECISIONS, note: str = ""
) -> None:
    """--dtype, --precision and --weights of the commands that compute: how the model is loaded (LoadOptions; count's
    --dtype is another thing, the byte size memory is counted in). `precisions`: the formats the command takes, so its
    --help offers no other; `note` says why, where not every one."""
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        default=DTYPES[0],
        help=f"the number format {what}: float32 (the default), or float64, the reference: every stage, the KV "
        f"cache and the logits in float64, the weights upcast on load (twice the memory)",
    )
    p.add_argument(
        "--precision",
        choices=precisions,
        default=PRECISIONS[0],
        help="emulate a narrower format over the float32 passes: every product's operands rounded to it (round to "
        "nearest even; fp8_e4m3 saturates at 448, the others overflow to inf), accumulated in float32, its output "
        "and every stage's values rounded to it (bfloat16 for fp8); then the drift of each layer and stage against "
        f"float64 (default float32: nothing rounded){note}",
    )
    p.add_argument(
        "--weights",
        choices=WEIGHTS,
        default=None,
        help="a float16 or bfloat16 checkpoint: stored keeps its matrices memory-mapped in their 2 bytes, each "
        "widened as a product reads it (the memory of the file); float32 upcasts them at load (twice that, faster "
        "decoding) (default auto: float32 where the copy fits in half the memory available, else stored)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="minitransformer",
        description="Transformers in NumPy with every matrix multiply counted (families: {families}).",
    )
    parser.add_argument("--version", action="version", version=f"minitransformer {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    parser.commands = commands.choices  # type: ignore[assignment]  # filled in as each is added below
    for add in (
        _add_generate,
        _add_download,
        _add_validate,
        _add_trace,
        _add_count,
        _add_crosscheck,
        _add_config,
        _add_params,
        _add_lens,
        _add_patch,
        _add_attribute,
    ):  # each command's parser, in the order --help lists them
        add(commands)
    return parser


def _add_generate(commands) -> None:
    directory = "or a Hugging Face directory (model_type {model_types})"
    gen = commands.add_parser("generate", help="continue a prompt and show where the dot products went")
    gen.add_argument("prompt", nargs="*", help="the text to continue (or --ids); several prompts run as one batch")
    gen.add_argument(
        "--prompts",
        metavar="FILE|-",
        help="prompts to run as one batch, one per line of a UTF-8 file (- for stdin); empty lines skipped "
        "(default: none)",
    )
    gen.add_argument("--ids", metavar="1,2,3", help=IDS_HELP)
    gen.add_argument("--model", help=f"{', '.join(known_names())}, {directory} (default: {DEFAULT_MODEL})")
    gen.add_argument(
        "--max-new-tokens", type=_whole_number, default=8, metavar="N", help="tokens to generate (default 8)"
    )
    gen.add_argument(
        "--temperature",
        type=_number,
        default=0.0,
        metavar="T",
        help="0 is greedy; above 0, sampled from the softmax (default 0)",
    )
    gen.add_argument(
        "--top-k",
        type=_whole_number,
        default=None,
        metavar="K",
        help="sampling: only the K likeliest tokens (default: all); needs --temperature above 0",
    )
    gen.add_argument(
        "--seed",
        type=_whole_number,
        default=None,
        metavar="S",
        help="sampling: the random seed, for a repeatable sample (default: a fresh one each run); needs --temperature",
    )
    gen.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    gen.add_argument(
        "--top",
        type=_whole_number,
        default=10,
        metavar="N",
        help="candidates shown for the first new token (default 10)",
    )
    gen.add_argument("--layer", type=_whole_number, default=0, metavar="L", help="the block shown op by op (default 0)")
    gen.add_argument("--json", metavar="PATH|-", help=JSON_HELP)
    gen.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    gen.add_argument("--dense-attention", action="store_true", help=DENSE_HELP)
    _add_load_options(gen, "the forward passes compute in")
    gen.set_defaults(run=_generate)


def _add_download(commands) -> None:
    down = commands.add_parser("download", help="fetch a GPT-2 checkpoint from the Hugging Face Hub")
    down.add_argument("name", help=f"{' or '.join(HUB_REPOS)} (no default: name one)")
    down.set_defaults(run=_download)


def _add_validate(commands) -> None:
    val = commands.add_parser("validate", help="compare logits with Hugging Face transformers on the same weights")
    val.add_argument("--model", help=f"a model name or directory (default: {DEFAULT_MODEL})")
    val.add_argument(
        "--steps", type=_whole_number, default=8, metavar="N", help="greedy tokens compared step by step (default 8)"
    )
    _add_load_options(
        val,
        "ours and transformers' are compared in (1e-4 relative in float32, 1e-9 in float64; either way "
        "both float32 passes are also measured against the float64 truth)",
        ("float32", *PRECISION_TOLERANCES),
        f"; validate takes float32, {' and '.join(PRECISION_TOLERANCES)}, the formats transformers computes on a CPU "
        "(generate --precision fp8_e4m3 measures fp8's drift against float64)",
    )
    val.set_defaults(run=_validate)


def _add_trace(commands) -> None:
    tr = commands.add_parser("trace", help="follow a prompt through every stage: names, equations, shapes, values")
    tr.add_argument("prompt", nargs="?", help="the text to follow (or --ids)")
    tr.add_argument("--ids", metavar="1,2,3", help=IDS_HELP)
    tr.add_argument("--model", help=f"a model name or directory (default: {DEFAULT_MODEL})")
    tr.add_argument(
        "--new-tokens",
        type=_whole_number,
        default=2,
        metavar="N",
        help="tokens generated: 1 prefill + N-1 cached decode steps (default 2; 1: the prefill only)",
    )
    tr.add_argument(
        "--layers",
        metavar="0,11|1-3|all",
        help="blocks shown stage by stage (default: the first and the last); the others fold into one line",
    )
    tr.add_argument(
        "--step",
        action="store_true",
        help="stop at each stage: Enter next, n next layer, c continue, p print, s stats, q quit (default: off)",
    )
    tr.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    tr.add_argument(
        "--dense-attention",
        action="store_true",
        help="accepted as generate and count take it; a trace computes attention dense anyway, since it "
        "shows every stage's whole tensor (default: off, and dense all the same)",
    )
    _add_load_options(tr, "the traced passes compute in")
    tr.set_defaults(run=_trace)


def _add_count(commands) -> None:
    cnt = commands.add_parser(
        "count", help="count the dot products of a model of any family ({families}) from its shapes alone"
    )
    _add_model_selectors(cnt)
    cnt.add_argument(
        "--tokens",
        type=_whole_number,
        metavar="T",
        help=f"prompt length in tokens (default {DEFAULT_TOKENS}, or as many as the context leaves beside "
        "--new-tokens where it holds fewer)",
    )
    cnt.add_argument(
        "--new-tokens",
        type=_whole_number,
        default=1,
        metavar="N",
        help="tokens generated: 1 prefill + N-1 decode steps (default 1: the prefill only)",
    )
    cnt.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)
    cnt.add_argument(
        "--batch", type=_whole_number, default=1, metavar="B", help="sequences counted together (default 1)"
    )
    cnt.add_argument(
        "--balance",
        type=_number,
        default=None,
        metavar="MACS_PER_BYTE",
        help="machine balance for the memory-bound marks, in MACs per byte (default 10: a desktop CPU)",
    )
    cnt.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default="float32",
        help="the number format memory is counted in: weights, KV cache, activations and bytes moved "
        "(default float32, as the engine computes; bfloat16 and float16 are 2 bytes a number)",
    )
    cnt.add_argument(
        "--hardware",
        metavar="NAME",
        help="the roofline of every product on a named machine (a bound, not a measurement): "
        + ", ".join(hardware_names())
        + " (this CPU, probed in a few seconds); its peak follows --dtype (default: none)",
    )
    _add_count_outputs(cnt)
    cnt.add_argument("--dense-attention", action="store_true", help=DENSE_HELP)
    cnt.add_argument(
        "--routing",
        choices=ROUTINGS,
        help="a mixture of experts, counted without a router: the tokens each expert gets, balanced (T k / E each) "
        "or worst (every token to the same k experts); the totals are the same (default: balanced)",
    )
    cnt.add_argument(
        "--mtp",
        action="store_true",
        help="the draft of a model with multi-token-prediction layers (DeepSeek-V3's): an MTP pass beside each pass, "
        "in its own phase (default: the main model alone, as transformers' generate computes it)",
    )
    cnt.set_defaults(run=_count)


def _add_count_outputs(cnt: argparse.ArgumentParser) -> None:
    """count's files: the ledger as JSON, a CSV row per product, the plots, the HTML report."""
    cnt.add_argument("--json", metavar="PATH|-", help=JSON_HELP)
    cnt.add_argument(
        "--all-steps",
        action="store_true",
        help="in --json, every decode step in full (default: the steps the table shows; others as totals)",
    )
    cnt.add_argument(
        "--csv", metavar="PATH|-", help="write one row per matrix product per pass as CSV (- for stdout; default: none)"
    )
    cnt.add_argument(
        "--plot",
        metavar="PNG",
        help="write three plots (MAC share by op, dot products vs length, MACs per token) as one PNG (default: none)",
    )
    cnt.add_argument("--html", metavar="PATH|-", help=HTML_HELP)


def _add_crosscheck(commands) -> None:
    cc = commands.add_parser(
        "crosscheck",
        help="our ledger beside torch's own counters (dispatched products, FlopCounterMode) on transformers' forward "
        "of the same model and ids, group by group, with the reason for every difference (needs the hf extra)",
    )
    cc.add_argument("--model", help="a model name or directory (default: as for generate)")
    cc.add_argument(
        "--tokens",
        type=_whole_number,
        metavar="T",
        help="seeded random token ids (default 160, past the 128-row chunk, or the context where it is shorter)",
    )
    cc.add_argument("--ids", metavar="1,2,3", help="these token ids instead (default: none; --tokens random ones)")
    cc.add_argument("--dense-attention", action="store_true", help=DENSE_HELP)
    cc.add_argument("--json", metavar="PATH|-", help="write the counts as JSON (- for stdout; default: none)")
    cc.set_defaults(run=_crosscheck)


def _add_config(commands) -> None:
    cfg = commands.add_parser(
        "config", help="the presets of every family, and the config.json transformers reads for one"
    )
    which_preset = cfg.add_mutually_exclusive_group(required=True)
    which_preset.add_argument(
        "--list",
        action="store_true",
        help="every preset of every family, a line each (default: off; give --list or --preset)",
    )
    which_preset.add_argument(
        "--preset", metavar="NAME", help="print the preset's config.json, as transformers reads it (default: none)"
    )
    cfg.set_defaults(run=_config)


def _add_params(commands) -> None:
    par = commands.add_parser("params", help="every weight tensor by its Hugging Face name, grouped by kind, totals")
    _add_model_selectors(par)
    par.add_argument(
        "--json", metavar="PATH|-", help="write the tensors, kinds and total as JSON (- for stdout; default: none)"
    )
    par.set_defaults(run=_params)


def _add_lens(commands) -> None:
    lens = commands.add_parser(
        "lens", help="the logit lens: each layer's stream through the final norm and unembedding, with its bill"
    )
    lens.add_argument("prompt", nargs="?", help="the text read (not needed with --count-only)")
    lens.add_argument(
        "--target",
        help="the token whose rank and probability each layer gives (one token; default: none, needed but with "
        "--count-only)",
    )
    lens.add_argument("--positions", action="store_true", help="every position, not the last only (default: off)")
    lens.add_argument("--top", type=_whole_number, metavar="N", help=f"top tokens shown per row (default {TOP_TOKENS})")
    lens.add_argument("--ids", metavar="1,2,3", help=ANALYSIS_IDS_HELP)
    _add_count_only(lens)
    _add_analysis_model(lens, "the lens computes in", _lens)


def _add_count_only(p: argparse.ArgumentParser) -> None:
    """An analysis's --count-only: its bill from a config alone, for a prompt of --tokens tokens."""
    p.add_argument(
        "--count-only", action="store_true", help="the bill from shapes alone, no weights (any preset; default: off)"
    )
    p.add_argument(
        "--tokens",
        type=_whole_number,
        default=None,
        metavar="N",
        help=f"--count-only's prompt length (default {DEFAULT_TOKENS}, or the whole context where it holds fewer)",
    )


def _add_analysis_model(p: argparse.ArgumentParser, computes_in: str, run, sizes: bool = True) -> None:
    """An analysis's model, how it is loaded, its files, and the command's `run`."""
    _add_model_selectors(p, sizes=sizes, analysis=True)
    _add_load_options(p, computes_in)
    p.add_argument("--json", metavar="PATH|-", help=ANALYSIS_JSON_HELP)
    p.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    p.set_defaults(run=run)


def _counted_only(args) -> tuple[ModelConfig, int]:
    """--count-only's config and its prompt length (DEFAULT_TOKENS, or the whole context where it holds fewer, as
    count's). It prints a bill alone: there is no analysis for --json or --html to write, and they are refused."""
    asked = [flag for flag, value in (("--json", args.json), ("--html", args.html)) if value is not None]
    if asked:
        raise UserError(
            f"--count-only prints the bill alone, with no analysis for {' or '.join(asked)} to write: drop "
            f"{'them' if len(asked) > 1 else 'it'}, or --count-only to run the analysis"
        )
    given = {"a prompt": getattr(args, "prompt", None), "--ids": getattr(args, "ids", None),
             "--corrupt": getattr(args, "corrupt", None),
             "--target": getattr(args, "target", None), "--versus": getattr(args, "versus", None),
             "--top": getattr(args, "top", None),
             "--weights": args.weights, "--fold-ln": getattr(args, "fold_ln", False),
             "--center-writing-weights": getattr(args, "center_writing_weights", False),
             "--dtype": args.dtype != DTYPES[0], "--precision": args.precision != PRECISIONS[0]}  # fmt: skip
    ignored = [flag for flag, value in given.items() if value not in (None, False)]
    if ignored:  # else ignored without a word, as the shape flags were beside a real run
        raise UserError(
            f"--count-only bills the analysis from shapes alone, without weights or text: {ignored[0]} has no part "
            f"in it; drop it, or --count-only to run the analysis"
        )
    config = _model_config(args)
    tokens = min(DEFAULT_TOKENS, config.n_positions) if args.tokens is None else args.tokens
    _at_least("--tokens", tokens, 1)
    return config, tokens


def _lens(args) -> None:
    if args.count_only:
        config, tokens = _counted_only(args)
        print(bill_report(count_lens(config, tokens, args.positions), f"lens of {tokens} tokens on {config.name}"))
        return
    if not args.prompt and args.ids is None:
        raise UserError('lens needs a prompt, e.g. lens "The capital of France is" --target " Paris" (or --ids 1,2,3)')
    if args.target is None:
        raise UserError('lens needs --target, the token to follow, e.g. --target " Paris"')
    top = TOP_TOKENS if args.top is None else args.top
    _at_least("--top", top, 1)
    prompt, target = _texts_or_ids(args, "lens", {"prompt": args.prompt, "--target": args.target}).values()
    lens = lambda model: logit_lens(model, prompt, target, args.positions, top)  # noqa: E731
    _analysis(args, "lens", "lens", lens, lens_report)


def _add_patch(commands) -> None:
    pat = commands.add_parser(
        "patch", help="activation patching: the share of a logit difference each layer and position restores, its bill"
    )
    pat.add_argument("prompt", nargs="?", help="the clean text (not needed with --count-only)")
    pat.add_argument("--corrupt", metavar="TEXT", help="the corrupted text, as many tokens (default: none, needed)")
    pat.add_argument("--target", help="the token A of the logit difference A - B (one token; default: none, needed)")
    pat.add_argument("--versus", help="the token B of the logit difference A - B (one token; default: none, needed)")
    pat.add_argument(
        "--heads",
        dest="head_patching",
        action="store_true",
        help="each attention head's output too, per layer and position (default: off, the residual stream only)",
    )
    pat.add_argument("--ids", metavar="1,2,3", help=ANALYSIS_IDS_HELP)
    _add_count_only(pat)
    _add_analysis_model(pat, "the sweep computes in", _patch, sizes=False)


def _patch(args) -> None:
    if args.count_only:
        config, tokens = _counted_only(args)
        bill = count_patch(config, tokens, args.head_patching)
        heads = " and heads" * args.head_patching
        print(bill_report(bill, f"patching the stream{heads} of {tokens} tokens on {config.name}"))
        return
    example = (
        'e.g. patch "The capital of France is" --corrupt "The capital of Germany is" --target " Paris" '
        '--versus " Berlin"'
    )
    asked = {"prompt": args.prompt, "--corrupt": args.corrupt, "--target": args.target, "--versus": args.versus}
    _needs("patch", asked, example, args.ids, prompt="a clean prompt")
    clean, corrupt, target, versus = _texts_or_ids(args, "patch", asked).values()
    patching = lambda model: patch(model, clean, corrupt, target, versus, args.head_patching)  # noqa: E731
    _analysis(args, "patch", "patching", patching, patch_report)


def _add_attribute(commands) -> None:
    att = commands.add_parser(
        "attribute", help="direct logit attribution: a logit difference split among what wrote the stream, its bill"
    )
    att.add_argument("prompt", nargs="?", help="the text read (not needed with --count-only)")
    att.add_argument("--target", help="the token A of the logit difference A - B (one token; default: none, needed)")
    att.add_argument("--versus", help="the token B of the logit difference A - B (one token; default: none, needed)")
    att.add_argument("--ids", metavar="1,2,3", help=ANALYSIS_IDS_HELP)
    _add_count_only(att)
    att.add_argument(
        "--fold-ln",
        action="store_true",
        help="TransformerLens's fold_ln: the final norm's gain folded into W_U, its bias into the logits' bias "
        "(default: off, the gain applied to each part; the same shares)",
    )
    att.add_argument(
        "--center-writing-weights",
        action="store_true",
        help="TransformerLens's center_writing_weights: each part centred over d_model (LayerNorm models; default: off)",
    )
    _add_analysis_model(att, "the attribution computes in", _attribute, sizes=False)


def _attribute(args) -> None:
    if args.count_only:
        config, tokens = _counted_only(args)
        print(bill_report(count_attribute(config, tokens), f"attribution of {tokens} tokens on {config.name}"))
        return
    example = 'e.g. attribute "The capital of France is" --target " Paris" --versus " Berlin"'
    asked = {"prompt": args.prompt, "--target": args.target, "--versus": args.versus}
    _needs("attribute", asked, example, args.ids)
    prompt, target, versus = _texts_or_ids(args, "attribute", asked).values()
    options = args.fold_ln, args.center_writing_weights
    attribution = lambda model: attribute(model, prompt, target, versus, *options)  # noqa: E731
    _analysis(args, "attribute", "attribution", attribution, attribute_report)


def _needs(verb: str, asked: dict, example: str, ids: str | None = None, prompt: str = "a prompt") -> None:
    """Refuse the first of the `asked` flags (or the "prompt", named `prompt` in the words) left empty, with an example
    of a whole command; `ids` (--ids) stands for the prompt."""
    for key, value in asked.items():
        if key == "prompt" and ids is not None:
            continue
        flag = prompt if key == "prompt" else key
        if value == "":  # given, but empty: not the same mistake as leaving it out
            raise UserError(f"{flag} is empty; {verb} needs some text there, {example}")
        if not value:
            raise UserError(f"{verb} needs {flag}, {example}")


def _texts_or_ids(args, verb: str, tokens: dict) -> dict:
    """An analysis's prompt and tokens as given: text, or with --ids token ids (the prompt's ids --ids's, the other
    prompt a list of ids, a token one id)."""
    if args.ids is None:
        return tokens
    if tokens["prompt"] is not None:
        raise UserError(f"give a prompt or --ids, not both: {verb} takes text or token ids")
    read: dict[str, list[int] | int] = {"prompt": parse_ids(args.ids)}
    for flag, value in tokens.items():
        if flag == "--corrupt":
            read[flag] = parse_ids(value, flag)
        elif flag != "prompt":
            if not re.fullmatch(r"\s*-?\d+\s*", value):
                raise UserError(f"with --ids, {flag} is a token id, a whole number such as 6342; not {value!r}")
            read[flag] = int(value)
    return read


# each analysis verb's function in the API (docs/api.md)
ANALYSIS_FUNCTIONS = {
    "lens": "minitransformer.verbs.lens.logit_lens",
    "patch": "minitransformer.verbs.patch.patch",
    "attribute": "minitransformer.verbs.attribute.attribute",
}


# What gives an analysis's model from shapes alone (its --count-only bill): flag -> its dest
SHAPES_ONLY = {"--preset": "preset", "--config": "config", "--tokens": "tokens", "--layers": "layers",
               "--d-model": "d_model", "--heads": "heads", "--d-ff": "d_ff", "--vocab": "vocab", "--ctx": "ctx",
               "--kv-heads": "kv_heads", "--head-dim": "head_dim", "--gated-mlp": "gated_mlp"}  # fmt: skip


def _analysis(args, kind: str, name: str, analyse, report) -> None:
    """An analysis of the model, `analyse(model)`: its `report` on the terminal (on stderr where a file streams to
    stdout), and its files, both or neither (files.write_together): its document as JSON (the model's description
    first), its page."""
    shapes_only = [flag for flag, dest in SHAPES_ONLY.items() if getattr(args, dest, None) not in (None, False)]
    if shapes_only:  # else ignored: `lens ... --preset llama2-7b` ran the demo GPT-2
        raise UserError(
            f"{shapes_only[0]} is for --count-only (a bill from shapes alone); {kind} runs a model's weights on the "
            f"prompt: give --model NAME_OR_DIR, or add --count-only"
        )
    to = check_destinations({"--json": args.json, "--html": args.html})  # before any work
    model = resolve(args.model, _load_options(args))
    if isinstance(model.tokenizer, NoTokenizer) and args.ids is None:  # text, and nothing to turn it into tokens
        raise UserError(
            f"{model.tokenizer.directory} has no tokenizer.json, and {kind} reads its prompt and tokens as text: give "
            f"token ids, --ids 1,2,3 (--target and --versus then ids too; in Python, {ANALYSIS_FUNCTIONS[kind]} takes "
            f"ids)"
        )
    analysis = analyse(model)
    out = sys.stderr if any(d is not None and d.is_stdout for d in to.values()) else sys.stdout
    print(report(analysis, model.tokenizer.decode), file=out)
    found = analysis.to_dict(model.tokenizer.decode)
    document = {"model": model.describe(), **found}

    def json_document(f) -> None:
        f.write(json_text(document) + "\n")

    def html_page(f) -> None:
        f.write(page(analysis_data(kind, document)))

    write_together([(to["--json"], json_document, False), (to["--html"], html_page, False)])
    if to["--json"] and not to["--json"].is_stream:
        print(f"{name} written to {args.json}", file=out)
    if to["--html"]:
        say_written(to["--html"], out)


# How a refusal names an option: the API's name of it -> the flag the user typed, for every option group a command
# makes from its flags (models/options.py's LoadOptions and RunOptions, verbs/options.py's GenerationOptions, count's
# run: verbs/count.check_run). Each group checks its options once; this keeps the refusal in the command's words.
FLAGS = {
    "dtype": "--dtype",
    "precision": "--precision",
    "weights": "--weights",
    "routing": "--routing",
    "dense_attention": "--dense-attention",
    "max_new_tokens": "--max-new-tokens",
    "temperature": "--temperature",
    "top_k": "--top-k",
    "seed": "--seed",
    "candidates": "--top",
    "tokens": "--tokens",
    "new tokens": "--new-tokens",
    "batch": "--batch",
}


def _in_flags(check: Callable[..., T], *args, **kwargs) -> T:
    """An option group made (or a run checked) from the flags, a refusal naming the flags rather than the API's names."""
    try:
        return check(*args, **kwargs)
    except OptionError as refused:
        raise refused.named(FLAGS) from None


def _load_options(args) -> LoadOptions:
    """--dtype, --precision and --weights: the one value a model is loaded with, checked before any work."""
    return _in_flags(LoadOptions, args.dtype, args.precision, args.weights)


def _generate(args) -> None:
    """One prompt or several (a batch): the flags and the prompts checked once, one load, one run of the generation
    loop; the answers printed as they stream for one prompt, after the batch for several; then the ledger, and the
    files asked for."""
    _at_least("--top", args.top, 1)  # the command's own rules (the API takes candidates=0 and any block to show)
    _at_least("--layer", args.layer, 0)
    running = RunOptions(dense_attention=args.dense_attention)
    options = _in_flags(
        GenerationOptions,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        seed=args.seed,
        use_cache=not args.no_cache,
        candidates=args.top,
        running=running,
    )
    prompts, batch = _generation_prompts(args)
    load = _load_options(args)
    to = check_destinations({"--json": args.json, "--html": args.html})  # before any work; files.py says how
    model = resolve(args.model, load)
    if args.layer >= model.config.n_layer:
        raise UserError(f"--layer {args.layer} does not exist; this model has layers 0..{model.config.n_layer - 1}")
    try:
        rows = model.prompt_rows(prompts, options.max_new_tokens)  # refuse before the first line of output
    except UserError as err:
        if "context of" not in str(err) or "; give" in str(err):  # said, or said what to do (a prompt too long)
            raise
        raise UserError(f"{err}; give a shorter prompt or fewer --max-new-tokens") from None
    if batch:
        check_padding(model, rows)
    out = sys.stderr if any(d and d.is_stdout for d in to.values()) else sys.stdout  # then stdout holds the document
    _notice_unused_sampling(args)

    print(f"model {report.describe_model(model.describe(), model.source)}", file=out)
    if batch:
        results = _continue_batch(model, prompts, rows, options, out)
    else:
        drawn = args.layer if to["--html"] else None  # the page draws this block's attention
        results = _continue_one(model, prompts[0], rows[0], options, drawn, out)
    ledger = results[0].ledger
    assert ledger is not None  # the command's options keep one (GenerationOptions.ledger)
    print(report.ledger_report(ledger, layer=args.layer), file=out)
    if load.precision != "float32":  # what the precision cost, against float64 (the first prompt's)
        results[0].drift = drift(model, prompts[0])
        print(file=out)
        print(drift_report(results[0].drift), file=out)
    _write_generation(results, batch, to, out)


def _generation_prompts(args) -> tuple[list, bool]:
    """generate's prompts, and whether they are a batch: several arguments or --prompts' lines, or one prompt given
    as text or as --ids; none empty."""
    prompts = args.prompt + (_prompt_lines(args.prompts) if args.prompts is not None else [])
    batch = len(prompts) > 1 or args.prompts is not None
    if batch and args.ids is not None:
        raise UserError("give prompts or --ids, not both: --ids is one prompt of token ids")
    if not batch:
        prompts = [_prompt_or_ids(prompts[0] if prompts else None, args.ids, "generate", "continue")]
    refuse_empty(prompts, "continue")
    return prompts, batch


def _continue_batch(model, prompts: list, rows: list[list[int]], options: GenerationOptions, out) -> list:
    """A batch's generations, each printed after the batch ran: its prompt's ids and the text it ended with."""
    print(f"a batch of {plural(len(rows), 'prompt')}, left-padded to {plural(max(map(len, rows)), 'token')}", file=out)
    results = continue_rows(model, prompts, rows, options, batched=True)
    for k, (generation, tokens) in enumerate(zip(results, rows)):
        print(f"\n[{k + 1}] prompt: {plural(len(tokens), 'token')} {tokens}", file=out)
        print(generation.full_text, file=out)
    print(file=out)
    return results


def _continue_one(model, prompt, tokens: list[int], options: GenerationOptions, drawn: int | None, out) -> list:
    """One prompt's generation, its text printed as each token comes, then the candidates for the first new token;
    `drawn`: the block whose attention the page draws (None: no page)."""
    print(f"prompt: {plural(len(tokens), 'token')} {tokens}", file=out)
    print(file=out)
    out.write(prompt if isinstance(prompt, str) else model.tokenizer.decode(prompt))
    out.flush()

    def stream(_token: int, text: str) -> None:
        out.write(text)
        out.flush()

    positions = len(tokens) + options.max_new_tokens - 1
    # a model without attention has no weights to draw
    attention = (attention_layers(model.config, positions, drawn) or None) if drawn is not None else None
    results = continue_rows(model, [prompt], [tokens], options, on_token=stream, attention=attention)
    print("\n", file=out)
    print("Next-token candidates after the prompt (probabilities at temperature 1)", file=out)
    print(report.candidates_table(results[0].candidates), file=out)
    print(file=out)
    return results


def _write_generation(results: list, batch: bool, to: dict, out) -> None:
    """generate's files: the ledger as JSON and the HTML page, both written or neither."""
    json_to, html_to = to["--json"], to["--html"]

    def json_document(f) -> None:
        f.write(json_text(batch_to_dict(results) if batch else results[0].to_dict()) + "\n")

    def html_page(f) -> None:
        f.write(page(batch_data(results) if batch else generation_data(results[0])))

    write_together([(json_to, json_document, False), (html_to, html_page, False)])  # both written, or neither
    if json_to and not json_to.is_stream:
        print(f"\nledger written to {json_to.name}", file=out)
    if html_to:
        say_written(html_to, out)


def _prompt_lines(path: str) -> list[str]:
    """The prompts of --prompts FILE: one per line, UTF-8 (as prompts in argv must be; a byte-order mark, which
    editors put first, is not text), empty lines skipped."""
    if not path.strip():  # Path("") is the current directory: "Is a directory"
        raise UserError("--prompts is empty; give the path of a text file, or - for stdin")
    try:
        if path == "-" and sys.stdin is None:
            raise UserError("--prompts - reads stdin, which is closed; give a file, or the prompts on stdin")
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise UserError(f"cannot read --prompts {path}: {err.strerror or err}; give a readable text file") from None
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"--prompts {path} is not UTF-8 text (byte {bom + err.start}); save it as UTF-8") from None
    prompts = [line for line in text.splitlines() if line]
    if not prompts:
        raise UserError(f"--prompts {path} holds no prompt; write one per line")
    return prompts


def _download(args) -> None:
    print(download(args.name))


def _validate(args) -> None:
    _at_least("--steps", args.steps, 1)
    load = _load_options(args)  # --precision's choices are the formats validate takes (PRECISION_TOLERANCES)
    model = resolve(args.model, load)
    ok = validate_precision(model, steps=args.steps) if load.precision != "float32" else validate(model, args.steps)
    if not ok:
        raise SystemExit(1)


def parse_ids(text: str, flag: str = "--ids") -> list[int]:
    """ "464, 3139,286" -> [464, 3139, 286]; the model checks them against its vocabulary (Model.check_ids)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(re.fullmatch(r"-?\d+", part) for part in parts):
        raise UserError(f"{flag} takes whole numbers separated by commas, such as 464,3139,286; not {text!r}")
    return [int(part) for part in parts]


def _prompt_or_ids(prompt: str | None, ids: str | None, command: str, verb: str = "") -> str | list[int]:
    """The text prompt or the --ids list: exactly one of them. `verb`: what is done to the prompt, where it is not the
    command's name (generate continues it)."""
    verb = verb or command
    if ids is not None and prompt is not None:
        raise UserError(f"give a prompt or --ids, not both: {command} takes text or token ids")
    if ids is not None:
        return parse_ids(ids)
    if prompt is None:
        raise UserError(f"give a prompt to {verb} (text) or --ids 1,2,3 (token ids)")
    return prompt


def _trace(args) -> None:
    load = _load_options(args)
    html_to = None if args.html is None else check_destination(args.html)  # before any work
    prompt = _prompt_or_ids(args.prompt, args.ids, "trace")
    trace_command(prompt, args.model, args.new_tokens, args.layers, args.step, html_to, load)


def _add_model_selectors(p: argparse.ArgumentParser, sizes: bool = True, analysis: bool = False) -> None:
    """--model, --preset, --config, and with `sizes` a model made from its sizes (--layers, --heads, ...). An
    `analysis` runs --model's weights, and reads the others only with --count-only, so its defaults differ."""
    title = (
        f"the model: --model runs its weights (default: {DEFAULT_MODEL}); with --count-only, one way, its shapes "
        "only (default: the gpt2 preset)"
        if analysis
        else "the model, one way (default: the gpt2 preset); its shapes only, never its weights"
    )
    which = p.add_argument_group(
        title,
        "Sizes make a GPT-2 block; any of --kv-heads, --head-dim and --gated-mlp makes a Llama-style block instead: "
        "RMSNorm, rotary positions, q, k, v as three products, a gated SiLU MLP, no biases."
        if sizes
        else None,
    )
    which.add_argument(
        "--model",
        metavar="NAME_OR_DIR",
        help="demo, a model's name or a directory with config.json; with --count-only, any preset's name too "
        "(default: see the group's)"
        if analysis
        else "a preset's name, demo, or a directory with config.json (default: none; see the group's default)",
    )
    which.add_argument("--preset", metavar="NAME", help="{presets} (default: gpt2)")
    which.add_argument(
        "--config",
        metavar="config.json",
        help="a Hugging Face config.json (model_type {model_types}; default: none)",
    )
    if sizes:
        _add_gpt2_sizes(which)
        _add_llama_sizes(which)


def _add_gpt2_sizes(which: argparse._ArgumentGroup) -> None:
    """The sizes that make a GPT-2 block: --layers, --d-model and --heads make the model, the rest have defaults."""
    which.add_argument(
        "--layers",
        type=_whole_number,
        metavar="L",
        help="sizes: layers, with --d-model and --heads (no default: the three make a model)",
    )
    which.add_argument(
        "--d-model", type=_whole_number, metavar="D", help="sizes: model width (no default: with --layers and --heads)"
    )
    which.add_argument(
        "--heads",
        type=_whole_number,
        metavar="H",
        help="sizes: attention heads, dividing D unless --head-dim is given (no default: with --layers and --d-model)",
    )
    which.add_argument(
        "--d-ff", type=_whole_number, metavar="F", help="sizes: MLP width (default 4 D; Llama-style: see --gated-mlp)"
    )
    which.add_argument("--vocab", type=_whole_number, metavar="V", help="sizes: vocabulary (default 50257)")
    which.add_argument(
        "--ctx",
        type=_whole_number,
        metavar="N",
        help="sizes: context length (default 1024); with "
        "--preset, --model or --config: count at N positions past (or short of) the trained context",
    )


def _add_llama_sizes(which: argparse._ArgumentGroup) -> None:
    """The sizes that turn the GPT-2 block into a Llama-style one, any of them (the group's description says how)."""
    which.add_argument(
        "--kv-heads",
        type=_whole_number,
        metavar="HKV",
        help="sizes, Llama-style: key/value heads, dividing --heads (grouped-query attention; default H)",
    )
    which.add_argument(
        "--head-dim",
        type=_whole_number,
        metavar="DH",
        help="sizes, Llama-style: the size of a head, even (default D / H)",
    )
    which.add_argument(
        "--gated-mlp",
        action="store_true",
        help="sizes, Llama-style: a gated MLP, act(h W_gate) * h W_up, then W_down; there --d-ff defaults "
        "to 8D/3 rounded up to a multiple of 256 (11,008 for D = 4,096) (default: off, GPT-2's MLP)",
    )


def _model_config(args):
    def size(name: str):  # a command without sizes (patch: its --heads is another thing) has none of them
        return getattr(args, name, None)

    return select_config(
        args.model,
        args.preset,
        args.config,
        size("layers"),
        size("d_model"),
        size("heads"),
        size("d_ff"),
        size("vocab"),
        size("ctx"),
        size("kv_heads"),
        size("head_dim"),
        bool(size("gated_mlp")),
    )


def _count(args) -> None:
    config = _model_config(args)
    trained = _trained_context(args, config)
    tokens = _count_run(args, config)
    on = None if args.hardware is None else machine(args.hardware)  # a name it does not know: refused before any work
    balance = args.balance if args.balance is not None else on.balance(args.dtype) if on else DEFAULT_BALANCE
    if not balance > 0 or balance == float("inf"):
        raise UserError(f"--balance must be a positive number of MACs per byte, not {args.balance}")
    if args.plot is not None and (args.plot == "-" or Path(args.plot).suffix.lower() != ".png"):
        raise UserError(f"--plot takes a path ending in .png, not {args.plot!r}")
    to = check_destinations({"--json": args.json, "--csv": args.csv, "--plot": args.plot, "--html": args.html})
    if args.all_steps and args.json is None:  # it changes nothing else: asked for alone, it would be silently dropped
        raise UserError("--all-steps writes every decode step in full into --json; give --json PATH (or -) with it")
    if args.plot is not None:
        require_matplotlib()  # fail before writing anything
    if args.routing is not None and not config.routes:
        raise UserError(f"--routing is for a mixture of experts; {config.name} has none (a dense MLP in every layer)")
    running = _in_flags(RunOptions, args.routing or "balanced", args.dense_attention)
    options = _in_flags(GenerationOptions, max_new_tokens=args.new_tokens, use_cache=not args.no_cache, running=running)
    if args.mtp:
        mtp_of(config)  # a model without MTP layers: refused before any work
        if args.no_cache or any(to[flag] for flag in ("--csv", "--plot", "--html")):
            raise UserError(
                "--mtp counts the draft beside cached decoding, in the text report and --json: drop "
                "--no-cache, --csv, --plot and --html"
            )
    count = counted(config, tokens, options, args.batch)
    out = sys.stderr if any(d and d.is_stdout for d in to.values()) else sys.stdout  # stdout: the document only
    if trained is not None:
        print(
            f"{config.name} was trained to a context of {trained:,} positions and is counted at --ctx "
            f"{config.n_positions:,}: its shapes, so its counts, are the same; its answers there are not promised\n",
            file=out,
        )
    print(count_report(count, balance, args.dtype), file=out)
    drafts = count_drafts(count) if args.mtp else None
    if drafts is not None:
        print("\n" + draft_report(drafts), file=out)
    bound = None if on is None else roofline(count, on, args.dtype)
    if bound is not None:
        print("\n" + roofline_report(bound), file=out)
    _write_count(args, count, balance, bound, to, out, drafts)


def _trained_context(args, config) -> int | None:
    """The context a model given by name, preset or config.json was trained to, where --ctx counts it at another."""
    if args.ctx is None or all(given is None for given in (args.model, args.preset, args.config)):
        return None
    trained = select_config(args.model, args.preset, args.config).n_positions
    return trained if trained != config.n_positions else None


def _count_run(args, config) -> int:
    """The prompt's tokens count runs (--tokens, or the stated default where the context leaves room for it), the run
    checked once (verbs/count.check_run) in the flags' words; a context too short for it says how to fit."""
    tokens = args.tokens
    if tokens is None:  # the stated default, or what the context leaves room for
        tokens = max(1, min(DEFAULT_TOKENS, config.n_positions - args.new_tokens + 1))  # check_fits' room
    try:
        check_run(config, tokens, args.new_tokens, args.batch)
    except OptionError as refused:
        raise refused.named(FLAGS) from None
    except UserError as err:
        fed = tokens + args.new_tokens - 1  # the positions the run takes (check_fits)
        if fed <= config.n_positions:  # not the context's refusal
            raise
        sizes = any(v is not None for v in (args.layers, args.d_model, args.heads))
        fix = (
            f"give a longer context, --ctx {fed} or more (a model given by sizes has "
            f"--ctx 1024 unless told), or fewer --tokens or --new-tokens"
            if sizes
            else "give fewer --tokens or --new-tokens"
        )
        raise UserError(f"{err}; {fix}") from None
    return tokens


def _write_count(args, count, balance: float, bound, to: dict, out, drafts=None) -> None:
    """count's files, every one asked for written or none (files.write_together): the ledger as JSON (with the
    draft's MTP passes, `drafts`, where --mtp), a CSV row per product per pass, the plots, the HTML report."""

    def json_document(f) -> None:
        f.writelines(json_chunks(count, balance, args.all_steps, args.dtype, bound, drafts))

    def csv_rows(f) -> None:
        f.writelines(csv_chunks(count))

    def plots(f) -> None:
        f.write(plots_png(count, sweep_per_token(count.config)))

    def html_page(f) -> None:
        # the page holds the steps its tables show: --all-steps is --json's (every step in full made pages of 100s of MB)
        f.write(page(count_data(count, balance, dtype=args.dtype, roofline=bound)))

    write_together(
        [
            (to["--json"], json_document, False),
            (to["--csv"], csv_rows, False),
            (to["--plot"], plots, True),
            (to["--html"], html_page, False),
        ]
    )
    for what, dest in (("ledger", to["--json"]), ("CSV", to["--csv"]), ("plots", to["--plot"])):
        if dest and not dest.is_stream:
            print(f"{what} written to {dest.name}", file=out)
    if to["--html"]:
        say_written(to["--html"], out)


def _crosscheck(args) -> None:
    if args.ids is not None and args.tokens is not None:
        raise UserError("give --tokens or --ids, not both")
    require_hf()  # before any work: one line saying what to install
    json_to = None if args.json is None else check_destination(args.json)
    model = resolve(args.model)
    ids = parse_ids(args.ids) if args.ids is not None else default_ids(model, args.tokens)
    check = crosscheck(model, ids, dense_attention=args.dense_attention)
    _report_with_json(crosscheck_report(check), check.to_dict, json_to, "counts")


def _config(args) -> None:
    if args.list:
        print("\n".join(preset_lines()))
    else:
        sys.stdout.write(preset_config_json(args.preset))


def _params(args) -> None:
    config = _model_config(args)
    json_to = None if args.json is None else check_destination(args.json)
    p = parameters(config)
    _report_with_json(params_report(p), p.to_dict, json_to, "parameters")


def _report_with_json(report: str, document: Callable[[], dict], json_to: Destination | None, what: str) -> None:
    """A verb's report, then its document as JSON where --json asked for it (checked before any work): the report
    goes to stderr where the document takes stdout, and a file written is said, as `what` written to it."""
    out = sys.stderr if json_to and json_to.is_stdout else sys.stdout
    print(report, file=out)
    if json_to:
        write_text(json_to, [json_text(document()) + "\n"])
        if not json_to.is_stream:
            print(f"{what} written to {json_to.name}", file=out)


def _at_least(flag: str, value: int, low: int, hint: str = "") -> None:
    """A whole-number option below its least, refused in the flag's own words."""
    if value < low:
        least = "0 or more" if low == 0 else f"at least {low}"
        raise UserError(f"{flag} must be a whole number of {least}, not {value}{hint}")


def _notice_unused_sampling(args) -> None:
    """One stderr line, not a refusal, so that scripts which always pass --seed keep working."""
    unused = [flag for flag, value in (("--top-k", args.top_k), ("--seed", args.seed)) if value is not None]
    if unused and args.temperature == 0:
        print(
            f"minitransformer: {' and '.join(unused)} ignored: decoding is greedy at --temperature 0 (the default); "
            f"sampling needs --temperature > 0",
            file=sys.stderr,
        )


def _one_line(message: str) -> str:
    """A message that quotes the user's input (a path, an argument) as it stays one line on a terminal:
    line breaks and other unprintable characters in it are shown as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


@contextmanager
def arithmetic_in_one_note() -> Iterator[None]:
    """NumPy's warnings of a pass's arithmetic (an overflow, an invalid value: a float16 pass past its range, a NaN
    weight), which it prints where they happen, in the middle of the streamed text, with a line of our source, said as
    one note as the command ends; a command refused says its refusal alone. Other warnings pass as they are."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)  # each time: a warning said once before would be missed
        yield
    arithmetic = [w for w in caught if issubclass(w.category, RuntimeWarning) and " encountered in " in str(w.message)]
    for w in caught:
        if w not in arithmetic:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if arithmetic:
        met = ", ".join(dict.fromkeys(str(w.message).split(" encountered in ")[0] for w in arithmetic))
        first = f"{Path(arithmetic[0].filename).parent.name}/{Path(arithmetic[0].filename).name}:{arithmetic[0].lineno}"
        print(
            f"minitransformer: note: this run's arithmetic met {met} (first in {first}): the nan and inf shown come "
            "from it, a NaN or infinite weight or a value past the range of the run's number format",
            file=sys.stderr,
        )


@contextmanager
def notes_before_output() -> Iterator[None]:
    """A command's notes (errors.note: a default taken, the demo answering for GPT-2) said on stderr as its output
    begins, the first line written to stdout or stderr, or at its end if it writes none; a command refused before
    any output drops them, and says one line, its refusal (a prompt too long for the demo's context was two)."""
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = (NotesFirst(stream, streams[1]) for stream in streams)
    try:
        with held_notes():
            yield
            say_held_notes(streams[1])
    finally:
        sys.stdout, sys.stderr = streams


class UnwritableOutput(Exception):
    """The output stream refused a write (a full device, a closed descriptor): said in one line, exit 2."""


class NotesFirst:
    """A text stream whose writes say the held notes first (on `notes`, the real stderr); the rest is the stream's."""

    def __init__(self, stream, notes) -> None:
        self.stream, self.notes = stream, notes

    def write(self, text: str) -> int:
        say_held_notes(self.notes)
        if self.stream is None:  # closed by the shell (>&-)
            raise UnwritableOutput("it is closed")
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as err:  # /dev/full
            raise UnwritableOutput(err.strerror or str(err)) from None

    def writelines(self, lines) -> None:
        say_held_notes(self.notes)
        self.stream.writelines(lines)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


def main(argv: list[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        # A path in argv that is not UTF-8 reaches us with surrogate escapes; echoed ("written to PATH"), it
        # is shown escaped (\udce9), as on stderr and in the documents we write, instead of a traceback.
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        with notes_before_output(), arithmetic_in_one_note():
            args = build_parser().parse_args(argv)
            args.run(args)
        return 0
    except UserError as err:
        sys.stdout.flush()
        print(f"minitransformer: error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except PermissionError as err:  # a file or directory of the model this user may not read, wherever it was met
        sys.stdout.flush()
        print(f"minitransformer: error: cannot read {err.filename}: permission denied", file=sys.stderr)
        return 2
    except UnwritableOutput as err:
        if sys.stderr is not None:
            print(f"minitransformer: error: cannot write the output: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
