"""A real headless Chromium driven over the DevTools protocol, the way a person uses a page.

Typing is ``Input.insertText`` into the focused field and clicking is a mouse press and release
at the element's centre, so the page's own HTML form does the submitting (with the Origin,
cookies and hidden fields Chromium sends). Reading is ``Runtime.evaluate`` of what the page
shows (``innerText``). Screenshots emulate a device width.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from websockets.sync.client import ClientConnection, connect

from sandboxes.browser.config import CHROMIUM_ARGS

_START_TIMEOUT_S = 60.0
_LOAD_TIMEOUT_S = 30.0


class ChromiumPage:
    """One page of a fresh headless Chromium (a context manager).

    Args:
        executable: The Chromium to launch.
    """

    def __init__(self, executable: str) -> None:
        self._executable = executable
        self._profile = Path(tempfile.mkdtemp(prefix="chromium-page-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: ClientConnection | None = None
        self._next_id = 0

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            [self._executable, "--headless", *CHROMIUM_ARGS, f"--user-data-dir={self._profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._socket = connect(self._page_socket(), max_size=None, open_timeout=30)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._socket is not None:
            self._socket.close()
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=30)
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- what a person does -------------------------------------------------------------------

    def open(self, url: str) -> None:
        """Go to ``url`` and wait until it has loaded."""
        self._mark()
        self.call("Page.navigate", {"url": url})
        self._wait_loaded()

    def type_into(self, selector: str, text: str) -> None:
        """Focus the field ``selector`` and type ``text`` into it."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", {"text": text})

    def click(self, selector: str) -> None:
        """Click the centre of ``selector`` and wait for the page it leads to."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        x, y = box
        self._mark()
        for kind in ("mousePressed", "mouseReleased"):
            event = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            self.call("Input.dispatchMouseEvent", event)
        self._wait_loaded()

    def text(self, selector: str = "body") -> str:
        """What ``selector`` shows (``innerText``), or ``""`` when it is not on the page."""
        value = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " return e ? e.innerText : ''; })()"
        )
        return str(value)

    def url(self) -> str:
        return str(self.evaluate("location.href"))

    def screenshot(self, path: Path, width: int, height: int, *, mobile: bool) -> None:
        """A PNG of the whole page laid out ``width`` CSS pixels wide (a phone when
        ``mobile``), at least ``height`` tall."""
        metrics = {"width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1,
                   "mobile": mobile}  # fmt: skip
        self.call("Emulation.setDeviceMetricsOverride", metrics)
        self.evaluate("window.scrollTo(0, 0)")
        content = self.evaluate("document.documentElement.scrollHeight")
        full = max(height, int(content))
        self.call("Emulation.setDeviceMetricsOverride", {**metrics, "height": full})
        shot = self.call("Page.captureScreenshot", {"format": "png"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        self.call("Emulation.clearDeviceMetricsOverride", {})

    # -- protocol -----------------------------------------------------------------------------

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self._socket is not None
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message: dict[str, Any] = json.loads(self._socket.recv(timeout=30))
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def _mark(self) -> None:
        self.evaluate("window.__supervisorTestMark = true")

    def _wait_loaded(self) -> None:
        """Until a new document (the mark is gone) has finished loading."""
        deadline = time.monotonic() + _LOAD_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                state = self.evaluate(
                    "window.__supervisorTestMark === undefined && document.readyState"
                )
            except RuntimeError:
                state = None  # the old document went away mid-evaluation
            if state == "complete":
                return
            time.sleep(0.05)
        raise AssertionError("the page did not load in time")

    def _page_socket(self) -> str:
        """The DevTools WebSocket of the first page, once Chromium has opened it."""
        deadline = time.monotonic() + _START_TIMEOUT_S
        port_file = self._profile / "DevToolsActivePort"
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"Chromium exited with {self._process.returncode}")
            if port_file.exists() and port_file.read_text().strip():
                port = port_file.read_text().split()[0]
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list") as reply:
                        targets: list[dict[str, Any]] = json.loads(reply.read())
                except OSError:
                    targets = []
                pages = [t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"]
                if pages:
                    return str(pages[0])
            time.sleep(0.1)
        raise RuntimeError("Chromium opened no DevTools page in time")
