"""Make the README's picture of the report: the main command's page, as headless Chromium draws it.

    python scripts/report_screenshot.py            # writes docs/report.png

It runs `python -m minitransformer generate "The capital of France is" --html ...` as the README's
pasted output was made (no GPT-2 on disk and no hub, so the demo model answers), opens the page from
the file in the system's Chromium (driven as the tests drive it, tests/browser.py), and keeps the top
of the page down to the end of the prefill's block diagram.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from browser import Chromium  # noqa: E402 - tests/ holds the one browser driver

WIDTH = 1280


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "report.png")
    args = parser.parse_args()
    binary = Chromium.find()
    if binary is None:
        raise SystemExit("no chromium, chromium-browser or google-chrome on PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "report.html"
        env = {**os.environ, "MINITRANSFORMER_WEIGHTS": str(Path(tmp) / "weights"),
               "HF_HUB_CACHE": str(Path(tmp) / "hf-cache"), "HF_ENDPOINT": "http://127.0.0.1:9"}  # fmt: skip
        subprocess.run([sys.executable, "-m", "minitransformer", "generate", "The capital of France is", "--html",
                        str(page_path)], check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)  # fmt: skip
        browser = Chromium(binary)
        try:
            page = browser.open(page_path, width=WIDTH, height=900)
            if page.console:
                raise SystemExit(f"the page reported errors: {page.console}")
            bottom = page.evaluate("document.querySelector('.phase-view.current .diagram').getBoundingClientRect()"
                                   ".bottom + window.scrollY")  # fmt: skip
            png = page.screenshot(full_page=True, height=int(bottom) + 16)
        finally:
            browser.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(png)
    print(f"{args.out.relative_to(ROOT)}: {WIDTH} x {int(bottom) + 16} pixels, {len(png):,} bytes ({browser.version})")


if __name__ == "__main__":
    main()
