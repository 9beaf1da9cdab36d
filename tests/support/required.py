"""Parts a test needs from the machine: skip locally when one is missing, fail under CI.

CI installs every part (`bash .ci/system-deps.sh`), so a missing one there means a broken
environment, and a run that skipped those tests would pass without testing them.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest

BWRAP_MISSING = "bubblewrap (bwrap) is not installed: run `bash .ci/system-deps.sh`"


def unavailable(message: str, *, in_ci: str | None = None) -> NoReturn:
    """Skip the test with ``message``; under ``CI=true`` fail it instead.

    Args:
        message: what is missing (and how to install it), the skip reason.
        in_ci: the failure under CI; by default ``message`` plus why it does not skip.
    """
    if os.environ.get("CI") == "true":
        pytest.fail(in_ci or f"{message} (CI=true, so not skipping)", pytrace=False)
    pytest.skip(message)


def require_bwrap() -> None:
    """Bubblewrap is on PATH, or the test is `unavailable`."""
    if shutil.which("bwrap") is None:
        unavailable(BWRAP_MISSING)
