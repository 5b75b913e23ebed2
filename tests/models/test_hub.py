"""Downloading GPT-2 by name: fails fast and clearly offline; the real path works up to the network call.

The Hugging Face Hub is not reachable from CI. These tests point the hub endpoint at servers on
this machine (closed, silent, or answering) and replace only `snapshot_download`, the call that
would transfer the files.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time

import huggingface_hub
import pytest
from huggingface_hub import constants

from conftest import ROOT, run_cli, write_gpt2
from minitransformer import UserError, load_model
from minitransformer.models import hub


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket closes


@pytest.fixture
def silent_server():
    """Accepts connections and never answers: the case that makes naive clients hang."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []
    threading.Thread(target=lambda: [held.append(server.accept()) for _ in iter(int, 1)], daemon=True).start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.fixture
def answering_server(request):
    """Answers every request with 200 and a small JSON body, like the hub's API (or with the status a test asks for,
    by indirect parametrization)."""
    status = getattr(request, "param", 200)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"id": "openai-community/gpt2"}')

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("endpoint", ["closed", "silent", "unresolvable"])
def test_download_offline_fails_fast_with_what_to_do(endpoint, silent_server, tmp_path):
    url = {"closed": f"http://127.0.0.1:{closed_port()}", "silent": silent_server,
           "unresolvable": "https://hub.invalid"}[endpoint]  # fmt: skip
    env = {"HF_ENDPOINT": url, "MINITRANSFORMER_WEIGHTS": str(tmp_path)}
    for args in (["download", "gpt2"], ["generate", "Hi", "--model", "distilgpt2"]):
        started = time.monotonic()
        result = run_cli(*args, env=env, timeout=60)
        elapsed = time.monotonic() - started
        assert result.returncode == 2 and elapsed < 15, (elapsed, result.stderr)
        line = result.stderr.strip()
        assert "\n" not in line and "Traceback" not in line
        assert "cannot reach the Hugging Face Hub" in line and "minitransformer download" in line
        assert line.endswith("or the bundled demo model (--model demo)"), line  # what runs offline
        assert list(tmp_path.iterdir()) == []  # nothing half-downloaded


@pytest.mark.parametrize("answering_server", [200, 401, 404, 500], indirect=True)
def test_a_hub_that_answers_is_reachable_whatever_its_status(answering_server):
    """A status the hub answers with (a gated model's 401, a renamed repo's 404) is the download's to report, with
    the hub's own words; only no answer at all is "cannot reach"."""
    assert hub.check_reachable(answering_server, "openai-community/gpt2") is None


def test_load_model_offline_says_what_to_load_in_words_a_python_caller_reads_too(tmp_path):
    """load_model("gpt2") offline said "pass --model DIR", a flag a Python caller has not got."""
    env = {**os.environ, "MINITRANSFORMER_WEIGHTS": str(tmp_path / "empty"), "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}  # fmt: skip
    code = (
        "from minitransformer import load_model\ntry:\n    load_model('gpt2')\nexcept Exception as err:\n    print(err)"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "or load a local directory with config.json + model.safetensors (--model DIR)" in done.stdout, done


def test_unknown_download_name_lists_the_known_ones():
    with pytest.raises(UserError, match="gpt2, gpt2-medium, gpt2-large, gpt2-xl, distilgpt2"):
        hub.download("gpt-7")


def test_download_path_up_to_the_transfer(answering_server, tmp_path, monkeypatch):
    """Everything real but the transfer: our reachability check talks to a live server here."""
    monkeypatch.setenv("MINITRANSFORMER_WEIGHTS", str(tmp_path / "weights"))
    monkeypatch.setattr(constants, "ENDPOINT", answering_server)
    calls = []

    def transfer(repo_id, *, allow_patterns, local_dir, **options):
        calls.append((repo_id, sorted(allow_patterns), local_dir))
        write_gpt2(local_dir, vocab_size=50257, n_positions=32)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", transfer)
    model = load_model("gpt2")
    assert calls == [("openai-community/gpt2", ["config.json", "model.safetensors"], tmp_path / "weights" / "gpt2")]
    assert model.name == "gpt2" and model.source == str(tmp_path / "weights" / "gpt2")
    assert model.generate("Hi", max_new_tokens=2).new_tokens
    load_model("gpt2")  # already on disk: no second transfer
    assert len(calls) == 1


def test_a_download_that_fails_midway_is_reported(answering_server, tmp_path, monkeypatch):
    monkeypatch.setenv("MINITRANSFORMER_WEIGHTS", str(tmp_path))
    monkeypatch.setattr(constants, "ENDPOINT", answering_server)

    def transfer(*args, **kwargs):
        raise OSError("connection reset by peer")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", transfer)
    with pytest.raises(UserError, match="downloading gpt2-medium .* failed .*connection reset"):
        hub.download("gpt2-medium")


def test_a_model_in_the_hugging_face_cache_is_found_without_network(tmp_path):
    """HF_HUB_CACHE set as a user sets it, before the process starts. (Patching huggingface_hub.constants in
    this process is not enough: 0.20's snapshot_download keeps the copy it took when first imported.)"""
    env = {**os.environ, "MINITRANSFORMER_WEIGHTS": str(tmp_path / "empty"), "HF_HUB_CACHE": str(tmp_path / "hub"),
           "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}  # fmt: skip
    find = "from minitransformer import load_model\nfrom minitransformer.models.registry import on_disk\nprint(on_disk('gpt2'))"
    load = "\nprint(load_model('gpt2').config.n_positions)"

    def run(code: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert run(find) == ["None"]
    repo = tmp_path / "hub" / "models--openai-community--gpt2"
    revision = "0123456789abcdef0123456789abcdef01234567"
    write_gpt2(repo / "snapshots" / revision, n_positions=16)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    assert run(find + load) == [str(repo / "snapshots" / revision), "16"]


def test_an_installed_package_downloads_where_the_readme_says(tmp_path, monkeypatch):
    """Not a checkout (no pyproject.toml beside the package): ~/.cache/minitransformer/weights, or under
    $XDG_CACHE_HOME; MINITRANSFORMER_WEIGHTS overrides either. The README says so."""
    monkeypatch.setattr(hub, "__file__", str(tmp_path / "site-packages" / "minitransformer" / "models" / "hub.py"))
    monkeypatch.delenv("MINITRANSFORMER_WEIGHTS", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert hub.local_dir("gpt2") == tmp_path / "home" / ".cache" / "minitransformer" / "weights" / "gpt2"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.local_dir("gpt2") == tmp_path / "xdg" / "minitransformer" / "weights" / "gpt2"
    monkeypatch.setenv("MINITRANSFORMER_WEIGHTS", str(tmp_path / "mine"))
    assert hub.local_dir("gpt2") == tmp_path / "mine" / "gpt2"
    readme = " ".join((ROOT / "README.md").read_text().split())
    for said in ("`~/.cache/minitransformer/weights/NAME/`", "`$XDG_CACHE_HOME/minitransformer/weights/NAME/`",
                 "`MINITRANSFORMER_WEIGHTS=DIR` puts them in `DIR/NAME/`"):  # fmt: skip
        assert said in readme, said
