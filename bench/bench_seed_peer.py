"""The seed's approval scenario, end to end: our SDK against MemoRizz's, in one run.

One cycle is the seed page's "Durable approval lifecycle" with its ``create_customer`` tool:
``agent.run("Create customer ...")`` (one request to a chat-completions model on loopback, which
asks for the tool; the run pauses with a proposal), ``agent.list_approval_proposals("pending")``,
``agent.approve(...)`` and ``agent.resume_approval(id, continue_model=False)`` (the tool runs
once; ``consumed`` is true).

Both SDKs talk to the same model: a small standard-library HTTP server defined here (the first
request of a run gets a ``create_customer`` call; ``/embeddings`` answers with a fixed vector,
for MemoRizz's conversation memory, which embeds what it stores), started in the process that
runs the agent, so each side pays for its own model in the same way.

* Peer: ``memorizz.MemAgentBuilder().with_llm_config(...).with_tools([create_customer]).build()``
  as on the seed page (memorizz 0.17.16, its default approval store: a SQLite file under
  ``$HOME/.memorizz``, WAL, SQLite's default ``synchronous`` FULL), run in the MemoRizz venv.
* Ours: ``supervisor.MemAgentBuilder`` with the same tool and a SQLite ledger file, in a worker
  on the project venv, at ``synchronous`` NORMAL (our default) and FULL.

Rounds interleave the paths; each round's ratio is MemoRizz's median over ours.

    python3.11 -m venv /tmp/memorizz-venv && /tmp/memorizz-venv/bin/pip install memorizz==0.17.16
    /tmp/memorizz-venv/bin/python bench/bench_seed_peer.py [--cycles 30] [--rounds 5]
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench_ledger import timed

REPO = Path(__file__).resolve().parents[1]
OURS_PYTHON = REPO / ".venv" / "bin" / "python"
LEVELS = ("NORMAL", "FULL")
CALL = {"name": "Ada Lovelace", "email": "ada@example.com"}


class _ModelHandler(BaseHTTPRequestHandler):
    """Chat completions: a ``create_customer`` call unless the last message is a tool result."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            size = int(body.get("dimensions") or 1536)
            data = [
                {"object": "embedding", "index": index, "embedding": [0.01] * size}
                for index in range(len(texts))
            ]
            usage = {"prompt_tokens": 1, "total_tokens": 1}
            self._send({"object": "list", "data": data, "model": body["model"], "usage": usage})
            return
        if body["messages"][-1]["role"] == "tool":
            message: dict[str, Any] = {"role": "assistant", "content": "done"}
        else:
            call = {"name": "create_customer", "arguments": json.dumps(CALL)}
            message = {
                "role": "assistant", "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
            }  # fmt: skip
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        self._send({"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [choice], "usage": usage})  # fmt: skip

    def _send(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def start_model() -> str:
    """Start the loopback model in this process; returns its ``base_url``."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ModelHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def _llm(base_url: str) -> dict[str, Any]:
    return {"provider": "openai", "model": "gpt-4o-mini", "base_url": base_url, "api_key": "k"}


def seed_cycle(agent: Any, index: list[int]) -> Callable[[], None]:
    """run -> pause -> list pending -> approve -> resume (no model continuation)."""

    def cycle() -> None:
        index[0] += 1
        agent.run(f"Create customer {index[0]}")
        pending = agent.list_approval_proposals(status="pending")
        first = pending[0]
        proposal_id = first["proposal_id"] if isinstance(first, dict) else first.proposal_id
        agent.approve(proposal_id, approver_id="operator@example.com", reason="reviewed")
        result = agent.resume_approval(proposal_id, continue_model=False)
        assert result.consumed, result

    return cycle


# --- ours: a worker process on the project venv ---------------------------------------------


def worker(workdir: Path) -> None:
    """``--worker``: one agent per level; answer ``LEVEL COUNT`` lines with JSON samples."""
    sys.path[:0] = [str(REPO)]
    supervisor: Any = importlib.import_module("supervisor")
    tools: Any = importlib.import_module("supervisor.demo.tools")
    base_url = start_model()
    cycles: dict[str, Callable[[], None]] = {}
    providers = []
    for level in LEVELS:
        provider = supervisor.SQLModelProvider(
            f"sqlite:///{workdir / f'ours-{level}.db'}", synchronous=level
        )
        providers.append(provider)
        agent = (
            supervisor.MemAgentBuilder()
            .with_llm_config(_llm(base_url))
            .with_memory_provider(provider)
            .with_tools([tools.create_customer])
            .build()
        )
        cycles[level] = seed_cycle(agent, [0])
    try:
        for line in sys.stdin:
            level, count = line.split()
            print(json.dumps(timed(cycles[level], int(count))), flush=True)
    finally:
        for provider in providers:
            provider.close()


def _ours(python: Path, workdir: Path) -> tuple[subprocess.Popen[str], Callable[[str, int], Any]]:
    process = subprocess.Popen(
        [str(python), __file__, "--worker", str(workdir)],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip

    def run(level: str, count: int) -> list[float]:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(f"{level} {count}\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {process.wait()}")
        samples: list[float] = json.loads(line)
        return samples

    return process, run


def memorizz_agent(base_url: str, home: Path) -> Any:
    """The seed page's agent on MemoRizz, its stores under ``home``."""
    os.environ["HOME"] = str(home)
    os.environ["OPENAI_API_KEY"] = "k"
    os.environ["OPENAI_BASE_URL"] = base_url  # its embeddings go to the loopback model too
    memorizz: Any = importlib.import_module("memorizz")

    def create_customer(name: str, email: str) -> dict[str, Any]:
        """Create one CRM customer after host approval."""
        return {"customer_id": "cus_1", "name": name, "email": email}

    governed = memorizz.governed_tool(
        deterministic=False, side_effects=True, requires_approval=True,
        approval_reason="Creates a customer in the production CRM", domains=("crm",),
    )(create_customer)  # fmt: skip
    builder = memorizz.MemAgentBuilder().with_llm_config(_llm(base_url))
    return builder.with_tools([governed]).build()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--cycles", type=int, default=30, help="cycles per path per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ours-python", type=Path, default=OURS_PYTHON, help="project venv")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker)
        return
    version = importlib.import_module("importlib.metadata").version("memorizz")
    print(f"memorizz {version}; {options.cycles} cycles x {options.rounds} rounds per path")
    with tempfile.TemporaryDirectory(prefix="bench-seed-") as name:
        work = Path(name)
        process, ours = _ours(options.ours_python, work)
        try:
            peer = seed_cycle(memorizz_agent(start_model(), work), [0])
            paths: list[tuple[str, Callable[[int], list[float]]]] = [
                ("peer: MemoRizz (as shipped, FULL)", lambda count: timed(peer, count)),
            ]
            for level in LEVELS:
                paths.append((f"ours, SQLite {level}", functools.partial(ours, level)))
            for _, run in paths:
                run(max(5, options.cycles // 3))  # warm-up
            medians: dict[str, list[float]] = {label: [] for label, _ in paths}
            samples: dict[str, list[float]] = {label: [] for label, _ in paths}
            for round_index in range(options.rounds):
                order = paths if round_index % 2 == 0 else paths[::-1]
                for label, run in order:
                    measured = run(options.cycles)
                    samples[label] += measured
                    medians[label].append(statistics.median(measured))
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=60)
    peer_label = paths[0][0]
    print("\n| path | p50 ms/cycle | p95 ms/cycle | MemoRizz / this, median of round ratios |")
    print("|---|---:|---:|---:|")
    for label, _ in paths:
        ordered = sorted(samples[label])
        p50, p95 = ordered[len(ordered) // 2], ordered[int(0.95 * (len(ordered) - 1))]
        ratios = [
            peer / mine for peer, mine in zip(medians[peer_label], medians[label], strict=True)
        ]
        spread = f"({min(ratios):.2f}-{max(ratios):.2f}x)"
        print(f"| {label} | {p50 * 1000:.2f} | {p95 * 1000:.2f} | "
              f"{statistics.median(ratios):.2f}x {spread} |")  # fmt: skip


if __name__ == "__main__":
    main()
