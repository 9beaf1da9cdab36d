"""Recovery that runs by itself: before the CLI's proposal verbs, in the TUI, before a resume.

A call whose executor died mid-call stays ``executing`` until someone looks; these functions
are that look. Each flags such calls ``needs_reconciliation`` (never re-runs them: see
:meth:`~supervisor.ledger.service.ApprovalLedger.recover`) and is cheap when nothing is
executing (one query, no write).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from supervisor.ledger.errors import LedgerError
from supervisor.ledger.models import Execution
from supervisor.ledger.service import ApprovalLedger


def recover_now(ledger: ApprovalLedger) -> list[Execution]:
    """Flag every execution whose executor is gone as ``needs_reconciliation``, now.

    Call it first wherever work is about to be shown or resumed (``supervisor resume`` does).

    Returns:
        The executions this call flagged (none when nothing was stranded).

    Raises:
        LedgerError: The ledger could not be read or written.
    """
    return ledger.recover()


def recover_for_reader(
    reader: ApprovalLedger, open_writer: Callable[[], AbstractContextManager[ApprovalLedger]]
) -> list[Execution]:
    """Recovery for a command that opened the ledger read-only.

    Looks with ``reader`` (a read); only when a call is stranded does it open a writable ledger
    with ``open_writer`` to flag it. A ledger this process cannot write (read-only storage) is
    left as it is: the read goes on and shows the call as ``executing``.

    Returns:
        The executions flagged (none when nothing was stranded or nothing could be written).
    """
    try:
        if not reader.gone_executions():
            return []
        with open_writer() as writer:
            return recover_now(writer)
    except LedgerError:
        return []
