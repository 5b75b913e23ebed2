"""`python -m minitransformer ...`: a thin layer over the Python API.

Bad input never ends in a traceback: a one-line message on stderr that says what to do, exit
status 2, and no output file half-written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import UserError
from .files import atomic_path


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="minitransformer", description="GPT-2 in NumPy with every matrix multiply counted.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    gen = commands.add_parser("generate", help="continue a prompt and show where the dot products went")
    gen.add_argument("prompt")
    gen.add_argument("--model", help="gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, demo, demo-llama, or a directory")
    gen.add_argument("--max-new-tokens", type=_whole_number, default=8)
    gen.add_argument("--temperature", type=_number, default=0.0, help="0 (default) is greedy")
    gen.add_argument("--top-k", type=_whole_number, default=None)
    gen.add_argument("--seed", type=_whole_number, default=None)
    gen.add_argument("--no-cache", action="store_true", help="recompute the whole sequence at every step")
    gen.add_argument("--top", type=_whole_number, default=10, help="candidates shown for the first new token")
    gen.add_argument("--layer", type=_whole_number, default=0, help="the block shown op by op (default 0)")
    gen.add_argument("--json", metavar="PATH|-", help="write the ledger as JSON (- for stdout)")
    gen.set_defaults(run=_generate)

    down = commands.add_parser("download", help="fetch a GPT-2 checkpoint from the Hugging Face Hub")
    down.add_argument("name", help="gpt2, gpt2-medium, gpt2-large, gpt2-xl or distilgpt2")
    down.set_defaults(run=_download)

    val = commands.add_parser("validate", help="compare logits with Hugging Face transformers on the same weights")
    val.add_argument("--model", help="a model name or directory (default: as for generate)")
    val.add_argument("--steps", type=_whole_number, default=8, help="greedy tokens compared step by step")
    val.set_defaults(run=_validate)

    tr = commands.add_parser("trace", help="follow a prompt through every stage: names, equations, shapes, values")
    tr.add_argument("prompt")
    tr.add_argument("--model", help="a model name or directory (default: as for generate)")
    tr.add_argument("--new-tokens", type=_whole_number, default=1,
                    help="cached decode steps after the prefill, one new token each (default 1; 0: prefill only)")
    tr.add_argument("--layers", metavar="0,11|1-3|all",
                    help="blocks shown stage by stage (default: the first and the last); the others fold into one line")
    tr.add_argument("--step", action="store_true",
                    help="stop at each stage: Enter next, n next layer, c continue, p print, s stats, q quit")
    tr.set_defaults(run=_trace)

    cnt = commands.add_parser("count", help="count the dot products of any GPT-2-shaped model from its shapes alone")
    _add_model_selectors(cnt)
    cnt.add_argument("--tokens", type=_whole_number, required=True, metavar="T", help="prompt length in tokens")
    cnt.add_argument("--new-tokens", type=_whole_number, default=1, metavar="N",
                     help="tokens generated: 1 prefill + N-1 decode steps (default 1: the prefill only)")
    cnt.add_argument("--no-cache", action="store_true", help="recompute the whole sequence at every step")
    cnt.add_argument("--batch", type=_whole_number, default=1, metavar="B",
                     help="sequences counted together (default 1)")
    cnt.add_argument("--balance", type=_number, default=None, metavar="MACS_PER_BYTE",
                     help="machine balance for the memory-bound marks (default 10: a desktop CPU)")
    cnt.add_argument("--json", metavar="PATH|-", help="write the ledger as JSON (- for stdout)")
    cnt.add_argument("--all-steps", action="store_true",
                     help="in --json, every decode step in full (default: the steps the table shows; others as totals)")
    cnt.add_argument("--csv", metavar="PATH|-", help="write one row per matrix product per pass as CSV (- for stdout)")
    cnt.add_argument("--plot", metavar="PNG",
                     help="write three plots (MAC share by op, dot products vs length, MACs per token) as one PNG")
    cnt.set_defaults(run=_count)

    par = commands.add_parser("params", help="every weight tensor by its Hugging Face name, grouped by kind, totals")
    _add_model_selectors(par)
    par.add_argument("--json", metavar="PATH|-", help="write the tensors, kinds and total as JSON (- for stdout)")
    par.set_defaults(run=_params)
    return parser


def _check_output_path(path: str | None) -> None:
    if path in (None, "-"):
        return
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise UserError(f"cannot write {path}: directory {parent} does not exist")
    if Path(path).is_dir():
        raise UserError(f"cannot write {path}: it is a directory")


def write_document(path: str, chunks) -> None:
    """Stream a document to stdout (-) or, through a temporary file and a rename, to a path:
    readers never see half a file, and a failure leaves none behind."""
    if path == "-":
        for chunk in chunks:
            sys.stdout.write(chunk)
        sys.stdout.flush()
        return
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        for chunk in chunks:
            f.write(chunk)


def _generate(args) -> None:
    from . import report
    from .generate import check_options
    from .model import load_model

    check_options(args.max_new_tokens, args.temperature, args.top_k, args.seed)
    if args.top < 1:
        raise UserError("--top must be at least 1")
    if args.layer < 0:
        raise UserError("--layer must be 0 or more")
    if not args.prompt:
        raise UserError("the prompt is empty; give some text to continue, e.g. \"The capital of France is\"")
    _check_output_path(args.json)
    model = load_model(args.model)
    if args.layer >= model.config.n_layer:
        raise UserError(f"--layer {args.layer} does not exist; this model has layers 0..{model.config.n_layer - 1}")
    tokens = model.tokenizer.encode(args.prompt)
    model.config.check_fits(len(tokens), args.max_new_tokens)  # refuse before the first line of output
    model.check_ids(tokens)
    out = sys.stderr if args.json == "-" else sys.stdout  # with --json -, stdout holds only the JSON

    print(f"model {report.describe_model(model.config.to_dict(), model.source)}", file=out)
    print(f"prompt: {len(tokens)} tokens {tokens}", file=out)
    print(file=out)
    out.write(args.prompt)
    out.flush()

    def stream(_token: int, text: str) -> None:
        out.write(text)
        out.flush()

    result = model.generate(args.prompt, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                            top_k=args.top_k, seed=args.seed, use_cache=not args.no_cache, candidates=args.top,
                            on_token=stream)  # fmt: skip
    print("\n", file=out)
    print("Next-token candidates after the prompt (probabilities at temperature 1)", file=out)
    print(report.candidates_table(result.candidates), file=out)
    print(file=out)
    print(report.ledger_report(result.ledger, layer=args.layer), file=out)
    if args.json:
        document = json.dumps(result.to_dict(), indent=1)
        write_document(args.json, [document + "\n"])
        if args.json != "-":
            print(f"\nledger written to {args.json}", file=out)


def _download(args) -> None:
    from .hub import download

    print(download(args.name))


def _validate(args) -> None:
    from .model import load_model
    from .validate import validate

    model = load_model(args.model)
    ok = validate(model, steps=args.steps)
    if not ok:
        raise SystemExit(1)


def _trace(args) -> None:
    from .trace import trace_command

    trace_command(args.prompt, args.model, args.new_tokens, args.layers, args.step)


def _add_model_selectors(p: argparse.ArgumentParser) -> None:
    which = p.add_argument_group("the model, one way (default: the gpt2 preset); its shapes only, never its weights")
    which.add_argument("--model", metavar="NAME_OR_DIR",
                       help="gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, demo, or a directory with config.json")
    which.add_argument("--preset", metavar="NAME", help="gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2, gpt3-175b")
    which.add_argument("--config", metavar="config.json", help="a Hugging Face GPT-2 config.json")
    which.add_argument("--layers", type=_whole_number, metavar="L", help="sizes: layers (with --d-model and --heads)")
    which.add_argument("--d-model", type=_whole_number, metavar="D", help="sizes: model width")
    which.add_argument("--heads", type=_whole_number, metavar="H", help="sizes: attention heads (must divide D)")
    which.add_argument("--d-ff", type=_whole_number, metavar="F", help="sizes: MLP width (default 4 D)")
    which.add_argument("--vocab", type=_whole_number, metavar="V", help="sizes: vocabulary (default 50257)")
    which.add_argument("--ctx", type=_whole_number, metavar="N", help="sizes: context length (default 1024)")


def _model_config(args):
    from .count import select_config

    return select_config(args.model, args.preset, args.config, args.layers, args.d_model, args.heads, args.d_ff,
                         args.vocab, args.ctx)  # fmt: skip


def _count(args) -> None:
    from .count import check_run, count_generation, csv_chunks, json_chunks
    from .count_report import count_report
    from .memory import DEFAULT_BALANCE

    config = _model_config(args)
    check_run(config, args.tokens, args.new_tokens, args.batch)
    balance = DEFAULT_BALANCE if args.balance is None else args.balance
    if not balance > 0 or balance == float("inf"):
        raise UserError(f"--balance must be a positive number of MACs per byte, not {args.balance}")
    if args.json == "-" and args.csv == "-":
        raise UserError("--json - and --csv - would both write to stdout; send one of them to a file")
    for path in (args.json, args.csv, args.plot):
        _check_output_path(path)
    if args.plot is not None:
        if args.plot == "-" or Path(args.plot).suffix.lower() != ".png":
            raise UserError(f"--plot takes a path ending in .png, not {args.plot!r}")
        from .plots import require_matplotlib

        require_matplotlib()  # fail before writing anything
    count = count_generation(config, args.tokens, args.new_tokens, use_cache=not args.no_cache, batch=args.batch)
    out = sys.stderr if "-" in (args.json, args.csv) else sys.stdout  # stdout holds only the document
    print(count_report(count, balance), file=out)
    if args.json:
        write_document(args.json, json_chunks(count, balance, all_steps=args.all_steps))
    if args.csv:
        write_document(args.csv, csv_chunks(count))
    if args.plot:
        from .plots import write_plots

        write_plots(count, args.plot)
    for what, path in (("ledger", args.json), ("CSV", args.csv), ("plots", args.plot)):
        if path and path != "-":
            print(f"{what} written to {path}", file=out)


def _params(args) -> None:
    from .params import parameters, params_report

    config = _model_config(args)
    _check_output_path(args.json)
    p = parameters(config)
    out = sys.stderr if args.json == "-" else sys.stdout
    print(params_report(p), file=out)
    if args.json:
        write_document(args.json, [json.dumps(p.to_dict(), indent=1) + "\n"])
        if args.json != "-":
            print(f"parameters written to {args.json}", file=out)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.run(args)
        return 0
    except UserError as err:
        sys.stdout.flush()
        print(f"minitransformer: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
