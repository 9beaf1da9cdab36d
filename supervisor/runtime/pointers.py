"""Who an offloaded result's pointer belongs to: the agent thread (and user) of the run.

The runtime sets the scope around each run and resume; :mod:`supervisor.runtime.offload` issues
pointers to it and reads only pointers issued to it. A context variable carries it, so the
expansion tools need no extra argument the model could fill in.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PointerScope:
    """Who a pointer is issued to, and who may read it back: one agent thread and its user.

    The empty scope (:data:`HOST_SCOPE`) is host code outside any run; pointers issued there
    are readable there only, never from a run.
    """

    agent_id: str = ""
    thread_id: str = ""
    user_id: str | None = None


HOST_SCOPE = PointerScope()
_SCOPE: ContextVar[PointerScope] = ContextVar("supervisor_pointer_scope", default=HOST_SCOPE)


@contextmanager
def pointer_scope(agent_id: str, thread_id: str, user_id: str | None) -> Iterator[PointerScope]:
    """Issue and read pointers as this agent thread and user while the block runs.

    The runtime wraps each run and each resume in it, so the expansion tools a model calls can
    only read results offloaded to that same thread.
    """
    scope = PointerScope(agent_id, thread_id, user_id)
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)


def current_scope() -> PointerScope:
    """The scope pointers are issued to and read from right now."""
    return _SCOPE.get()
