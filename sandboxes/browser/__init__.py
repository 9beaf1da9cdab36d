"""The Browser Use worker: a separate process whose every browser action is gated.

``from sandboxes.browser import BrowserTask`` starts one. Names load on first use and nothing
here imports ``browser_use``; only the worker process (``sandboxes.browser.worker``) and the
gate (``sandboxes.browser.gate``) do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from supervisor.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "BrowserTask": "sandboxes.browser.task",
    "BrowserTaskHandle": "sandboxes.browser.task",
    "BrowserPolicy": "sandboxes.browser.policy",
    "BrowserRule": "sandboxes.browser.policy",
    "PolicyDecision": "sandboxes.browser.policy",
    "BrowserWorkerConfig": "sandboxes.browser.config",
    "BrowserDenial": "sandboxes.browser.config",
    "BrowserRunResult": "sandboxes.browser.config",
    "ChromiumNotFound": "sandboxes.browser.config",
    "find_chromium": "sandboxes.browser.config",
}

__all__ = [
    "BrowserDenial",
    "BrowserPolicy",
    "BrowserRule",
    "BrowserRunResult",
    "BrowserTask",
    "BrowserTaskHandle",
    "BrowserWorkerConfig",
    "ChromiumNotFound",
    "PolicyDecision",
    "find_chromium",
]

if TYPE_CHECKING:
    from sandboxes.browser.config import (
        BrowserDenial,
        BrowserRunResult,
        BrowserWorkerConfig,
        ChromiumNotFound,
        find_chromium,
    )
    from sandboxes.browser.policy import BrowserPolicy, BrowserRule, PolicyDecision
    from sandboxes.browser.task import BrowserTask, BrowserTaskHandle


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
