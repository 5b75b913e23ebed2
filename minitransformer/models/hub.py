"""Where weights live on disk, and fetching the official GPT-2 checkpoints from the Hugging Face Hub.

Downloads land in `weights/<name>/` of the source checkout (or, for an installed package, in
`~/.cache/minitransformer/weights/<name>/`; `MINITRANSFORMER_WEIGHTS` overrides both). Only
`config.json` and `model.safetensors` are fetched: never a pickle. Before the hub library is asked
for anything, a bounded request of our own makes an offline machine fail in seconds, never hang.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from ..errors import UserError

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
    checkout = Path(__file__).resolve().parents[2]  # the folder that holds minitransformer/models/hub.py's package
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


def check_reachable(endpoint: str, repo_id: str, timeout: float = REACH_TIMEOUT_S) -> str | None:
    """None if the hub answers an HTTP request about `repo_id` within `timeout` seconds, else why not.

    The hub library waits without limit on a server that accepts connections but never answers,
    and name resolution can block longer than any socket timeout; so the first request is ours, in
    a daemon thread that we stop waiting for.
    """
    import urllib.error  # here: http and ssl are a tenth of the package's import, and only a download needs them
    import urllib.request

    url = f"{endpoint.rstrip('/')}/api/models/{repo_id}/revision/main"
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            urllib.request.urlopen(url, timeout=timeout).close()
            outcome.append(None)
        except urllib.error.HTTPError:
            outcome.append(None)  # the hub answered; the download itself will say what is wrong
        except (OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            outcome.append(str(reason) or type(err).__name__)

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
    why = check_reachable(endpoint, HUB_REPOS[name])
    if why is not None:
        raise UserError(
            f"cannot reach the Hugging Face Hub at {endpoint} to download {name} ({why}); "
            # worded for load_model and the CLI alike: the same message reaches both
            f"connect to the internet and run `minitransformer download {name}`, or load a local directory with "
            f"config.json + model.safetensors (--model DIR) or the bundled demo model (--model demo)"
        )
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(HUB_REPOS[name], allow_patterns=HUB_FILES, local_dir=target, etag_timeout=REACH_TIMEOUT_S)
    except Exception as err:  # noqa: BLE001 - the hub raises many kinds; all mean the same to the user
        raise UserError(f"downloading {name} from {endpoint} failed ({str(err).splitlines()[0]}); try again") from None
    if not is_complete(target):
        raise UserError(f"the hub did not provide {', '.join(HUB_FILES)} for {name}")
    return target
