"""What a supervised agent process is doing now, written to its process row as it changes.

The turn engine traces every event through :class:`~supervisor.runtime.trace.RunTracer`; while
a :class:`StepWriter` listens (``supervisor run``, the demo agents), the tracer tells it the
kind of each event as it happens, and the writer turns them into the process's current step: a
run starting or a tool result in means the model is being asked (``model_call``), a tool call
means that tool is running (``tool_call``); the host says itself when it waits for a human
(``waiting_for_approval``). Steps are written from the writer's own thread, at most one write per
``min_interval`` (the last step always lands), so a fast loop of tool calls costs no more than a
heartbeat; each write also renews the process's lease.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from supervisor.ledger.models import ProcessStep
from supervisor.ledger.service import ApprovalLedger

StepListener = Callable[[str, str | None], None]

_listeners: list[StepListener] = []


def report(kind: str, tool: str | None) -> None:
    """Called by the tracer for each event; cheap when nobody listens."""
    for listener in _listeners:
        listener(kind, tool)


@contextlib.contextmanager
def listening(listener: StepListener) -> Iterator[None]:
    """Give ``listener`` every traced event kind (and tool) of this process for the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


class StepWriter:
    """Keeps a process row's current step up to date from the events of its runs.

    Args:
        ledger: The ledger holding the process row.
        process_id: The row.
        model: What a ``model_call`` step names (the configured model).
        min_interval: Least seconds between two writes.
    """

    def __init__(
        self, ledger: ApprovalLedger, process_id: str, model: str, min_interval: float = 0.25
    ) -> None:
        self.ledger = ledger
        self.process_id = process_id
        self.model = model
        self.min_interval = min_interval
        self._step: ProcessStep | None = None
        self._written: ProcessStep | None = None
        self._changed = threading.Event()
        self._write_lock = threading.Lock()  # one write at a time, the step read inside it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write_loop, name="steps", daemon=True)

    def set(self, kind: str, detail: str = "") -> ProcessStep:
        """The process is now doing ``kind`` (about ``detail``); written soon. Returns the
        step (the same one while nothing changes, so its elapsed time keeps counting)."""
        current = self._step
        if current is not None and (current.kind, current.detail) == (kind, detail):
            return current
        self._step = step = ProcessStep(kind=kind, detail=detail, since=datetime.now(UTC))
        self._changed.set()
        return step

    def write_with(
        self, kind: str, detail: str, write: Callable[[ProcessStep], None]
    ) -> ProcessStep:
        """Set the step and write it now with the caller's ``write`` (a status along with it).

        Ordered with the writer thread's writes: a step it read before this one cannot land
        after it (the row would say ``waiting_for_approval`` with the tool step of before).
        """
        with self._write_lock:
            step = self.set(kind, detail)
            write(step)
            self._written = step
        return step

    def on_event(self, kind: str, tool: str | None) -> None:
        """A traced event: what it says the process does next."""
        if kind == "tool_call" and tool:
            self.set("tool_call", tool)
        elif kind in ("run", "tool_result"):
            self.set("model_call", self.model)

    @contextlib.contextmanager
    def running(self) -> Iterator[StepWriter]:
        """Listen to this process's traced events and write steps for the block."""
        self._thread.start()
        try:
            with listening(self.on_event):
                yield self
        finally:
            self._stop.set()
            self._changed.set()
            self._thread.join(timeout=5)

    def _write_loop(self) -> None:
        while not self._stop.is_set():
            self._changed.wait()
            self._changed.clear()
            self._write()
            self._stop.wait(self.min_interval)
        self._write()

    def _write(self) -> None:
        with self._write_lock:
            step = self._step
            if step is None or step is self._written:
                return
            try:
                self.ledger.heartbeat(self.process_id, step=step)
                self._written = step
            except Exception:  # a ledger hiccup: the next change or heartbeat writes it
                self._changed.set()
