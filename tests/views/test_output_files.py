"""Output paths (--json, --csv, --plot) as a user points them: a regular file is replaced whole, anything
else that can be written (a device, a pipe, /dev/stdout) is written in place and never replaced, and a
destination that cannot be written is refused in one line, exit 2, before any work."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from minitransformer.cli import main
from minitransformer.errors import UserError
from minitransformer.views import files

COUNT = ("count", "--preset", "gpt2", "--tokens", "5")
SUFFIX = {"--json": ".json", "--csv": ".csv", "--plot": ".png"}
EACH_OUTPUT = pytest.mark.parametrize("option", SUFFIX)


def document_ok(option: str, data: bytes) -> bool:
    """The whole document, as the option writes it."""
    if option == "--json":
        return json.loads(data)["totals"]["macs"] == 463_731_456  # gpt2, a 5-token prefill
    if option == "--csv":
        return data.startswith(b"phase,step,") and data.count(b"\n") == 1 + 7
    return data[:8] == b"\x89PNG\r\n\x1a\n" and data.endswith(b"IEND\xaeB`\x82")


def needs(option: str) -> None:
    if option == "--plot":
        pytest.importorskip("matplotlib", reason="the plot extra (matplotlib) is not installed")


def run(*args: str, stdout=subprocess.PIPE, preexec_fn=None) -> subprocess.CompletedProcess:
    """run_cli with stdout wherever the test says, and a hook into the child before it starts."""
    return subprocess.run([sys.executable, "-m", "minitransformer", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, cwd=ROOT, timeout=120, preexec_fn=preexec_fn)  # fmt: skip


def assert_refused_before_any_work(result, needle: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("minitransformer: error: cannot write "), result.stderr
    assert needle in lines[0], lines[0]
    assert result.stdout == ""  # the report was never printed: nothing ran


def no_temporaries(directory: Path) -> bool:
    return not [p.name for p in directory.iterdir() if p.name.startswith(".")]


def make_device(path: Path, minor: int = 3) -> Path:
    """A character device node of our own (1,3 is null, 1,7 is full): /dev's state is not ours to bet on."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root (CAP_MKNOD)")
    return path


@EACH_OUTPUT
def test_a_device_is_written_in_place_and_stays_a_device(option, tmp_path):
    needs(option)
    device = make_device(tmp_path / f"null{SUFFIX[option]}")
    result = run_cli(*COUNT, option, str(device))
    assert result.returncode == 0, result.stderr
    st = os.stat(device)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == [device.name]


def test_dev_null_stays_a_character_device():
    before = os.stat("/dev/null")
    if not stat.S_ISCHR(before.st_mode):
        pytest.skip("/dev/null is not a character device on this machine already")
    try:
        result = run_cli(*COUNT, "--json", "/dev/null")
        after = os.stat("/dev/null")
        assert result.returncode == 0, result.stderr
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    finally:
        if not stat.S_ISCHR(os.lstat("/dev/null").st_mode):  # a regression replaced it: put the device back
            os.unlink("/dev/null")
            os.mknod("/dev/null", 0o666 | stat.S_IFCHR, before.st_rdev)
            os.chmod("/dev/null", 0o666)


@EACH_OUTPUT
def test_a_named_pipe_receives_the_document_and_stays_a_pipe(option, tmp_path):
    needs(option)
    fifo = tmp_path / f"pipe{SUFFIX[option]}"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()  # blocks in open() until the CLI opens the pipe for writing
    result = run_cli(*COUNT, option, str(fifo))
    reader.join(timeout=30)
    assert result.returncode == 0, result.stderr
    assert not reader.is_alive(), "the pipe was never written"
    assert document_ok(option, received[0])
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert f"written to {fifo}" in result.stdout


@pytest.mark.parametrize("option", ["--json", "--csv"])
def test_dev_stdout_in_a_pipe_is_stdout_alone(option):
    result = run_cli(*COUNT, option, "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert document_ok(option, result.stdout.encode())  # nothing else on stdout
    assert "Where the MACs go" in result.stderr and "written to /dev/stdout" not in result.stderr


def test_generate_json_to_dev_stdout_is_exactly_one_document(small_gpt2_dir):
    result = run_cli("generate", "Hello world", "--model", str(small_gpt2_dir), "--max-new-tokens", "2",
                     "--json", "/dev/stdout")  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["prompt_tokens"] == [15496, 995]
    assert "Where the dot products live" in result.stderr


@pytest.mark.parametrize("name", ["/dev/stdout", "{out}"])
def test_stdout_redirected_to_a_file_gets_the_document_alone(name, tmp_path):
    """/dev/stdout, or the very file stdout is redirected to: written through stdout, never renamed over."""
    out = tmp_path / "out.json"
    with open(out, "w") as stdout:
        result = run(*COUNT, "--json", name.format(out=out), stdout=stdout)
    assert result.returncode == 0, result.stderr
    assert document_ok("--json", out.read_bytes())
    assert "Where the MACs go" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_dev_stdout_on_a_terminal_is_written_in_place_after_the_report():
    """A terminal is a device: the report, then the JSON, on the same screen (stdout is not a pipe here)."""
    master, slave = os.openpty()
    screen = []

    def read_screen():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not data:
                return
            screen.append(data)

    reader = threading.Thread(target=read_screen, daemon=True)
    reader.start()  # a terminal holds a few KB: someone must read while the CLI writes
    result = run(*COUNT, "--json", "/dev/stdout", stdout=slave)
    os.close(slave)
    reader.join(timeout=30)
    os.close(master)
    assert result.returncode == 0, result.stderr
    text = b"".join(screen).decode().replace("\r\n", "\n")
    report, document = text.split("\n{", 1)
    document, said = document.rsplit("}\n", 1)
    assert "Where the MACs go" in report and said == "ledger written to /dev/stdout\n"
    assert document_ok("--json", ("{" + document + "}").encode())


def test_params_json_to_dev_stdout():
    result = run_cli("params", "--preset", "gpt2", "--json", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["total"] == 124_439_808


@EACH_OUTPUT
@pytest.mark.parametrize("place, needle", [
    ("/proc", "/proc does not take new files"),
    ("/sys", "no permission to create files in /sys"),
])  # fmt: skip
def test_proc_and_sys_are_refused_before_any_work(option, place, needle):
    if not os.path.isdir(place):
        pytest.skip(f"no {place} here")
    assert_refused_before_any_work(run_cli(*COUNT, option, f"{place}/x{SUFFIX[option]}"), needle)


def test_generate_refuses_proc_before_loading_the_model(small_gpt2_dir):
    result = run_cli("generate", "Hi", "--model", str(small_gpt2_dir), "--json", "/proc/x.json")
    assert_refused_before_any_work(result, "/proc does not take new files")


@EACH_OUTPUT
def test_what_is_wrong_with_the_path_is_said(option, tmp_path):
    suffix = SUFFIX[option]
    (tmp_path / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "a-dir").mkdir()
    (tmp_path / f"loop{suffix}").symlink_to(f"loop{suffix}")
    cases = {
        "": "an empty path",
        f"{tmp_path}/loop{suffix}": "too many levels of symbolic links",
        f"{tmp_path}/passwd/x{suffix}": f"{tmp_path}/passwd is a file, not a directory",
        f"{tmp_path}/passwd/deeper/x{suffix}": f"{tmp_path}/passwd is a file, not a directory",
        f"{tmp_path}/nope/x{suffix}": f"directory {tmp_path}/nope does not exist",
        f"{tmp_path}/a-dir": "it is a directory",
        f"{tmp_path}/new-dir{suffix}/": "ending in / names a directory",
    }
    for path, needle in cases.items():
        if option == "--plot" and not path.endswith(".png"):
            continue  # refused by the .png rule first
        assert_refused_before_any_work(run_cli(*COUNT, option, path), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-dir", f"loop{suffix}", "passwd"]
    assert list((tmp_path / "a-dir").iterdir()) == []


def test_a_socket_is_refused(tmp_path):
    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        assert_refused_before_any_work(run_cli(*COUNT, "--json", str(path)), "is a socket")


def test_two_outputs_to_one_place_are_refused(tmp_path):
    same = tmp_path / "same"
    result = run_cli(*COUNT, "--json", str(same), "--csv", str(same))
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert f"--json {same} and --csv {same} would both write to {same}" in result.stderr
    result = run_cli(*COUNT, "--json", "-", "--csv", "/dev/stdout")
    assert result.returncode == 2 and "--json - and --csv /dev/stdout would both write to stdout" in result.stderr
    assert list(tmp_path.iterdir()) == []


@EACH_OUTPUT
def test_an_existing_file_is_replaced_whole_keeping_its_permissions(option, tmp_path):
    needs(option)
    path = tmp_path / f"old{SUFFIX[option]}"
    path.write_text("old contents\n")
    path.chmod(0o640)
    owner = (os.getuid(), os.getgid())
    if os.geteuid() == 0:
        owner = (1234, 5678)  # root replaces someone else's file: it stays theirs
        os.chown(path, *owner)
    inode = path.stat().st_ino
    result = run_cli(*COUNT, option, str(path))
    assert result.returncode == 0, result.stderr
    st = path.stat()
    assert document_ok(option, path.read_bytes())
    assert st.st_ino != inode  # a new file renamed over the old one: no reader saw it half-written
    assert stat.S_IMODE(st.st_mode) == 0o640 and (st.st_uid, st.st_gid) == owner
    assert no_temporaries(tmp_path)


def test_a_new_file_gets_the_umask(tmp_path):
    path = tmp_path / "new.json"
    result = run(*COUNT, "--json", str(path), preexec_fn=lambda: os.umask(0o027))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_read_only_file_is_what_the_shell_would_make_of_it(tmp_path):
    """`>` refuses a file without write permission, except for root; so does --json."""
    path = tmp_path / "ro.json"
    path.write_text("keep\n")
    path.chmod(0o444)
    result = run_cli(*COUNT, "--json", str(path))
    if os.geteuid() == 0:
        assert result.returncode == 0, result.stderr
        assert document_ok("--json", path.read_bytes()) and stat.S_IMODE(path.stat().st_mode) == 0o444
    else:
        assert_refused_before_any_work(result, "it is read-only")
        assert path.read_text() == "keep\n"


@EACH_OUTPUT
def test_a_symlink_stays_a_symlink_and_its_file_is_written(option, tmp_path):
    needs(option)
    real = tmp_path / "real" / f"data{SUFFIX[option]}"
    real.parent.mkdir()
    real.write_text("old\n")
    real.chmod(0o600)
    link = tmp_path / f"link{SUFFIX[option]}"
    link.symlink_to(real)
    dangling = tmp_path / f"dangling{SUFFIX[option]}"
    dangling.symlink_to(tmp_path / "real" / f"made{SUFFIX[option]}")
    for path in (link, dangling):
        result = run_cli(*COUNT, option, str(path))
        assert result.returncode == 0, result.stderr
        assert path.is_symlink() and document_ok(option, path.read_bytes())
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in real.parent.iterdir()) == sorted([real.name, f"made{SUFFIX[option]}"])
    assert no_temporaries(tmp_path)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    """A write that fails halfway (here: a file-size limit) is one line, exit 2, and changes nothing."""
    path = tmp_path / "c.json"
    path.write_text("the previous ledger\n")

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    result = run(*COUNT, "--json", str(path), preexec_fn=small_files)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"minitransformer: error: cannot write {path}: file too large"]
    assert path.read_text() == "the previous ledger\n"
    assert no_temporaries(tmp_path)


def test_a_device_that_refuses_the_write_is_one_line(tmp_path):
    full = make_device(tmp_path / "full.json", minor=7)
    result = run_cli(*COUNT, "--json", str(full))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == f"minitransformer: error: cannot write {full}: no space left on device"
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_check_destination_says_what_a_path_is(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    assert files.check_destination("-") == files.Destination("-", "stdout")
    new = files.check_destination(tmp_path / "new.json")
    assert (new.kind, new.path) == ("file", tmp_path / "new.json") and not new.is_stream
    special = files.check_destination(tmp_path / "fifo")
    assert (special.kind, special.path) == ("special", tmp_path / "fifo")
    assert list(tmp_path.iterdir()) == [tmp_path / "fifo"]  # the trial file made in the directory is gone
    with pytest.raises(UserError, match="is a directory"):
        files.check_destination(tmp_path)
    files.write_text(new, ['{"a": ', "1}\n"])
    assert json.loads(new.path.read_text()) == {"a": 1}


def test_a_path_no_file_can_have_is_refused_before_any_work(tmp_path, capsys):
    """What argv cannot carry to a subprocess (a NUL byte, a lone surrogate) the API and main() can."""
    (tmp_path / "a-dir").mkdir()
    cases = {
        f"{tmp_path}/a\x00b.json": "a path cannot hold a NUL byte",
        f"{tmp_path}/\ud800.json": "'\\ud800' at character",
        f"{tmp_path}/no-such-dir/..": "a path ending in .. names a directory",
        f"{tmp_path}/a-dir/.": "a path ending in . names a directory",
        f"{tmp_path}/no-such-dir/../x.json": f"directory {tmp_path}/no-such-dir does not exist",  # as the system walks it
        f"{tmp_path}/a-dir/no/deeper/x.json": f"directory {tmp_path}/a-dir/no does not exist",
    }
    for path, needle in cases.items():
        with pytest.raises(UserError, match="cannot write") as refused:
            files.check_destination(path)
        assert needle in str(refused.value), (path, str(refused.value))
        assert main([*COUNT, "--json", path]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1 and needle in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["a-dir"]


def test_names_that_are_not_utf8_are_written_and_shown_escaped(tmp_path):
    """A directory or file name in bytes that are not UTF-8 (as argv may carry them) is written to, and
    echoed as an escape, even where stdout's encoding is strict."""
    model = tmp_path / "m\udce9d"  # the bytes b"m\xe9d"
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        (model / name).write_bytes((ROOT / "minitransformer/data/demo" / name).read_bytes())
    out = tmp_path / "\udce9.json"
    result = subprocess.run([sys.executable, "-m", "minitransformer", "generate", "The capital", "--model", str(model),
                             "--max-new-tokens", "1", "--json", str(out), "--html", str(out.with_suffix(".html"))],
                            capture_output=True, cwd=ROOT, timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"})  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    assert f"ledger written to {tmp_path}/\\udce9.json".encode() in result.stdout
    assert json.loads(out.read_bytes())["model"]["name"] == "m\udce9d"  # JSON's escape reads back as the name
    assert b"m\\udce9d" in out.with_suffix(".html").read_bytes()
    out.with_suffix(".html").read_bytes().decode("utf-8")  # a valid UTF-8 page


def test_outputs_asked_for_together_are_all_written_or_none(tmp_path, monkeypatch, capsys):
    """count --json --csv --plot --html: where the last of them cannot be made, none is written (the JSON was, and the
    page was not), an old file keeps its contents and no temporary is left; then all four are, each whole."""
    needs("--plot")
    from minitransformer import cli

    paths = {option: tmp_path / f"out{suffix}" for option, suffix in {**SUFFIX, "--html": ".html"}.items()}
    args = [*COUNT, *(a for option, path in paths.items() for a in (option, str(path)))]
    paths["--json"].write_text("the previous ledger\n")

    def cannot_be_drawn(data):
        raise RuntimeError("this page cannot be drawn")

    monkeypatch.setattr(cli, "page", cannot_be_drawn)
    with pytest.raises(RuntimeError, match="cannot be drawn"):
        main(args)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no other file, no temporary
    assert paths["--json"].read_text() == "the previous ledger\n"
    monkeypatch.undo()
    assert main(args) == 0
    for option in SUFFIX:
        assert document_ok(option, paths[option].read_bytes()), option
    assert paths["--html"].read_text().rstrip().endswith("</html>")
    said = capsys.readouterr().out
    assert all(f"written to {path}" in said for path in paths.values())


def test_json_holds_no_nan_a_strict_parser_refuses(tmp_path, capsys):
    """A NaN weight makes NaN logits and probabilities; --json wrote them as NaN, which is not JSON: now null."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    from conftest import write_llama
    from minitransformer.cli import main

    directory = write_llama(tmp_path / "m", vocab_size=64)
    tensors = load_file(str(directory / "model.safetensors"))
    tensors["model.norm.weight"][:] = np.nan
    save_file(tensors, str(directory / "model.safetensors"))
    assert main(["generate", "--model", str(directory), "--ids", "1,2,3", "--max-new-tokens", "2", "--json", "-"]) == 0
    out = capsys.readouterr().out

    def refuse(constant):
        raise AssertionError(f"{constant} in the JSON")

    document = json.loads(out, parse_constant=refuse)
    probabilities = [c["probability"] for c in document["candidates"]]
    assert probabilities and all(p is None for p in probabilities), probabilities[:5]
