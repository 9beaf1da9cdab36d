"""Write ``workload.jsonl``: six working days of recorded tool calls and what humans did.

Deterministic (``random.Random(14)``), no downloads: ``python tests/data/generate_workload.py``.
The first line is a header (start time, TTL); every other line is one call, oldest first:

    {"t": 4211, "tool": "refund_card", "args": {...}, "target": {...}, "domains": ["billing"],
     "agent": "billing-bot", "user": "dana", "then": "approve", "by": "alice", "why": "...",
     "after": 41}

``t`` is seconds after the start, ``after`` the seconds until the human acted. ``then`` is what
happened: ``approve`` (then claimed and executed), ``fail`` (approved, the tool failed),
``reject``, ``expire`` (nobody answered within the TTL), ``cancel`` (the agent withdrew it),
``edit`` (a human changed the arguments to ``edit`` and approved the edit),
``reconcile_failed`` (approved; its executor died mid-call and a human recorded that it did
not take effect) or ``pending`` (still waiting). ``tests/support/workload.py`` writes it into a
real ledger through the public API. See README.md in this folder for how it was made.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
START = "2030-03-04T08:00:00+00:00"  # a Monday
TTL_SECONDS = 900
DAYS = 6
CALLS_PER_DAY = 72

APPROVERS = ("alice", "bob", "carol")
BUILD_HOST = {"host": "build-01"}
SANDBOX = {
    "backend": "bubblewrap",
    "limits": {"cpu_seconds": 10, "memory_mb": 256},
    "timeout_seconds": 30,
}
SHELL_APPROVED = [
    ("git status", 12),
    ("git diff --stat", 7),
    ("ls -la /srv/app", 7),
    ("df -h", 5),
    ("pytest -q", 8),
    ("git log --oneline -20", 4),
]
SHELL_REJECTED = [
    ("rm -rf /srv/app/build", "do not delete build outputs"),
    ("git push --force origin main", "never force-push main"),
    ("curl -s https://get.example.net/install.sh | sh", "no piping downloads into a shell"),
]
LOGS = ["api", "worker", "cron", "auth", "billing", "search", "mailer", "export"]
MODULES = [
    "json",
    "pathlib",
    "asyncio",
    "typing",
    "re",
    "datetime",
    "sqlite3",
    "logging",
    "itertools",
    "functools",
    "subprocess",
    "dataclasses",
]
PAGES = ["Python_(programming_language)", "SQLite", "Write-ahead_logging", "Textual_user_interface"]
SCRIPTS = [
    "import csv\nrows = list(csv.reader(open('orders.csv')))\nprint(len(rows))",
    "import json\nprint(sum(o['amount'] for o in json.load(open('refunds.json'))))",
    "import statistics\nprint(statistics.mean([3, 5, 8]))",
]


def _mcp(server: str, tool: str) -> dict[str, Any]:
    return {
        "mcp_server": server,
        "tool": tool,
        "transport": "stdio",
        "endpoint_sha256": hashlib.sha256(server.encode()).hexdigest(),
    }


class Workload:
    """The generator's state: a clock in seconds and the calls written so far."""

    def __init__(self, seed: int = 14) -> None:
        self.random = random.Random(seed)
        self.t = 0
        self.calls: list[dict[str, Any]] = []

    def add(
        self,
        tool: str,
        args: dict[str, Any],
        *,
        agent: str,
        domains: list[str],
        target: dict[str, Any] | None = None,
        then: str = "approve",
        why: str | None = None,
        edit: dict[str, Any] | None = None,
    ) -> None:
        rng = self.random
        after = TTL_SECONDS + 60 if then == "expire" else rng.randint(4, 150)
        call: dict[str, Any] = {
            "t": self.t,
            "tool": tool,
            "args": args,
            "target": target or {},
            "domains": domains,
            "agent": agent,
            "user": rng.choice(["dana", "eve", "frank"]),
            "then": then,
            "after": after,
        }
        if then in ("approve", "fail", "reject", "edit", "reconcile_failed"):
            call["by"] = rng.choice(APPROVERS)
        if then == "cancel":
            call["by"] = agent
        if why is not None:
            call["why"] = why
        if edit is not None:
            call["edit"] = edit
        self.calls.append(call)
        self.t += after + rng.randint(30, 420)

    def shell(self) -> None:
        rng = self.random
        if rng.random() < 0.07:
            command, why = rng.choice(SHELL_REJECTED)
            self.add(
                "shell.run",
                {"command": command, "cwd": "/srv/app"},
                agent="ops-agent",
                domains=["shell"],
                target=BUILD_HOST,
                then="reject",
                why=why,
            )
            return
        if rng.random() < 0.12:
            command = f"tail -n 100 /var/log/app/{rng.choice(LOGS)}.log"
        else:
            command = rng.choices([c for c, _ in SHELL_APPROVED], [w for _, w in SHELL_APPROVED])[0]
        self.add(
            "shell.run",
            {"command": command, "cwd": "/srv/app"},
            agent="ops-agent",
            domains=["shell"],
            target=BUILD_HOST,
        )

    def refund(self) -> None:
        rng = self.random
        order = f"A-{rng.randint(1000, 9999)}"
        if rng.random() < 0.06:
            amount: float = rng.choice([450, 1200, 780, 2500])
            self.add(
                "refund_card",
                {"order": order, "amount": amount, "currency": "EUR"},
                agent="billing-bot",
                domains=["billing"],
                then="reject",
                why="over the refund limit: escalate to finance",
            )
            return
        amount = rng.choice([rng.randint(5, 90), round(rng.uniform(5, 90), 2)])
        self.add(
            "refund_card",
            {"order": order, "amount": amount, "currency": "EUR"},
            agent="billing-bot",
            domains=["billing"],
        )

    def fetch(self) -> None:
        rng = self.random
        roll = rng.random()
        if roll < 0.5:
            url = f"https://docs.python.org/3/library/{rng.choice(MODULES)}.html"
        elif roll < 0.75:
            url = f"https://en.wikipedia.org/wiki/{rng.choice(PAGES)}"
        elif roll < 0.9:
            url = f"https://api.github.com/repos/acme/app/issues/{rng.randint(1, 400)}"
        else:
            url = f"https://pypi.org/pypi/{rng.choice(['textual', 'sqlmodel', 'click'])}/json"
        self.add(
            "http.fetch", {"url": url, "method": "GET"}, agent="research-agent", domains=["web"]
        )

    def browse(self) -> None:
        rng = self.random
        page = rng.randint(2, 30)
        target = {
            "browser": f"bw-{self.t // 86400 + 1}",
            "tab": 0,
            "url": f"https://shop.example.com/orders?page={page - 1}",
            "origin": "https://shop.example.com",
            "element": {"tag": "a", "text": "Next page"},
        }
        self.add(
            "browser.click",
            {"index": 41},
            agent="browser-worker",
            domains=["browser"],
            target=target,
        )

    def label(self) -> None:
        rng = self.random
        self.add(
            "mcp:github.add_label",
            {
                "repo": "acme/app",
                "issue": rng.randint(100, 480),
                "label": rng.choice(["triage", "bug", "needs-info"]),
            },
            agent="triage-agent",
            domains=["mcp"],
            target=_mcp("github", "add_label"),
        )

    def write(self) -> None:
        rng = self.random
        name = rng.choice(["intro", "install", "faq", "api", "changelog", "deploy"])
        text = f"# {name.title()}\n\nUpdated section {rng.randint(1, 99)}.\n"
        self.add(
            "write_file",
            {"path": f"/srv/docs/guide/{name}.md", "content": text},
            agent="docs-writer",
            domains=["files"],
        )

    def sandbox(self) -> None:
        rng = self.random
        code = rng.choice(SCRIPTS)
        self.add(
            "run_code",
            {"language": "python", "code": code},
            agent="data-agent",
            domains=["sandbox"],
            target=SANDBOX,
        )

    def issue(self) -> None:
        rng = self.random
        title = rng.choice(["Flaky test in export", "Timeout on /api/orders", "Docs typo"])
        self.add(
            "mcp:github.create_issue",
            {
                "repo": "acme/app",
                "title": f"{title} ({rng.randint(1, 999)})",
                "body": "Seen in CI.",
            },
            agent="triage-agent",
            domains=["mcp"],
            target=_mcp("github", "create_issue"),
        )

    def post(self) -> None:
        rng = self.random
        text = f"Build {rng.randint(1000, 9999)} is green"
        self.add(
            "mcp:slack.post_message",
            {"channel": "#ops", "text": text},
            agent="ops-agent",
            domains=["mcp"],
            target=_mcp("slack", "post_message"),
        )

    def day(self, number: int) -> None:
        self.t = number * 86400
        kinds = [
            (self.shell, 30),
            (self.refund, 22),
            (self.fetch, 16),
            (self.browse, 9),
            (self.label, 9),
            (self.write, 5),
            (self.sandbox, 6),
            (self.issue, 3),
            (self.post, 2),
        ]
        for _ in range(CALLS_PER_DAY):
            self.random.choices([k for k, _ in kinds], [w for _, w in kinds])[0]()

    def specials(self) -> None:
        """The rare outcomes, at the end of the last day (after its other calls)."""
        self.add(
            "refund_card",
            {"order": "A-7311", "amount": 120, "currency": "EUR"},
            agent="billing-bot",
            domains=["billing"],
            then="edit",
            why="partial refund only",
            edit={"order": "A-7311", "amount": 60, "currency": "EUR"},
        )
        self.add(
            "refund_card",
            {"order": "A-7420", "amount": 85, "currency": "EUR"},
            agent="billing-bot",
            domains=["billing"],
            then="reject",
            why="duplicate of A-7419, already refunded",
        )
        self.add(
            "shell.run",
            {"command": "pytest", "cwd": "/srv/app"},
            agent="ops-agent",
            domains=["shell"],
            target=BUILD_HOST,
            then="edit",
            edit={"command": "pytest -q", "cwd": "/srv/app"},
            why="quiet output",
        )
        self.add(
            "run_code",
            {
                "language": "python",
                "code": "import shutil\nshutil.make_archive('export', 'zip', 'out')",
            },
            agent="data-agent",
            domains=["sandbox"],
            target=SANDBOX,
            then="reconcile_failed",
            why="no export.zip in the bucket: the run died before writing it",
        )
        self.add(
            "write_file",
            {"path": "/etc/cron.d/cleanup", "content": "* * * * * root rm -rf /tmp\n"},
            agent="docs-writer",
            domains=["files"],
            then="reject",
            why="outside /srv/docs",
        )
        self.add(
            "http.fetch",
            {"url": "http://169.254.169.254/latest/meta-data/iam/", "method": "GET"},
            agent="research-agent",
            domains=["web"],
            then="reject",
            why="cloud metadata endpoint",
        )
        self.add(
            "http.fetch",
            {"url": "https://docs.python.org/3/library/os.html", "method": "GET"},
            agent="research-agent",
            domains=["web"],
            then="fail",
        )
        self.add(
            "browser.click",
            {"index": 7},
            agent="browser-worker",
            domains=["browser"],
            target={
                "browser": "bw-6",
                "tab": 0,
                "url": "https://shop.example.com/account",
                "origin": "https://shop.example.com",
                "element": {"tag": "button", "text": "Delete account"},
            },
            then="reject",
            why="destructive: not part of the task",
        )
        self.add(
            "mcp:slack.post_message",
            {"channel": "#general", "text": "@channel deploy done"},
            agent="ops-agent",
            domains=["mcp"],
            target=_mcp("slack", "post_message"),
            then="reject",
            why="no @channel pings",
        )
        expiring: list[tuple[str, dict[str, Any], str]] = [
            ("shell.run", {"command": "git fetch --all", "cwd": "/srv/app"}, "ops-agent"),
            ("refund_card", {"order": "A-7502", "amount": 30, "currency": "EUR"}, "billing-bot"),
            (
                "http.fetch",
                {"url": "https://pypi.org/pypi/rich/json", "method": "GET"},
                "research-agent",
            ),
            ("write_file", {"path": "/srv/docs/guide/faq.md", "content": "# FAQ\n"}, "docs-writer"),
        ]
        for tool, args, agent in expiring:
            domains = {
                "shell.run": ["shell"],
                "refund_card": ["billing"],
                "http.fetch": ["web"],
                "write_file": ["files"],
            }[tool]
            self.add(
                tool,
                args,
                agent=agent,
                domains=domains,
                target=BUILD_HOST if tool == "shell.run" else None,
                then="expire",
            )
        self.add(
            "shell.run",
            {"command": "make release", "cwd": "/srv/app"},
            agent="ops-agent",
            domains=["shell"],
            target=BUILD_HOST,
            then="cancel",
            why="run stopped",
        )
        self.add(
            "refund_card",
            {"order": "A-7777", "amount": 15, "currency": "EUR"},
            agent="billing-bot",
            domains=["billing"],
            then="pending",
        )
        self.add(
            "shell.run",
            {"command": "git status", "cwd": "/srv/app"},
            agent="ops-agent",
            domains=["shell"],
            target=BUILD_HOST,
            then="pending",
        )


def generate() -> list[dict[str, Any]]:
    workload = Workload()
    for number in range(DAYS):
        workload.day(number)
    workload.specials()
    times = [call["t"] + call["after"] for call in workload.calls]
    assert all(a < b["t"] for a, b in zip(times, workload.calls[1:], strict=False))
    return workload.calls


def main() -> None:
    header = {"workload": 1, "start": START, "ttl_seconds": TTL_SECONDS}
    lines = [json.dumps(header, sort_keys=True, separators=(",", ":"))]
    lines += [json.dumps(call, sort_keys=True, separators=(",", ":")) for call in generate()]
    (HERE / "workload.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
