"""A local stand-in for the API that runs inside an E2B sandbox (envd), for adapter tests.

E2B's cloud cannot be reached from CI. The official SDK in debug mode skips the control plane
(create/kill/set_timeout) and talks to envd directly; pointed here with ``sandbox_url``, it
speaks its real wire protocol to this server: Connect RPC with JSON (``process.Process/Start``
server stream, ``SendSignal``; ``filesystem.Filesystem/ListDir``) and the ``/files`` HTTP API.
The server implements only what ``sandboxes.e2b_backend`` uses, served by the SDK's own
generated Connect WSGI applications.

Commands run as ordinary local subprocesses under a temporary root directory (absolute sandbox
paths map into it). It is NOT an isolation boundary; it only plays the remote machine's part.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from e2b.envd.filesystem import filesystem_pb
from e2b.envd.filesystem.filesystem_connect import FilesystemSync, FilesystemWSGIApplication
from e2b.envd.process import process_pb
from e2b.envd.process.process_connect import ProcessSync, ProcessWSGIApplication
from protobuf import Oneof

Environ = dict[str, Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        return


class EnvdStandIn:
    """The stand-in server. Use as a context manager; ``url`` is its base URL.

    Args:
        root: Directory that plays the sandbox's ``/``.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.commands: list[str] = []
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.signals: list[tuple[int, str]] = []
        self._process_app = ProcessWSGIApplication(_ProcessService(self))
        self._filesystem_app = FilesystemWSGIApplication(_FilesystemService(self))
        self._server = make_server("127.0.0.1", 0, self._app, _Server, _QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> EnvdStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in self.processes.values():
            # ``poll()`` also answers None while a handler thread is in ``wait()`` on the same
            # process, which may then be gone already: its group with it.
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        self._server.shutdown()
        self._server.server_close()

    def host_path(self, sandbox_path: str) -> Path:
        """Where a sandbox path lives on this host."""
        return self.root / sandbox_path.lstrip("/")

    def _app(self, environ: Environ, start_response: Any) -> Iterable[bytes]:
        if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
            body = _dechunk(environ["wsgi.input"])
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
            environ.pop("HTTP_TRANSFER_ENCODING")
        path = environ.get("PATH_INFO", "")
        if path.startswith("/process.Process/"):
            return self._process_app(environ, start_response)
        if path.startswith("/filesystem.Filesystem/"):
            return self._filesystem_app(environ, start_response)
        if path == "/health":
            start_response("204 No Content", [])
            return [b""]
        if path == "/files":
            return self._files(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "application/json")])
        return [json.dumps({"code": 404, "message": f"no route {path}"}).encode()]

    def _files(self, environ: Environ, start_response: Any) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""))
        target = self.host_path(query["path"][0])
        if environ["REQUEST_METHOD"] == "POST":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(body)
            info = [{"name": target.name, "type": "file", "path": query["path"][0]}]
            start_response("200 OK", [("Content-Type", "application/json")])
            return [json.dumps(info).encode()]
        if not target.is_file():
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [json.dumps({"code": 404, "message": "file not found"}).encode()]
        start_response("200 OK", [("Content-Type", "application/octet-stream")])
        return [target.read_bytes()]


def _dechunk(stream: Any) -> bytes:
    """Read an HTTP/1.1 chunked request body (the SDK's Connect client streams its requests)."""
    body = bytearray()
    while True:
        size = int(stream.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            stream.readline()
            return bytes(body)
        body.extend(stream.read(size))
        stream.readline()


class _ProcessService(ProcessSync):
    def __init__(self, standin: EnvdStandIn) -> None:
        self.standin = standin

    def start(self, request: Any, ctx: Any, /) -> Iterator[Any]:
        config = request.process
        self.standin.commands.append(config.args[-1])
        cwd = self.standin.host_path(config.cwd or "/")
        process = subprocess.Popen(
            [config.cmd, *config.args], cwd=cwd, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd),
                 **dict(config.envs or {})},
        )  # fmt: skip
        self.standin.processes[process.pid] = process
        yield _event(start=process_pb.ProcessEvent.StartEvent(pid=process.pid))
        yield from _pump(process)
        code = process.wait()
        exit_code = code if code >= 0 else 128 - code
        yield _event(end=process_pb.ProcessEvent.EndEvent(
            exit_code=exit_code, exited=True, status=f"exit status {exit_code}"))  # fmt: skip

    def send_signal(self, request: Any, ctx: Any, /) -> Any:
        pid = request.process.selector.value
        name = "SIGKILL" if request.signal == process_pb.Signal.SIGKILL else "SIGTERM"
        self.standin.signals.append((pid, name))
        process = self.standin.processes.get(pid)
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL if name == "SIGKILL" else signal.SIGTERM)
        return process_pb.SendSignalResponse()


def _event(**oneof: Any) -> Any:
    [(field, value)] = oneof.items()
    event: Any = Oneof(field, value)
    return process_pb.StartResponse(event=process_pb.ProcessEvent(event=event))


def _pump(process: subprocess.Popen[bytes]) -> Iterator[Any]:
    import selectors

    assert process.stdout is not None and process.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ, "stdout")
    selector.register(process.stderr, selectors.EVENT_READ, "stderr")
    with selector:
        while selector.get_map():
            for key, _ in selector.select():
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                data = process_pb.ProcessEvent.DataEvent(output=Oneof(key.data, chunk))
                yield _event(data=data)


class _FilesystemService(FilesystemSync):
    def __init__(self, standin: EnvdStandIn) -> None:
        self.standin = standin

    def make_dir(self, request: Any, ctx: Any, /) -> Any:
        target = self.standin.host_path(request.path)
        target.mkdir(parents=True, exist_ok=True)
        entry = filesystem_pb.EntryInfo(
            name=target.name, type=filesystem_pb.FileType.DIRECTORY, path=request.path
        )
        return filesystem_pb.MakeDirResponse(entry=entry)

    def list_dir(self, request: Any, ctx: Any, /) -> Any:
        top = self.standin.host_path(request.path)
        entries = []
        for path in sorted(top.rglob("*") if request.depth > 1 else top.iterdir()):
            relative = path.relative_to(top)
            if len(relative.parts) > max(request.depth, 1):
                continue
            kind = (filesystem_pb.FileType.DIRECTORY if path.is_dir()
                    else filesystem_pb.FileType.FILE)  # fmt: skip
            entries.append(filesystem_pb.EntryInfo(
                name=path.name, type=kind, path=f"{request.path.rstrip('/')}/{relative}",
                size=path.stat().st_size if path.is_file() else 0))  # fmt: skip
        return filesystem_pb.ListDirResponse(entries=entries)
