"""``supervisor notify run``: the headless webhook sender, one line per attempt."""

from __future__ import annotations

import time

from supervisor.cli.output import echo_line
from supervisor.cli.proposals import open_ledger
from supervisor.ledger.errors import LedgerError
from supervisor.services.webhooks import AttemptReport, RetryPolicy, WebhookSender


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
            try:
                while True:
                    try:
                        sender.deliver_due()
                        probe.wait(poll)
                    except LedgerError as error:  # keep going: the ledger may come back
                        echo_line(f"error [{error.code}]: {error.message}", err=True)
                        time.sleep(poll)
            except KeyboardInterrupt:
                echo_line("Stopped.")
            finally:
                probe.close()
        finally:
            sender.close()
