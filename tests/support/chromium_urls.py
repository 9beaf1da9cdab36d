"""Chromium's own URL parser as a test oracle: ``new URL(x)`` in a real headless Chromium.

Chromium is started once with the worker's flags (`sandboxes.browser.config.CHROMIUM_ARGS`)
and a throwaway profile, and driven over the DevTools protocol: each batch of inputs is one
``Runtime.evaluate`` in an ``about:blank`` page, so a property test can check hundreds of
URLs in seconds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from websockets.sync.client import ClientConnection, connect

from sandboxes.browser.config import CHROMIUM_ARGS

_START_TIMEOUT_S = 60.0
_PARSE = """JSON.stringify(%s.map((text) => {
  try {
    const url = new URL(text);
    return {href: url.href, protocol: url.protocol, hostname: url.hostname, port: url.port,
            origin: url.origin, username: url.username, password: url.password};
  } catch (error) {
    return null;
  }
}))"""


@dataclass(frozen=True)
class ChromiumReading:
    """What Chromium's ``URL`` says about one input."""

    href: str
    scheme: str
    host: str
    port: str
    origin: str
    has_credentials: bool


class ChromiumURLs:
    """A headless Chromium that parses URLs on request (a context manager).

    Args:
        executable: The Chromium to launch.
    """

    def __init__(self, executable: str) -> None:
        self._executable = executable
        self._profile = Path(tempfile.mkdtemp(prefix="chromium-urls-"))
        self._process: subprocess.Popen[bytes] | None = None
        self._socket: ClientConnection | None = None
        self._next_id = 0

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            [
                self._executable,
                "--headless",
                *CHROMIUM_ARGS,
                f"--user-data-dir={self._profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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

    def parse(self, inputs: list[str]) -> list[ChromiumReading | None]:
        """Chromium's reading of each input, ``None`` where ``new URL`` throws."""
        expression = _PARSE % json.dumps(inputs)
        reply = self._call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        readings: list[dict[str, str] | None] = json.loads(reply["result"]["value"])
        return [
            None
            if reading is None
            else ChromiumReading(
                href=reading["href"],
                scheme=reading["protocol"].removesuffix(":"),
                host=reading["hostname"],
                port=reading["port"],
                origin=reading["origin"],
                has_credentials=bool(reading["username"] or reading["password"]),
            )
            for reading in readings
        ]

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

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
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
