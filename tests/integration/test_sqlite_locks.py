"""Two engines on one SQLite file in one process never lose that process's locks on it.

POSIX releases every fcntl lock a process holds on a file when *any* descriptor of that file is
closed. Opening a second provider used to read the file's header with Python's ``open()`` and
close it, dropping the locks of the first provider's live connection; another process closing
its last connection then checkpointed and deleted the WAL under it, and the first provider read
an empty ledger (a proposal another process had just written was "not found"). This happens in
real use: ``supervisor resume`` and ``supervisor run`` open a provider and the agent factory
opens another; the demo's TUI runs beside the demo's own provider.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from supervisor.store.provider import SQLModelProvider

SCHEMA_HASH = "5" * 64

OTHER_PROCESS = """
import sys
from supervisor.store.provider import SQLModelProvider
with SQLModelProvider(sys.argv[1]) as provider:
    print(provider.ledger.propose("create_customer", "5" * 64, {"name": sys.argv[2]}).proposal_id)
"""


def _propose_elsewhere(url: str, name: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, url, name], capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_second_provider_in_this_process_keeps_the_first_ones_view_of_other_writers(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with SQLModelProvider(url) as first:
        first.ledger.propose("create_customer", SCHEMA_HASH, {"name": "first"})
        for round_ in range(3):
            with SQLModelProvider(url) as second:  # e.g. an agent factory's own provider
                second.ledger.list(status=None)
            written = _propose_elsewhere(url, f"other-{round_}")  # opens, writes, closes
            assert first.ledger.get(written).arguments == {"name": f"other-{round_}"}
            assert (tmp_path / "ledger.db-wal").exists()  # nobody deleted it under us
        assert len(first.ledger.list(status=None).items) == 4
