"""`trace`: every stage of the prefill and the decode steps with its equation, shapes, counts and values;
`--step` driven through a real pseudo-terminal; bad input refused in one line."""

from __future__ import annotations

import io
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import HF_FIXTURES, ROOT, run_cli, write_gpt2
from minitransformer import UserError, load_model
from minitransformer.cli import main
from minitransformer.engine.hooks import stage_names
from minitransformer.families.gpt2.config import GPT2Config
from minitransformer.families.gpt2.family import ARCHITECTURE as GPT2_FAMILY
from minitransformer.verbs.count import count_passes
from minitransformer.views.trace import Stepper, parse_layers, trace

GPT2 = GPT2_FAMILY.stage_table(GPT2Config())  # GPT-2's stages: every GPT-2 has the same

PROMPT = "The capital of France is"  # 5 tokens


def traced(model, prompt=PROMPT, **options):
    out = io.StringIO()
    result = trace(model, prompt, out=out, **options)
    return out.getvalue(), result


def passes(text: str) -> list[str]:
    """The text of each forward pass: from its '=== prefill' / '=== decode step k' header to its footer."""
    found = []
    for chunk in text.split("\n\n=== ")[1:]:
        lines = ("=== " + chunk).splitlines()
        footer = next(i for i, line in enumerate(lines) if i > 0 and line.startswith("=== "))
        found.append("\n".join(lines[: footer + 1]))
    return found


def entries(pass_text: str) -> dict[str, str]:
    """name -> the stage's lines (the name line and its indented lines), in order."""
    found: dict[str, str] = {}
    name = None
    for line in pass_text.splitlines()[2:-1]:  # between the header (and its sizes line) and the footer
        if not line.startswith(" "):
            name = line.split()[0]
            found[name] = line
        else:
            found[name] += "\n" + line
    return found


def expected_values(x: np.ndarray) -> str:
    return f"values  mean {x.mean():.4g}  std {x.std():.4g}  min {x.min():.4g}  max {x.max():.4g}"


def test_every_stage_in_order_with_its_equation_shapes_counts_and_values(small_gpt2):
    text, result = traced(small_gpt2, layers=[0, 1], new_tokens=2)
    prefill, decode = passes(text)
    assert prefill.startswith(
        "=== prefill: T = 5 new positions attending to t = 5; ids [464, 3139, 286, 4881, 318] ==="
    )
    assert decode.startswith("=== decode step 1: T = 1 new position attending to t = 6;")
    assert "sizes: T=5 t=5 D=16 H=2 dh=8 F=64 V=50257 R=1" in prefill
    first, second = entries(prefill), entries(decode)
    assert list(first) == stage_names(2, GPT2) and list(second) == stage_names(2, GPT2)

    assert first["embed"].splitlines()[1:3] == [
        "    in   ids [T] = [5]",
        "    out  [T, D] = [5, 16]   no dot products (lookup)",
    ]
    assert "[Q K V] = h W_qkv + b_qkv" in first["blocks.0.attn.qkv"]
    assert "in   h [T, D] = [5, 16], W_qkv [D, 3D] = [16, 48]" in first["blocks.0.attn.qkv"]
    assert "out  [T, 3D] = [5, 48]   240 dot products of length 16 = 3,840 MACs" in first["blocks.0.attn.qkv"]
    assert "out  [H, T, dh] = [2, 5, 8]   no dot products (reshape)" in first["blocks.0.attn.q"]
    assert "out  [H, T, dh] = [2, 5, 8]" in first["blocks.0.attn.v"]
    assert "S = Q K^T  (per head)" in first["blocks.1.attn.qk"]
    assert "in   Q [H, T, dh] = [2, 5, 8], K^T [H, dh, t] = [2, 8, 5]" in first["blocks.1.attn.qk"]
    assert (
        "out  [H, T, t] = [2, 5, 5]   50 dot products of length 8 = 400 MACs (causal: 30 needed)"
        in first["blocks.1.attn.qk"]
    )
    assert "(20 of 50 entries -inf: the masked future)" in first["blocks.0.attn.scores"]
    assert "values  mean 0.2  std" in first["blocks.0.attn.weights"]  # each row of weights sums to 1 over t = 5
    assert "out  [T, F] = [5, 64]   320 dot products of length 16 = 5,120 MACs" in first["blocks.0.mlp.up"]
    assert "out  [R, D] = [1, 16]" in first["last"]
    assert "out  [R, V] = [1, 50257]   50,257 dot products of length 16 = 804,112 MACs" in first["logits"]

    # Decode: one query row, keys and values for all six positions, nothing masked.
    assert "out  [H, T, dh] = [2, 1, 8]" in second["blocks.0.attn.q"]
    assert "in   k, v [H, T, dh] = [2, 1, 8]" in second["blocks.0.attn.keys"]
    assert "out  [H, t, dh] = [2, 6, 8]" in second["blocks.0.attn.keys"]
    assert "in   Q [H, T, dh] = [2, 1, 8], K^T [H, dh, t] = [2, 8, 6]" in second["blocks.0.attn.qk"]
    assert "out  [H, T, t] = [2, 1, 6]   12 dot products of length 8 = 96 MACs" in second["blocks.0.attn.qk"]
    assert "masked future" not in second["blocks.0.attn.scores"]
    assert "in   A [H, T, t] = [2, 1, 6], V [H, t, dh] = [2, 6, 8]" in second["blocks.1.attn.mix"]

    # The values summarised are the model's: the same as a capture of the same pass.
    _, cache = small_gpt2.run_with_cache(np.array(result.prompt_tokens), all_positions=False)
    for name in ("embed", "blocks.0.mlp.act", "blocks.1.resid_post", "logits"):
        assert expected_values(cache[name]) in first[name], name
    # The counts are the ledger's, and the tokens those of greedy generation.
    ledger = count_passes(small_gpt2, 5, 2)
    assert [p.dot_products for p in result.phases] == [p.dot_products for p in ledger.phases]
    assert f"=== prefill: {ledger.phases[0].dot_products:,} dot products, {ledger.phases[0].macs:,} MACs" in prefill
    assert result.new_tokens == small_gpt2.generate(PROMPT, max_new_tokens=2, stop_at_eos=False).new_tokens
    assert text.rstrip().endswith(f"greedy continuation {small_gpt2.tokenizer.decode(result.new_tokens)!r}")


def test_the_masked_entries_say_which_keys_they_are():
    """A sliding window's cut keys were called "the masked future", and so were they in a decode step, which has none."""
    model = load_model(HF_FIXTURES.parent / "hf_llama" / "mistral_window")
    T, W, H = 10, model.config.sliding_window, model.config.n_head
    prefill, step = (entries(p) for p in passes(traced(model, list(range(1, T + 1)), new_tokens=2)[0]))
    seen = sum(min(i + 1, W) for i in range(T))  # keys each query reads: itself and W - 1 before it
    says = f"({H * (T * T - seen)} of {H * T * T} entries -inf: masked: the future, keys before the window)"
    assert says in prefill["blocks.0.attn.scores"], prefill["blocks.0.attn.scores"]
    assert "entries -inf" not in step["blocks.0.attn.scores"], step["blocks.0.attn.scores"]  # its W keys alone


def test_an_overflow_s_infinities_are_not_called_masked():
    """An MLP stage that overflowed (float16) holds inf, -inf and NaN: they were all "-inf: the masked future". A
    stage that is no mask counts its -inf unlabelled, and the other non-finite values apart."""
    from minitransformer.views.trace import summary

    overflowed = np.array([[1.0, np.inf, -np.inf], [np.nan, 2.0, -np.inf]], np.float32)
    said = summary(overflowed)
    assert said.endswith("(2 of 6 entries -inf; 2 of 6 entries inf or NaN)") and "masked" not in said, said
    masked = np.array([[0.5, -np.inf], [0.25, 0.75]], np.float32)
    assert summary(masked, "the masked future").endswith("(1 of 4 entries -inf: the masked future)")


def test_blocks_not_chosen_fold_into_one_line_per_pass(tmp_path):
    model = load_model(write_gpt2(tmp_path / "four", n_layer=4, n_embd=8, n_head=2))
    text, result = traced(model, new_tokens=3)  # default: the first and the last block
    assert "blocks shown stage by stage: 0, 3 (the others fold into one line)" in text
    lines = text.splitlines()
    assert not any(line.startswith(("blocks.1.", "blocks.2.")) for line in lines)
    assert sum(line.startswith("blocks.3.attn.qk ") for line in lines) == 3  # 3 tokens: prefill + 2 decode steps
    folded = [line for line in lines if line.startswith("blocks.2 ")]
    assert len(folded) == 3
    layer_2 = result.phases[1].layer_records(2)
    assert (f"folded: 17 stages, {sum(r.dot_products for r in layer_2):,} dot products, "
            f"{sum(r.macs for r in layer_2):,} MACs; [T, D] = [1, 8] -> [T, D] = [1, 8]") in folded[1]  # fmt: skip
    _, cache = model.run_with_cache(np.array(result.prompt_tokens), names="blocks.1.resid_post")
    assert expected_values(cache["blocks.1.resid_post"]) in next(line for line in lines if line.startswith("blocks.1 "))

    everything, _ = traced(model, new_tokens=1, layers=parse_layers("all", 4))
    assert "every block shown stage by stage (0..3)" in everything and "prefill only, greedy" in everything
    assert "folded:" not in everything and "blocks.2.mlp.down " in everything and "=== decode" not in everything


@pytest.mark.parametrize("n", [1, 2, 4])
def test_new_tokens_means_what_it_means_for_count_and_generate(small_gpt2, n):
    """N new tokens: 1 prefill + N-1 decode steps, as `count --new-tokens N` and `generate --max-new-tokens N`."""
    text, result = traced(small_gpt2, new_tokens=n)
    generated = small_gpt2.generate(PROMPT, max_new_tokens=n, stop_at_eos=False)
    assert result.new_tokens == generated.new_tokens and len(result.new_tokens) == n
    counted = count_passes(small_gpt2, 5, n).phases
    assert [(p.phase, p.tokens, p.context) for p in result.phases] == [(p.phase, p.tokens, p.context) for p in counted]
    assert [p.records for p in result.phases] == [p.records for p in generated.ledger.phases]
    assert len(passes(text)) == n and text.count("=== decode step") == 2 * (n - 1)  # a header and a footer each
    steps = f"prefill + {n - 1} decode step{'s' if n != 2 else ''}" if n > 1 else "prefill only"
    assert f"{n} new token{'s' if n > 1 else ''}: {steps}, greedy;" in text


def test_trace_by_default_shows_the_prefill_and_one_decode_step(small_gpt2):
    text, result = traced(small_gpt2)
    assert [p.phase for p in result.phases] == ["prefill", "decode"] and len(result.new_tokens) == 2
    assert "2 new tokens: prefill + 1 decode step, greedy;" in text


@pytest.mark.parametrize("out", [5, "trace.txt"])
def test_an_out_that_cannot_be_written_to_is_refused_before_any_work(small_gpt2, out):
    """An AttributeError at the heading's print before."""
    with pytest.raises(UserError) as refused:
        trace(small_gpt2, "The capital", out=out)
    assert str(refused.value).startswith("out must be something to write to") and repr(out) in str(refused.value)


def test_layer_choices_are_read_and_checked():
    assert parse_layers(None, 12) == [0, 11] and parse_layers(None, 1) == [0]
    assert parse_layers("all", 3) == [0, 1, 2] and parse_layers("ALL", 2) == [0, 1]
    assert parse_layers(" 3, 0 ", 12) == [0, 3] and parse_layers("1-3,7", 12) == [1, 2, 3, 7]
    for bad, message in [("5", "block 5 does not exist; this model has blocks 0..1"), ("x", "not 'x'"),
                         ("1,,0", "block numbers"), ("-1", "block numbers"), ("1-0", "runs backwards")]:  # fmt: skip
        with pytest.raises(UserError, match=message):
            parse_layers(bad, 2)


def test_the_trace_shows_the_shapes_the_forward_pass_states_and_the_tape_checked(small_gpt2):
    """The symbolic shapes come from the forward pass's own lines, which the tape checks each run."""
    text, _ = traced(small_gpt2)
    assert "out  [T, F] = [5, 64]" in text and "out  [H, T, t] = [2, 5, 5]" in text


class Script:
    """Answers for the stepper's prompts, and the prompts it was given."""

    def __init__(self, *answers: str) -> None:
        self.answers, self.prompts = list(answers), []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)


def test_the_stepper_stops_at_each_stage_skips_a_layer_prints_and_runs_on(small_gpt2):
    out = io.StringIO()
    keys = Script("", "p", "s", "what", "n", "c")
    result = trace(small_gpt2, "The capital", new_tokens=2, out=out, stepper=Stepper(read=keys, out=out))
    text = out.getvalue()
    assert keys.prompts == ["[Enter] next  n layer  c continue  p print  s stats  q quit > "] * 6
    assert result.stopped_at is None and text.rstrip().endswith(repr(small_gpt2.tokenizer.decode(result.new_tokens)))
    # Stops: embed (Enter), blocks.0.ln_1 (p, s, an unknown key, n), blocks.1.ln_1 (c), then no more.
    _, cache = small_gpt2.run_with_cache(small_gpt2.tokenizer.encode("The capital"), names="blocks.0.ln_1")
    ln_1 = cache["blocks.0.ln_1"]
    printed = text.split("blocks.0.ln_1 [2, 16] =\n    [[", 1)[1].split("]]", 1)[0]
    assert printed.split()[0] == f"{ln_1[0, 0]:.4f}".rstrip("0") and printed.split()[-1] == f"{ln_1[1, -1]:.4f}".rstrip(
        "0"
    )
    assert "shape [2, 16]  float32  32 values (128 bytes)" in text
    assert f"max {ln_1.max():.6g} at {[int(i) for i in np.unravel_index(ln_1.argmax(), ln_1.shape)]}" in text
    assert "'what'? Enter: next stage, n: on to the next layer" in text
    assert "decode step 1" in text and "blocks.1.attn.qk " in passes(text)[1]  # c ran to the end, printing


def test_the_stepper_ends_cleanly_on_q_and_on_end_of_input(small_gpt2):
    out = io.StringIO()
    result = trace(small_gpt2, "The capital", out=out, stepper=Stepper(read=Script("", "", "q"), out=out))
    assert result.stopped_at == "blocks.0.attn.qkv" and result.new_tokens == []
    assert out.getvalue().endswith("trace stopped at blocks.0.attn.qkv (q)\n")
    out = io.StringIO()
    result = trace(small_gpt2, "The capital", out=out, stepper=Stepper(read=Script("n"), out=out))
    assert result.stopped_at == "blocks.0.ln_1" and out.getvalue().endswith(
        "trace stopped at blocks.0.ln_1 (end of input)\n"
    )


# --- the real thing, through a pseudo-terminal --------------------------------------------------------------
KEYS_PROMPT = b"q quit > "


class Terminal:
    """`python -m minitransformer ARGS` with a pseudo-terminal as its controlling terminal (so Ctrl-C works)."""

    def __init__(self, *args: str) -> None:
        import fcntl
        import termios

        def as_a_shell_starts_it() -> None:
            """In the child: the terminal its controlling one, and Ctrl-C's signal at its default, as a shell starts
            a command in the foreground, whatever this process inherited (pytest started in the background, or from
            a harness that ignores or blocks SIGINT: the child would inherit that and never see the Ctrl-C)."""
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.master, slave = os.openpty()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "minitransformer", *args], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
            start_new_session=True, preexec_fn=as_a_shell_starts_it,
        )  # fmt: skip
        os.close(slave)
        self.pending = b""

    def read_until(self, marker: bytes, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while marker not in self.pending:
            ready, _, _ = select.select([self.master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise AssertionError(f"no {marker!r} within {timeout}s; got {self.pending[-800:]!r}")
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the other side closed
                chunk = b""
            if not chunk:
                raise AssertionError(f"ended before {marker!r}; got {self.pending[-800:]!r}")
            self.pending += chunk
        end = self.pending.index(marker) + len(marker)
        seen, self.pending = self.pending[:end], self.pending[end:]
        return seen.decode().replace("\r\n", "\n")

    def press(self, keys: bytes) -> str:
        os.write(self.master, keys)
        return self.read_until(KEYS_PROMPT)

    def finish(self, keys: bytes = b"") -> tuple[int, str]:
        if keys:
            os.write(self.master, keys)
        rest = b""
        while True:
            ready, _, _ = select.select([self.master], [], [], 30)
            try:
                chunk = os.read(self.master, 65536) if ready else b""
            except OSError:
                chunk = b""
            if not chunk:
                break
            rest += chunk
        code = self.process.wait(timeout=30)
        os.close(self.master)
        return code, (self.pending + rest).decode().replace("\r\n", "\n")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def terminal(small_gpt2_dir):
    opened = []

    def start(*extra: str) -> Terminal:
        opened.append(Terminal("trace", "The capital", "--model", str(small_gpt2_dir), "--step", *extra))
        return opened[-1]

    yield start
    for t in opened:
        t.close()


def test_step_in_a_terminal_enter_n_p_s_then_q(terminal):
    term = terminal()
    first = term.read_until(KEYS_PROMPT)
    assert "embed " in first and "out  [T, D] = [2, 16]" in first and "blocks.0" not in first
    assert first.endswith("[Enter] next  n layer  c continue  p print  s stats  q quit > ")
    after_enter = term.press(b"\n")
    assert after_enter.lstrip("\n").startswith("blocks.0.ln_1 ") and "blocks.0.attn" not in after_enter
    after_n = term.press(b"n\n")  # the rest of block 0 goes by, the stop is block 1's first stage
    assert "blocks.0.resid_post " in after_n and after_n.rstrip(" >").rstrip().splitlines()[-5].startswith(
        "blocks.1.ln_1 "
    )
    printed = term.press(b"p\n")
    assert "blocks.1.ln_1 [2, 16] =\n    [[" in printed
    stats = term.press(b"s\n")
    assert "shape [2, 16]  float32  32 values" in stats and "L2 norm" in stats
    code, rest = term.finish(b"q\n")
    assert code == 0 and "trace stopped at blocks.1.ln_1 (q)" in rest and "Traceback" not in rest


def test_step_ends_cleanly_at_end_of_input(terminal):
    term = terminal()
    term.read_until(KEYS_PROMPT)
    code, rest = term.finish(b"\x04")  # Ctrl-D at the prompt
    assert code == 0 and "trace stopped at embed (end of input)" in rest and "Traceback" not in rest


def asleep(pid: int) -> bool | None:
    """Whether a process's main thread sleeps in the kernel (state S in /proc/PID/stat: waiting, not running); None
    where there is no /proc to ask."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2] == "S"


@pytest.mark.parametrize("when", ["during the pass", "as the prompt appears", "in the wait for a key"])
def test_step_ends_cleanly_on_ctrl_c_whenever_it_comes(terminal, when):
    """A Ctrl-C ends the stepper with "trace interrupted at STAGE" and status 130 wherever it lands: in a pass, in
    the moment between the prompt and the wait for a key (a busy machine's scheduler can hold the process there for
    seconds: input() then blocked in its read with the interrupt pending, and the stepper went on at the next key),
    or in the wait. Each moment is reached by following the child's own output or state, never a clock, and the
    outcome is asserted whichever came first (the deadlines only end a hang)."""
    term = terminal()
    if when == "during the pass":
        term.read_until(b"=== prefill")  # the prefill is running, or (a small model is quick) at its first stop
    else:
        term.read_until(KEYS_PROMPT)
    if when == "in the wait for a key":
        if asleep(term.process.pid) is None:
            pytest.skip("no /proc here to see the process wait")
        deadline = time.monotonic() + 60
        while not asleep(term.process.pid):  # after the prompt, the only sleep is the wait for a key
            assert time.monotonic() < deadline, "the stepper never waited for a key"
            time.sleep(0.01)
    os.write(term.master, b"\x03")
    seen = term.read_until(b"trace interrupted at ")
    code, rest = term.finish()
    assert code == 128 + signal.SIGINT and "Traceback" not in seen + rest, seen + rest
    if when != "during the pass":
        assert rest.startswith("embed"), rest  # the stage the prompt stood at


@pytest.fixture
def python_handles_ctrl_c():
    """Ctrl-C's signal handled by Python (KeyboardInterrupt) and unblocked in this thread, as in a command started
    from a shell, whatever pytest inherited (started in the background, or by a harness that ignores SIGINT); the
    handler and mask it had are restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    yield
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("order", ["before the wait", "during the wait"])
def test_a_ctrl_c_that_interrupts_no_read_still_ends_the_wait(monkeypatch, order, python_handles_ctrl_c):
    """The case input() lost: an interrupt that comes while no read is under way (delivered to another thread here,
    as to this one in the instant before its read begins) interrupts no read, and only the pipe that the signal's
    arrival writes to (terminal_line) ends the wait. Sent after the prompt is written and waited for there (before
    the wait), or sent without waiting (in the wait, or just before it: either order, the same outcome)."""
    from minitransformer.views.trace import terminal_line

    keys, typed = os.pipe()  # the "terminal": a pipe that nothing is typed into
    monkeypatch.setattr(sys, "stdin", os.fdopen(keys, "r"))
    written, sent, finished, released = threading.Event(), threading.Event(), threading.Event(), threading.Event()

    def interrupt() -> None:
        written.wait()
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # this thread's: the reading one is not interrupted
        sent.set()
        if not finished.wait(60):  # a reader that missed it would wait for ever: a line ends the hang, and the test
            released.set()
            os.write(typed, b"missed\n")

    sender = threading.Thread(target=interrupt)  # a thread of the reader's process, as the BLAS's are

    class Prompt(io.StringIO):
        def write(self, text: str) -> int:
            written.set()
            if order == "before the wait":
                sent.wait()  # the signal has arrived (its C handler ran) before the wait begins
            return super().write(text)

    monkeypatch.setattr(sys, "stderr", Prompt())
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            terminal_line("> ")
    finally:
        finished.set()
        sender.join()
        os.close(typed)
    assert not released.is_set(), "the interrupt ended the wait only when a line was typed"
    assert signal.set_wakeup_fd(-1) == -1  # disarmed again


def test_step_without_a_terminal_says_so_and_runs_through(small_gpt2_dir):
    done = subprocess.run([sys.executable, "-m", "minitransformer", "trace", "The capital", "--model", str(small_gpt2_dir),
                           "--step"], input="", capture_output=True, text=True, timeout=120, cwd=ROOT)  # fmt: skip
    assert done.returncode == 0
    assert done.stderr == "minitransformer: --step needs a terminal on stdin; tracing without stopping\n"
    assert (
        "q quit >" not in done.stdout and "=== decode step 1:" in done.stdout and "greedy continuation" in done.stdout
    )


# --- the command line ---------------------------------------------------------------------------------------
def test_trace_command_on_a_transformers_checkpoint():
    tiny = HF_FIXTURES / "tiny"  # vocabulary of 512: "he and the" is 3 tokens below 512
    done = run_cli("trace", "he and the", "--model", str(tiny), "--new-tokens", "3", "--layers", "1")
    assert done.returncode == 0, done.stderr
    assert "blocks shown stage by stage: 1" in done.stdout and "blocks.0 " in done.stdout
    decode_2 = passes(done.stdout)[2]
    assert decode_2.startswith("=== decode step 2: T = 1 new position attending to t = 5;")
    assert "in   Q [H, T, dh] = [4, 1, 16], K^T [H, dh, t] = [4, 16, 5]" in decode_2
    help_text = " ".join(run_cli("trace", "--help").stdout.split())
    assert "default: the first and the last" in help_text and "Enter next, n next layer" in help_text


@pytest.mark.parametrize("args, message", [
    (["", "--model", "{small}"], "the prompt is empty"),
    (["hi", "--model", "{small}", "--layers", "5"], "--layers: block 5 does not exist; this model has blocks 0..1"),
    (["hi", "--model", "{small}", "--layers", "x"], "--layers takes block numbers such as 0,11 or 1-3, or 'all'; not 'x'"),
    (["hi", "--model", "{small}", "--new-tokens", "0"], "--new-tokens must be 1 or more (1 traces the prefill only)"),
    (["hi", "--model", "{small}", "--new-tokens", "-1"], "--new-tokens must be 1 or more"),
    (["hi", "--model", "{small}", "--new-tokens", "two"], "argument --new-tokens: 'two' is not a whole number"),
    (["hi", "--model", "{small}", "--new-tokens", "65"], "exceed small-gpt2's context of 64 positions (they take 65: every token but the last new one is fed to the model); at most 64 new tokens fit"),
    (["The capital", "--model", str(HF_FIXTURES / "tiny")], "text encodes to token id 3139, outside this model's vocabulary (0..511): its tokenizer is not this model's; give the prompt as token ids (--ids"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(args, message, small_gpt2_dir, capsys):
    code = main(["trace", *(a.replace("{small}", str(small_gpt2_dir)) for a in args)])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.startswith("minitransformer: error: ") and err.count("\n") == 1 and message in err, err


def test_bad_input_in_a_real_process_has_no_traceback(small_gpt2_dir):
    done = run_cli("trace", "hi", "--model", str(small_gpt2_dir), "--layers", "5")
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr == "minitransformer: error: --layers: block 5 does not exist; this model has blocks 0..1\n"


# --- the examples ---------------------------------------------------------------------------------------------
def test_the_walkthrough_follows_the_prompt_from_ids_to_the_answer(small_gpt2_dir, small_gpt2):
    done = subprocess.run([sys.executable, "examples/walkthrough.py", "--model", str(small_gpt2_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "->  [464, 3139, 286, 4881, 318]   (T = 5 positions)" in out
    for line in ("embed                [5, 16]", "attn.qkv             [5, 48]", "attn.q, .k, .v       [2, 5, 8]",
                 "attn.weights         [2, 5, 5]", "mlp.up               [5, 64]", "logits               [1, 50257]",
                 "attn.keys            [2, 6, 8]", "attn.scores          [2, 1, 6]"):  # fmt: skip
        assert line in out, line
    answer = small_gpt2.generate("The capital of France is", max_new_tokens=6, candidates=0, ledger=False).text
    assert out.rstrip().endswith(repr("The capital of France is" + answer))


def test_attention_png_draws_the_chosen_layer(small_gpt2_dir, tmp_path):
    pytest.importorskip(
        "matplotlib", reason="the drawing example needs matplotlib (pip install 'minitransformer[plot]')"
    )
    png = tmp_path / "attention.png"
    done = subprocess.run([sys.executable, "examples/attention_png.py", "--model", str(small_gpt2_dir), "--layer", "1",
                           "--out", str(png)], cwd=ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{png}: small-gpt2 layer 1, all heads, 5 tokens ([2, 5, 5] weights)"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_masked_keys_names_only_the_cuts_a_pass_makes():
    """A chunked layer's -inf entries were called "keys of earlier chunks" where every key was in the query's chunk."""
    from minitransformer.engine.tape import Dims
    from minitransformer.views.trace import masked_keys

    sizes = dict(D=8, H=2, F=16, V=10, R=1)
    assert masked_keys(Dims(T=5, t=5, chunk=8, **sizes)) == "the masked future"  # positions 0-4: one chunk
    assert masked_keys(Dims(T=12, t=12, chunk=8, **sizes)) == "masked: the future, keys of earlier chunks"
    assert masked_keys(Dims(T=4, t=4, window=6, **sizes)) == "the masked future"  # the window holds them all
    assert masked_keys(Dims(T=10, t=10, window=6, **sizes)) == "masked: the future, keys before the window"
    assert masked_keys(Dims(T=10, t=10, selected=4, **sizes)) == "masked: the future, keys the indexer did not choose"
    assert masked_keys(Dims(T=1, t=7, **sizes)) == "masked"  # a step masks no future: some other mask (a pad)
