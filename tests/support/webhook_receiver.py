"""A real HTTP receiver on 127.0.0.1 for webhook tests: records every request and answers
with the statuses it is told, in order (then 200)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    """What the server got, and what it answers next."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    answer_body: bytes = b"ok"
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_status(self) -> int:
        with self.lock:
            return self.statuses.pop(0) if self.statuses else 200

    def record(self, received: Received) -> None:
        with self.lock:
            self.requests.append(received)


@contextmanager
def webhook_receiver(
    statuses: list[int] | None = None, answer_body: bytes = b"ok"
) -> Iterator[Receiver]:
    """A receiver listening on a free loopback port until the block ends."""
    receiver = Receiver(statuses=list(statuses or []), answer_body=answer_body)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            receiver.record(Received(self.path, dict(self.headers.items()), body))
            status = receiver.next_status()
            self.send_response(status)
            self.send_header("Content-Length", str(len(receiver.answer_body)))
            self.end_headers()
            self.wfile.write(receiver.answer_body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/supervisor"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
