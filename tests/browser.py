"""A real headless Chromium, driven over the DevTools protocol through a pipe (no network, no driver to install).

`Chromium.find()` looks for the system browser (Debian's `chromium`, or `chromium-browser`,
`google-chrome`); `Chromium(binary)` starts it headless with `--remote-debugging-pipe`: commands go
to its fd 3 and answers come from its fd 4, one JSON message each, ended by a NUL byte. A `Page` is
one tab that has loaded one file: it keeps what the console said, the exceptions nobody caught and
every URL the page asked for, and can evaluate an expression, move the mouse and take a screenshot.

Timeouts here only catch a browser that hangs; nothing is timed.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HANG = 120.0  # seconds without an answer after which the browser is taken to hang


class BrowserError(RuntimeError):
    pass


class Chromium:
    def __init__(self, binary: str) -> None:
        self.binary = binary
        self.profile = tempfile.mkdtemp(prefix="mt-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def pipes_on_3_and_4() -> None:  # in the child, before exec: the DevTools pipe is fds 3 (in) and 4 (out)
            a, b = os.dup(to_chrome_r), os.dup(from_chrome_w)  # above 4, so that dup2 cannot clobber them
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                f"--user-data-dir={self.profile}", "--no-first-run", "--no-default-browser-check", "--mute-audio",
                "--disable-background-networking", "--disable-extensions", "--hide-scrollbars",
                "--force-device-scale-factor=1", "about:blank"]  # fmt: skip
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, close_fds=False,
                                        preexec_fn=pipes_on_3_and_4)  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        self.version = self.call("Browser.getVersion")["product"]

    @staticmethod
    def find() -> str | None:
        for name in NAMES:
            path = shutil.which(name)
            if path:
                return path
        return None

    # --- the protocol ---------------------------------------------------------------------------------
    def _send(self, method: str, params: dict | None, session: str | None) -> int:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _read(self) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], HANG)
            if not ready:
                raise BrowserError(f"the browser said nothing for {HANG:.0f} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser closed the pipe (exit status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        wanted = self._send(method, params, session)
        while True:
            message = self._read()
            if message.get("id") == wanted:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def wait_for(self, method: str, session: str) -> dict:
        while True:
            for i, event in enumerate(self._events):
                if event.get("method") == method and event.get("sessionId") == session:
                    return self._events.pop(i)
            self._events.append(self._read())

    def events(self, session: str) -> list[dict]:
        return [e for e in self._events if e.get("sessionId") == session]

    # --- pages ----------------------------------------------------------------------------------------
    def open(self, path: Path, scripts: bool = True, width: int = 1280, height: int = 900) -> Page:
        """A new tab that has loaded `path` (a file) with scripts on or off, the viewport width x height."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=session)
        if not scripts:
            self.call("Emulation.setScriptExecutionDisabled", {"value": True}, session)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                          "mobile": False}, session)  # fmt: skip
        self.call("Page.navigate", {"url": Path(path).resolve().as_uri()}, session)
        self.wait_for("Page.loadEventFired", session)
        return Page(self, target, session)

    def close(self) -> None:
        try:
            self.call("Browser.close")
            self.process.wait(timeout=HANG)
        except (BrowserError, OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        finally:
            os.close(self._to_chrome)
            os.close(self._from_chrome)
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Chromium, target: str, session: str) -> None:
        self.browser, self.target, self.session = browser, target, session

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (DevTools evaluates it even with the page's scripts off)."""
        result = self.browser.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                        "awaitPromise": True}, self.session)  # fmt: skip
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    @property
    def console(self) -> list[str]:
        """What the page wrote to the console, the exceptions it did not catch, what the browser logged about it."""
        said = []
        for event in self.browser.events(self.session):
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                said.append(f"console.{params['type']}: " + " ".join(str(a.get("value", a.get("description")))
                                                                     for a in params.get("args", [])))  # fmt: skip
            elif method == "Runtime.exceptionThrown":
                details = params["exceptionDetails"]
                said.append(f"uncaught: {details.get('exception', {}).get('description', details.get('text'))}")
            elif method == "Log.entryAdded":
                entry = params["entry"]
                said.append(f"log.{entry['level']}: {entry['text']} ({entry.get('url', '')})")
        return said

    @property
    def requests(self) -> list[str]:
        """Every URL the page asked for (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.browser.events(self.session)
                if e["method"] == "Network.requestWillBeSent"]  # fmt: skip

    def move_mouse(self, x: float, y: float) -> None:
        """The pointer to (x, y) in the viewport, as a person's mouse would go there."""
        self.browser.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y}, self.session)

    def screenshot(self, full_page: bool = True, height: int | None = None) -> bytes:
        """PNG bytes of the viewport, or of the whole page (down to `height` pixels if given)."""
        params: dict = {"format": "png"}
        if full_page:
            size = self.browser.call("Page.getLayoutMetrics", session=self.session)["cssContentSize"]
            bottom = size["height"] if height is None else min(height, size["height"])
            params |= {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size["width"], "height": bottom, "scale": 1},
            }
        return base64.b64decode(self.browser.call("Page.captureScreenshot", params, self.session)["data"])

    def close(self) -> None:
        self.browser.call("Target.closeTarget", {"targetId": self.target})
