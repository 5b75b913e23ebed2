"""`python -m minitransformer ...`: a thin layer over the Python API.

Bad input never ends in a traceback: a one-line message on stderr that says what to do, exit
status 2, and no output file half-written. Output paths are checked before any work (files.py).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from pathlib import Path

from .errors import UserError
from .text import plural
from .views.files import check_destination, check_destinations, write_text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's default prints the whole usage; we print one line
        raise UserError(f"{message} (see {self.prog} --help)")


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


HTML_HELP = "write the report as one self-contained HTML page, to open in a browser (- for stdout)"
DENSE_HELP = (
    "compute every T x t attention score, as transformers' eager attention does (and the textbook "
    "counts); by default a prompt longer than 128 positions computes attention in chunks of query rows, "
    "each against only the keys it can see: the same logits, about half the score MACs at long prompts"
)


def _add_dtype(p: argparse.ArgumentParser, what: str) -> None:
    """--dtype of the commands that compute (count's --dtype is another thing: the byte size memory is counted in)."""
    from .models.config import DTYPES

    p.add_argument(
        "--dtype",
        choices=DTYPES,
        default=DTYPES[0],
        help=f"the number format {what}: float32 (default), or float64, the reference: every stage, the KV "
        f"cache and the logits in float64, the weights upcast on load (twice the memory)",
    )


def build_parser() -> argparse.ArgumentParser:
    from .families.table import ARCHITECTURES, model_types
    from .models.hub import HUB_REPOS
    from .models.registry import known_names
    from .version import __version__

    families = ", ".join(ARCHITECTURES)
    directory = f"or a Hugging Face directory (model_type {', '.join(model_types())})"
    parser = _Parser(
        prog="minitransformer",
        description=f"Transformers in NumPy with every matrix multiply counted (families: {families}).",
    )
    parser.add_argument("--version", action="version", version=f"minitransformer {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gen = commands.add_parser("generate", help="continue a prompt and show where the dot products went")
    gen.add_argument("prompt", nargs="*", help="the text to continue (or --ids); several prompts run as one batch")
    gen.add_argument(
        "--prompts",
        metavar="FILE|-",
        help="prompts to run as one batch, one per line of a UTF-8 file (- for stdin); empty lines skipped",
    )
    gen.add_argument("--ids", metavar="1,2,3", help="token ids instead of text (for a model without tokenizer.json)")
    gen.add_argument("--model", help=f"{', '.join(known_names())}, {directory}")
    gen.add_argument("--max-new-tokens", type=_whole_number, default=8)
    gen.add_argument("--temperature", type=_number, default=0.0, help="0 (default) is greedy")
    gen.add_argument("--top-k", type=_whole_number, default=None)
    gen.add_argument("--seed", type=_whole_number, default=None)
    gen.add_argument("--no-cache", action="store_true", help="recompute the whole sequence at every step")
    gen.add_argument("--top", type=_whole_number, default=10, help="candidates shown for the first new token")
    gen.add_argument("--layer", type=_whole_number, default=0, help="the block shown op by op (default 0)")
    gen.add_argument("--json", metavar="PATH|-", help="write the ledger as JSON (- for stdout)")
    gen.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    gen.add_argument("--dense-attention", action="store_true", help=DENSE_HELP)
    _add_dtype(gen, "the forward passes compute in")
    gen.set_defaults(run=_generate)

    down = commands.add_parser("download", help="fetch a GPT-2 checkpoint from the Hugging Face Hub")
    down.add_argument("name", help=" or ".join(HUB_REPOS))
    down.set_defaults(run=_download)

    val = commands.add_parser("validate", help="compare logits with Hugging Face transformers on the same weights")
    val.add_argument("--model", help="a model name or directory (default: as for generate)")
    val.add_argument("--steps", type=_whole_number, default=8, help="greedy tokens compared step by step")
    _add_dtype(
        val,
        "ours and transformers' are compared in (1e-4 relative in float32, 1e-9 in float64; either way "
        "both float32 passes are also measured against the float64 truth)",
    )
    val.set_defaults(run=_validate)

    tr = commands.add_parser("trace", help="follow a prompt through every stage: names, equations, shapes, values")
    tr.add_argument("prompt", nargs="?", help="the text to follow (or --ids)")
    tr.add_argument("--ids", metavar="1,2,3", help="token ids instead of text (for a model without tokenizer.json)")
    tr.add_argument("--model", help="a model name or directory (default: as for generate)")
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
        help="stop at each stage: Enter next, n next layer, c continue, p print, s stats, q quit",
    )
    tr.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    tr.add_argument(
        "--dense-attention",
        action="store_true",
        help="accepted as generate and count take it; a trace computes attention dense anyway, since it "
        "shows every stage's whole tensor",
    )
    _add_dtype(tr, "the traced passes compute in")
    tr.set_defaults(run=_trace)

    cnt = commands.add_parser(
        "count", help=f"count the dot products of a model of any family ({families}) from its shapes alone"
    )
    _add_model_selectors(cnt)
    cnt.add_argument("--tokens", type=_whole_number, required=True, metavar="T", help="prompt length in tokens")
    cnt.add_argument(
        "--new-tokens",
        type=_whole_number,
        default=1,
        metavar="N",
        help="tokens generated: 1 prefill + N-1 decode steps (default 1: the prefill only)",
    )
    cnt.add_argument("--no-cache", action="store_true", help="recompute the whole sequence at every step")
    cnt.add_argument(
        "--batch", type=_whole_number, default=1, metavar="B", help="sequences counted together (default 1)"
    )
    cnt.add_argument(
        "--balance",
        type=_number,
        default=None,
        metavar="MACS_PER_BYTE",
        help="machine balance for the memory-bound marks (default 10: a desktop CPU)",
    )
    cnt.add_argument(
        "--dtype",
        choices=("float32", "bfloat16", "float16"),
        default="float32",
        help="the number format memory is counted in: weights, KV cache, activations and bytes moved "
        "(default float32, as the engine computes; bfloat16 and float16 are 2 bytes a number)",
    )
    cnt.add_argument("--json", metavar="PATH|-", help="write the ledger as JSON (- for stdout)")
    cnt.add_argument(
        "--all-steps",
        action="store_true",
        help="in --json, every decode step in full (default: the steps the table shows; others as totals)",
    )
    cnt.add_argument("--csv", metavar="PATH|-", help="write one row per matrix product per pass as CSV (- for stdout)")
    cnt.add_argument(
        "--plot",
        metavar="PNG",
        help="write three plots (MAC share by op, dot products vs length, MACs per token) as one PNG",
    )
    cnt.add_argument("--html", metavar="PATH|-", help=HTML_HELP)
    cnt.add_argument("--dense-attention", action="store_true", help=DENSE_HELP)
    cnt.add_argument(
        "--routing",
        choices=("balanced", "worst"),
        help="a mixture of experts, counted without a router: the tokens each expert gets, balanced (the default: T k "
        "/ E each) or worst (every token to the same k experts); the totals are the same",
    )
    cnt.set_defaults(run=_count)

    cfg = commands.add_parser(
        "config", help="the presets of every family, and the config.json transformers reads for one"
    )
    which_preset = cfg.add_mutually_exclusive_group(required=True)
    which_preset.add_argument("--list", action="store_true", help="every preset of every family, a line each")
    which_preset.add_argument(
        "--preset", metavar="NAME", help="print the preset's config.json, as transformers reads it"
    )
    cfg.set_defaults(run=_config)

    par = commands.add_parser("params", help="every weight tensor by its Hugging Face name, grouped by kind, totals")
    _add_model_selectors(par)
    par.add_argument("--json", metavar="PATH|-", help="write the tensors, kinds and total as JSON (- for stdout)")
    par.set_defaults(run=_params)
    return parser


def _generate(args) -> None:
    """One prompt or several (a batch): the same checks, one load, one call of generate; the answers printed
    as they stream for one prompt, after the batch for several; then the ledger, and the files asked for."""
    from .models.model import refuse_empty
    from .models.registry import load_model
    from .verbs.generate import batch_to_dict, check_options
    from .views import report

    check_options(args.max_new_tokens, args.temperature, args.top_k, args.seed)
    if args.top < 1:
        raise UserError("--top must be at least 1")
    if args.layer < 0:
        raise UserError("--layer must be 0 or more")
    prompts = args.prompt + (_prompt_lines(args.prompts) if args.prompts is not None else [])
    batch = len(prompts) > 1 or args.prompts is not None
    if batch and args.ids is not None:
        raise UserError("give prompts or --ids, not both: --ids is one prompt of token ids")
    if not batch:
        args.prompt = prompts[0] if prompts else None
        prompts = [_prompt_or_ids(args, "continue")]
    refuse_empty(prompts, "continue")
    to = check_destinations({"--json": args.json, "--html": args.html})  # before any work; files.py says how
    json_to, html_to = to["--json"], to["--html"]
    model = load_model(args.model, dtype=args.dtype)
    if args.layer >= model.config.n_layer:
        raise UserError(f"--layer {args.layer} does not exist; this model has layers 0..{model.config.n_layer - 1}")
    rows = model.prompt_rows(prompts, args.max_new_tokens)  # refuse before the first line of output
    out = sys.stderr if any(d and d.is_stdout for d in to.values()) else sys.stdout  # then stdout holds the document
    _notice_unused_sampling(args)

    print(f"model {report.describe_model(model.describe(), model.source)}", file=out)
    options = dict(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                   seed=args.seed, use_cache=not args.no_cache, candidates=args.top,
                   dense_attention=args.dense_attention)  # fmt: skip
    if batch:
        print(f"a batch of {len(rows)} prompts, left-padded to {max(map(len, rows))} tokens", file=out)
        results = model.generate(prompts, **options)
        for k, (generation, tokens) in enumerate(zip(results, rows)):
            print(f"\n[{k + 1}] prompt: {plural(len(tokens), 'token')} {tokens}", file=out)
            print(generation.full_text, file=out)
        print(file=out)
    else:
        prompt, tokens = prompts[0], rows[0]
        print(f"prompt: {plural(len(tokens), 'token')} {tokens}", file=out)
        print(file=out)
        out.write(prompt if isinstance(prompt, str) else model.tokenizer.decode(prompt))
        out.flush()

        def stream(_token: int, text: str) -> None:
            out.write(text)
            out.flush()

        results = [model.generate(prompt, **options, on_token=stream,
                                  attention=_attention_layers(model, tokens, args) if html_to else None)]  # fmt: skip
        print("\n", file=out)
        print("Next-token candidates after the prompt (probabilities at temperature 1)", file=out)
        print(report.candidates_table(results[0].candidates), file=out)
        print(file=out)
    print(report.ledger_report(results[0].ledger, layer=args.layer), file=out)
    if json_to:
        document = batch_to_dict(results) if batch else results[0].to_dict()
        write_text(json_to, [json.dumps(document, indent=1) + "\n"])
        if not json_to.is_stream:
            print(f"\nledger written to {args.json}", file=out)
    if html_to:
        from .views.html_report import batch_data, generation_data, write_page

        write_page(html_to, batch_data(results) if batch else generation_data(results[0]), out)


def _prompt_lines(path: str) -> list[str]:
    """The prompts of --prompts FILE: one per line, UTF-8 (as prompts in argv must be), empty lines skipped."""
    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as err:
        raise UserError(f"cannot read --prompts {path}: {err.strerror or err}; give a readable text file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"--prompts {path} is not UTF-8 text (byte {err.start}); save it as UTF-8") from None
    prompts = [line for line in text.splitlines() if line]
    if not prompts:
        raise UserError(f"--prompts {path} holds no prompt; write one per line")
    return prompts


def _attention_layers(model, tokens, args) -> list[int] | None:
    from .views.html_report import attention_layers

    layers = attention_layers(model.config, len(tokens) + args.max_new_tokens - 1, args.layer)
    return layers or None  # a model without attention has no weights to draw


def _download(args) -> None:
    from .models.hub import download

    print(download(args.name))


def _validate(args) -> None:
    from .models.registry import load_model
    from .verbs.validate import validate

    model = load_model(args.model, dtype=args.dtype)
    ok = validate(model, steps=args.steps)
    if not ok:
        raise SystemExit(1)


def parse_ids(text: str) -> list[int]:
    """ "464, 3139,286" -> [464, 3139, 286]; the model checks them against its vocabulary (Model.check_ids)."""
    parts = [part.strip() for part in text.split(",")]
    if not all(re.fullmatch(r"-?\d+", part) for part in parts):
        raise UserError(f"--ids takes whole numbers separated by commas, such as 464,3139,286; not {text!r}")
    return [int(part) for part in parts]


def _prompt_or_ids(args, verb: str) -> str | list[int]:
    """The text prompt or the --ids list: exactly one of them."""
    if args.ids is not None and args.prompt is not None:
        raise UserError(f"give a prompt or --ids, not both: {verb} takes text or token ids")
    if args.ids is not None:
        return parse_ids(args.ids)
    if args.prompt is None:
        raise UserError(f"give a prompt to {verb} (text) or --ids 1,2,3 (token ids)")
    return args.prompt


def _trace(args) -> None:
    from .views.trace import trace_command

    html_to = None if args.html is None else check_destination(args.html)  # before any work
    trace_command(
        _prompt_or_ids(args, "trace"), args.model, args.new_tokens, args.layers, args.step, html_to, args.dtype
    )


def _add_model_selectors(p: argparse.ArgumentParser) -> None:
    from .families.table import PRESETS, model_types

    which = p.add_argument_group(
        "the model, one way (default: the gpt2 preset); its shapes only, never its weights",
        "Sizes make a GPT-2 block; any of --kv-heads, --head-dim and --gated-mlp makes a Llama-style block instead: "
        "RMSNorm, rotary positions, q, k, v as three products, a gated SiLU MLP, no biases.",
    )
    which.add_argument("--model", metavar="NAME_OR_DIR", help="a preset's name, demo, or a directory with config.json")
    which.add_argument("--preset", metavar="NAME", help=", ".join(PRESETS))
    which.add_argument(
        "--config", metavar="config.json", help=f"a Hugging Face config.json (model_type {', '.join(model_types())})"
    )
    which.add_argument("--layers", type=_whole_number, metavar="L", help="sizes: layers (with --d-model and --heads)")
    which.add_argument("--d-model", type=_whole_number, metavar="D", help="sizes: model width")
    which.add_argument(
        "--heads",
        type=_whole_number,
        metavar="H",
        help="sizes: attention heads (must divide D unless --head-dim is given)",
    )
    which.add_argument(
        "--d-ff", type=_whole_number, metavar="F", help="sizes: MLP width (default 4 D; Llama-style: see --gated-mlp)"
    )
    which.add_argument("--vocab", type=_whole_number, metavar="V", help="sizes: vocabulary (default 50257)")
    which.add_argument("--ctx", type=_whole_number, metavar="N", help="sizes: context length (default 1024)")
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
        "to 8D/3 rounded up to a multiple of 256 (11,008 for D = 4,096)",
    )


def _model_config(args):
    from .verbs.select import select_config

    return select_config(args.model, args.preset, args.config, args.layers, args.d_model, args.heads, args.d_ff,
                         args.vocab, args.ctx, args.kv_heads, args.head_dim, args.gated_mlp)  # fmt: skip


def _count(args) -> None:
    from .verbs.count import check_run, count_generation
    from .verbs.memory import DEFAULT_BALANCE
    from .views.count_report import count_report
    from .views.export import csv_chunks, json_chunks

    config = _model_config(args)
    check_run(config, args.tokens, args.new_tokens, args.batch)
    balance = DEFAULT_BALANCE if args.balance is None else args.balance
    if not balance > 0 or balance == float("inf"):
        raise UserError(f"--balance must be a positive number of MACs per byte, not {args.balance}")
    if args.plot is not None and (args.plot == "-" or Path(args.plot).suffix.lower() != ".png"):
        raise UserError(f"--plot takes a path ending in .png, not {args.plot!r}")
    to = check_destinations({"--json": args.json, "--csv": args.csv, "--plot": args.plot, "--html": args.html})
    if args.plot is not None:
        from .views.plots import require_matplotlib

        require_matplotlib()  # fail before writing anything
    if args.routing is not None and config.n_experts is None:
        raise UserError(f"--routing is for a mixture of experts; {config.name} has none (a dense MLP in every layer)")
    count = count_generation(config, args.tokens, args.new_tokens, use_cache=not args.no_cache, batch=args.batch,
                             dense_attention=args.dense_attention, routing=args.routing or "balanced")  # fmt: skip
    out = sys.stderr if any(d and d.is_stdout for d in to.values()) else sys.stdout  # stdout: the document only
    print(count_report(count, balance, args.dtype), file=out)
    if to["--json"]:
        write_text(to["--json"], json_chunks(count, balance, all_steps=args.all_steps, dtype=args.dtype))
    if to["--csv"]:
        write_text(to["--csv"], csv_chunks(count))
    if to["--plot"]:
        from .views.plots import write_plots

        write_plots(count, to["--plot"])
    for what, dest in (("ledger", to["--json"]), ("CSV", to["--csv"]), ("plots", to["--plot"])):
        if dest and not dest.is_stream:
            print(f"{what} written to {dest.name}", file=out)
    if to["--html"]:
        from .views.html_report import count_data, write_page

        write_page(to["--html"], count_data(count, balance, args.all_steps, dtype=args.dtype), out)


def _config(args) -> None:
    from .verbs.presets import preset_config_json, preset_lines

    if args.list:
        print("\n".join(preset_lines()))
    else:
        sys.stdout.write(preset_config_json(args.preset))


def _params(args) -> None:
    from .verbs.params import parameters
    from .views.params_report import params_report

    config = _model_config(args)
    json_to = None if args.json is None else check_destination(args.json)
    p = parameters(config)
    out = sys.stderr if json_to and json_to.is_stdout else sys.stdout
    print(params_report(p), file=out)
    if json_to:
        write_text(json_to, [json.dumps(p.to_dict(), indent=1) + "\n"])
        if not json_to.is_stream:
            print(f"parameters written to {args.json}", file=out)


def _notice_unused_sampling(args) -> None:
    """One stderr line, not a refusal, so that scripts which always pass --seed keep working."""
    unused = [flag for flag, value in (("--top-k", args.top_k), ("--seed", args.seed)) if value is not None]
    if unused and args.temperature == 0:
        print(f"minitransformer: {' and '.join(unused)} ignored: decoding is greedy at --temperature 0 (the default); "
              f"sampling needs --temperature > 0", file=sys.stderr)  # fmt: skip


def _one_line(message: str) -> str:
    """A message that quotes the user's input (a path, an argument) as it stays one line on a terminal:
    line breaks and other unprintable characters in it are shown as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


def main(argv: list[str] | None = None) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper) and sys.stdout.errors == "strict":
        # A path in argv that is not UTF-8 reaches us with surrogate escapes; echoed ("written to PATH"), it
        # is shown escaped (\udce9), as on stderr and in the documents we write, instead of a traceback.
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        args = build_parser().parse_args(argv)
        args.run(args)
        return 0
    except UserError as err:
        sys.stdout.flush()
        print(f"minitransformer: error: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
