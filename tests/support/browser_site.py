"""The browser tests' site and plan helpers: the same ones the demo ships."""

from __future__ import annotations

from supervisor.demo.browser_site import (
    BrowserPlan,
    BrowserSite,
    SeenRequest,
    agent_output,
    element_index,
    latest_page_state,
)

__all__ = [
    "BrowserPlan",
    "BrowserSite",
    "SeenRequest",
    "agent_output",
    "element_index",
    "latest_page_state",
]
