"""Where weights live on disk, and fetching the official GPT-2 checkpoints from the Hugging Face Hub.

Downloads land in `weights/<name>/` of the source checkout (or, for an installed package, in
`~/.cache/minitransformer/weights/<name>/`; `MINITRANSFORMER_WEIGHTS` overrides both). Only
`config.json` and `model.safetensors` are fetched: never a pickle. Before the hub library is asked
for anything, a bounded reachability check makes an offline machine fail in seconds, not minutes.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from .errors import UserError

HUB_REPOS = {
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "gpt2-large": "openai-community/gpt2-large",
    "gpt2-xl": "openai-community/gpt2-xl",
    "distilgpt2": "distilbert/distilgpt2",
}
HUB_FILES = ["config.json", "model.safetensors"]
REACH_TIMEOUT_S = 3.0


def weights_dir() -> Path:
    if os.environ.get("MINITRANSFORMER_WEIGHTS"):
        return Path(os.environ["MINITRANSFORMER_WEIGHTS"]).expanduser()
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / "weights").is_dir():
        return checkout / "weights"
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "minitransformer" / "weights"


def local_dir(name: str) -> Path:
    return weights_dir() / name


def is_complete(directory: Path) -> bool:
    return all((directory / f).is_file() for f in HUB_FILES)


def find_in_hf_cache(name: str) -> Path | None:
    """A complete snapshot of `name` already in the Hugging Face cache, if any (no network)."""
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(HUB_REPOS[name], allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:  # noqa: BLE001 - any failure here just means "not cached"
        return None
    return path if is_complete(path) else None


def hub_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def check_reachable(endpoint: str, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """None if a TCP connection to the hub opens within `timeout` seconds, else why not.

    Name resolution can block far longer than any socket timeout, so the attempt runs in a daemon
    thread that we stop waiting for.
    """
    url = urlparse(endpoint)
    host, port = url.hostname, url.port or (443 if url.scheme == "https" else 80)
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(None)
        except OSError as err:
            outcome.append(str(err) or type(err).__name__)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


def download(name: str) -> Path:
    """Fetch config.json and model.safetensors of a known GPT-2 into weights/<name>/ (with a progress bar)."""
    if name not in HUB_REPOS:
        raise UserError(f"unknown model {name!r}; downloadable models: {', '.join(HUB_REPOS)}")
    target = local_dir(name)
    if is_complete(target):
        return target
    endpoint = hub_endpoint()
    why = check_reachable(endpoint)
    if why is not None:
        raise UserError(
            f"cannot reach the Hugging Face Hub at {endpoint} to download {name} ({why}); "
            f"connect to the internet and run `minitransformer download {name}`, or pass --model DIR "
            f"with a local config.json + model.safetensors"
        )
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(HUB_REPOS[name], allow_patterns=HUB_FILES, local_dir=target, etag_timeout=REACH_TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - the hub raises many kinds; all mean the same to the user
        raise UserError(f"downloading {name} from {endpoint} failed ({str(err).splitlines()[0]}); try again") from None
    if not is_complete(target):
        raise UserError(f"the hub did not provide {', '.join(HUB_FILES)} for {name}")
    return target
