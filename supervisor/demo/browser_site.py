"""A tiny web site on loopback and a scripted browser plan: the demo's browser agent (and the
browser tests') drive real Chromium through browser-use against it.

Pages: ``/`` a signup form (text input ``q``, password ``pw``, a submit button) posting to
``/submit``; ``/swap`` the same form whose button is replaced by "Delete everything" shortly
after load; ``/redirect?to=URL`` a 302 to ``URL``. Every request is recorded.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from supervisor.assets import asset_path
from supervisor.testing import RecordedRequest, Reply

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


def form_page(script: str = "") -> str:
    """The signup page, with an optional script."""
    return asset_path("demo", "signup.html").read_text(encoding="utf-8").replace("{script}", script)


@dataclass(frozen=True)
class SeenRequest:
    """One request the site received."""

    method: str
    path: str
    form: dict[str, list[str]] = field(default_factory=dict)


class BrowserSite:
    """A threaded HTTP server on 127.0.0.1 serving the signup pages.

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
                    self._send(200, form_page())
                elif self.path == "/swap":
                    self._send(200, form_page(SWAP_SCRIPT % site._swap_after_ms))
                elif self.path.startswith("/redirect?"):
                    (to,) = parse_qs(urlsplit(self.path).query)["to"]
                    self.send_response(302)
                    self.send_header("Location", to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
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

    def start(self) -> Self:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


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
        LookupError: No element line matches (the plan then cannot continue).
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


Step = Callable[[str], dict[str, Any]]


class BrowserPlan:
    """A scripted browser agent for the scripted model: one action per request, then done."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.pages: list[str] = []

    def __call__(self, request: RecordedRequest) -> Reply:
        page = latest_page_state(request.messages)
        self.pages.append(page)
        index = len(self.pages) - 1
        if index < len(self.steps):
            return Reply(agent_output(self.steps[index](page)))
        return Reply(agent_output({"done": {"text": "finished", "success": True}}))


def signup_plan(site: BrowserSite, name: str = "alice") -> BrowserPlan:
    """navigate -> type the name -> click Send -> done."""
    return BrowserPlan(
        [
            lambda page: {"navigate": {"url": site.url("/")}},
            lambda page: {"input": {"index": element_index(page, "name=q"), "text": name}},
            lambda page: {"click": {"index": element_index(page, "<button")}},
        ]
    )
