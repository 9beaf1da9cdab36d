"""``supervisor notify run``: the headless webhook sender, one line per attempt."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import open_ledger
from supervisor.ledger.errors import LedgerError
from supervisor.services.webhooks import AttemptReport, RetryPolicy, WebhookSender


class _Interrupt:
    """Ctrl-C that never cuts a ledger transaction short: between waits it is only noted (the
    current pass finishes and commits), while waiting it ends the wait at once."""

    def __init__(self) -> None:
        self.requested = False
        self.waiting = False

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
        if self.waiting:
            raise KeyboardInterrupt

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = signal.signal(signal.SIGINT, self)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


def attempt_line(report: AttemptReport) -> str:
    """What ``notify run`` prints for one attempt."""
    delivery = report.delivery
    status = f"HTTP {report.status}" if report.status is not None else "no answer"
    subject = f"proposal {delivery.proposal_id}" if delivery.proposal_id else "test event"
    line = (
        f"{report.state:<9} {delivery.delivery_id[:12]}  {subject}  to {report.webhook_url}  "
        f"attempt {report.attempt}  {status}"
    )
    if report.retry_at is not None:
        line += f"  retry at {report.retry_at.isoformat(timespec='seconds')}"
    if report.error:
        line += f"  {report.error}"
    return line


def run_sender(
    db_url: str | None,
    *,
    once: bool,
    poll: float,
    max_attempts: int,
    retry_base: float,
    timeout: float,
) -> None:
    """Deliver until interrupted, waking on ledger changes (``once``: one pass)."""
    retry = RetryPolicy(max_attempts=max_attempts, base_seconds=retry_base)
    with open_ledger(db_url, must_exist=True) as ledger:
        sender = WebhookSender(
            ledger, retry=retry, timeout=timeout, on_attempt=lambda r: echo_line(attempt_line(r))
        )
        try:
            if once:
                sender.deliver_due()
                return
            probe = ledger.repository.change_probe()
            interrupt = _Interrupt()
            try:
                with interrupt.installed():
                    while not interrupt.requested:
                        try:
                            sender.deliver_due()
                            if interrupt.requested:
                                break
                            interrupt.waiting = True
                            probe.wait(poll)
                        except LedgerError as error:  # keep going: the ledger may come back
                            echo_line(f"error [{error.code}]: {error.message}", err=True)
                            interrupt.waiting = True
                            time.sleep(poll)
                        finally:
                            interrupt.waiting = False
                echo_line("Stopped.")
            except KeyboardInterrupt:
                echo_line("Stopped.")
            finally:
                probe.close()
        finally:
            sender.close()
