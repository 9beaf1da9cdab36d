"""A tiny web site on loopback for the browser-worker tests, recording every request it gets.

Pages:
- ``/`` - a form (text input ``q``, password ``pw``, submit button) that POSTs to ``/submit``;
- ``/swap`` - the same form, whose button is replaced by a "Delete everything" button shortly
  after load (to prove an approval does not carry over to a changed element);
- ``POST /submit`` - records the form body and answers "Thanks".
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs

FORM_PAGE = """<!doctype html>
<html><head><title>Signup</title></head><body>
<h1>Signup</h1>
<form method="post" action="/submit">
  <label for="q">Name</label> <input id="q" type="text" name="q" placeholder="Your name">
  <label for="pw">Password</label> <input id="pw" type="password" name="pw">
  <button id="send" type="submit">Send</button>
</form>
{script}
</body></html>
"""

SWAP_SCRIPT = """<script>
setTimeout(function () {
  var old = document.getElementById('send');
  var replacement = document.createElement('button');
  replacement.type = 'submit';
  replacement.id = 'danger';
  replacement.textContent = 'Delete everything';
  old.replaceWith(replacement);
}, %d);
</script>"""


@dataclass(frozen=True)
class SeenRequest:
    """One request the site received."""

    method: str
    path: str
    form: dict[str, list[str]] = field(default_factory=dict)


class BrowserSite:
    """A threaded HTTP server on 127.0.0.1 serving the test pages.

    Args:
        swap_after_ms: Delay before ``/swap`` replaces its submit button.
    """

    def __init__(self, *, swap_after_ms: int = 2500) -> None:
        self.requests: list[SeenRequest] = []
        self._lock = threading.Lock()
        self._swap_after_ms = swap_after_ms
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def _send(self, status: int, body: str) -> None:
                raw = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:
                site._record(SeenRequest("GET", self.path))
                if self.path == "/":
                    self._send(200, FORM_PAGE.format(script=""))
                elif self.path == "/swap":
                    script = SWAP_SCRIPT % site._swap_after_ms
                    self._send(200, FORM_PAGE.format(script=script))
                else:
                    self._send(404, "<html><body>not found</body></html>")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace")
                site._record(SeenRequest("POST", self.path, parse_qs(body)))
                self._send(200, "<html><body><p>Thanks</p></body></html>")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _record(self, request: SeenRequest) -> None:
        with self._lock:
            self.requests.append(request)

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        """An absolute URL on this site (``host`` may be ``localhost``)."""
        return f"http://{host}:{self.port}{path}"

    def seen(self, method: str | None = None) -> list[SeenRequest]:
        """Requests received so far, optionally only one method."""
        with self._lock:
            return [r for r in self.requests if method is None or r.method == method]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def latest_page_state(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message (browser-use puts the page's elements there)."""
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "\n".join(
                str(part.get("text", "")) for part in content if isinstance(part, dict)
            )
    return ""


def element_index(page_state: str, pattern: str) -> int:
    """The browser-use index of the first interactive element whose line matches ``pattern``.

    Raises:
        LookupError: No element line matches (the script then cannot continue).
    """
    for line in page_state.splitlines():
        found = re.search(r"\[(\d+)\]<", line)
        if found and re.search(pattern, line):
            return int(found.group(1))
    raise LookupError(f"no element matching {pattern!r} in the page state")


def agent_output(action: dict[str, Any]) -> str:
    """browser-use's structured AgentOutput JSON for one action."""
    return json.dumps(
        {
            "thinking": "",
            "evaluation_previous_goal": "",
            "memory": "",
            "next_goal": "",
            "action": [action],
        }
    )
