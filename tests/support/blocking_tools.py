"""A side-effecting tool that blocks mid-call, so a test can SIGKILL its process there.

``charge_card`` records its side effect in ``SIDE_EFFECT_FILE`` (one line per execution), then
creates ``$BLOCK_DIR/started`` and waits until ``$BLOCK_DIR/release`` exists: a test that never
releases it kills the process in the middle of the call, after the side effect happened and
before any outcome is recorded.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from supervisor import governed_tool


@governed_tool(
    deterministic=False,
    side_effects=True,
    requires_approval=True,
    approval_reason="Charges a customer's card",
    domains=("payments",),
)
def charge_card(order: str, amount: int) -> dict[str, Any]:
    """Charge a card for one order (blocks after charging until released)."""
    with open(os.environ["SIDE_EFFECT_FILE"], "a", encoding="utf-8") as handle:
        handle.write(f"charge_card {order} {amount}\n")
        handle.flush()
        os.fsync(handle.fileno())
    block = Path(os.environ["BLOCK_DIR"])
    (block / "started").write_text(str(os.getpid()))
    while not (block / "release").exists():
        time.sleep(0.05)
    return {"charge_id": f"ch_{order}", "amount": amount}
