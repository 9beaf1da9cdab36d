"""Subscriptions to a service's changes: the one mechanism every service publishes through."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

ChangeT = TypeVar("ChangeT")


class Listeners(Generic[ChangeT]):
    """Thread-safe subscribers of one kind of change.

    Listeners are called outside the lock, from whichever thread publishes (the UI reaches its
    own thread through ``post_message``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[ChangeT], None]] = []

    def subscribe(self, listener: Callable[[ChangeT], None]) -> None:
        """Call ``listener`` after every change."""
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[ChangeT], None]) -> None:
        """Stop calling ``listener``; unknown listeners are ignored."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def publish(self, change: ChangeT) -> None:
        """Call every listener with ``change``."""
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener(change)
