"""``supervisor serve`` as a real subprocess on a free loopback port, and an HTTP client for it.

The server runs the installed console script against a real ledger file; the client is httpx
with a cookie jar, sending the Origin a browser would send. Hidden form fields are read back
from the served HTML the way a browser submits them.
"""

from __future__ import annotations

import html
import os
import re
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx

from support.cli import SUPERVISOR, run_cli

_START_TIMEOUT_S = 60.0
_INPUT = re.compile(r'<input type="hidden" name="([a-z_]+)" value="([^"]*)">')


def free_port() -> int:
    """A TCP port nobody listens on right now (on 127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def add_operator(url: str, name: str, env: Mapping[str, str] | None = None) -> str:
    """``supervisor operators add NAME``; returns the token it printed."""
    done = run_cli("operators", "add", name, "--db", url, env=env)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("sot_")
    return token


@dataclass
class Served:
    """A running ``supervisor serve``: its base URL and the output it printed so far."""

    base_url: str
    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return self.base_url

    def client(self) -> httpx.Client:
        """A client with its own cookie jar that sends this server's Origin on every request."""
        return httpx.Client(
            base_url=self.base_url, headers={"Origin": self.base_url}, timeout=30,
            follow_redirects=False,
        )  # fmt: skip


@contextmanager
def serve(
    url: str, *extra: str, env: Mapping[str, str] | None = None, settle: float = 1.0
) -> Iterator[Served]:
    """Run ``supervisor serve --db URL`` until the block ends (then SIGTERM, SIGKILL)."""
    assert SUPERVISOR is not None
    port = free_port()
    process = subprocess.Popen(
        [SUPERVISOR, "serve", "--port", str(port), "--db", url,
         "--settle-seconds", str(settle), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    served = Served(f"http://127.0.0.1:{port}", process)
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            served.output.append(line)
            if line.startswith("Serving the supervisor on"):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not ready.wait(0.1):
            assert process.poll() is None, "".join(served.output)
            assert time.monotonic() < deadline, "supervisor serve did not start"
        _wait_listening(port, deadline)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        reader.join(timeout=5)


def _wait_listening(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError("supervisor serve is not listening")


def login(client: httpx.Client, token: str) -> httpx.Response:
    """POST the login form; a good token answers 303 to / with the session cookie."""
    return client.post("/login", data={"token": token})


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden inputs of the first form on ``page`` that has a view (or of any form)."""
    fields: dict[str, str] = {}
    for name, value in _INPUT.findall(page):
        fields.setdefault(name, html.unescape(value))
    return fields


def error_code(page: str) -> str | None:
    """The stable code a refusal page shows (``data-code``)."""
    found = re.search(r'data-code="([a-z_]+)"', page)
    return found.group(1) if found else None
