"""What the browser has actually loaded: every tab's current URL and its committed history.

The gate reads a navigation target before it runs, but a page can still move the tab (a
redirect, a link, a form target, a script, ``window.open``). These are read back from Chromium
itself after every action and before the next one, so a load that ended off the allowlist is
found even when browser-use's watchdog has already sent the tab back to ``about:blank``.

browser-use objects are typed ``Any`` here: the library ships no type information.
"""

from __future__ import annotations

import contextlib
from typing import Any

CHROMIUM_ERROR_PAGE = "chrome-error://chromewebdata/"
"""The URL of Chromium's own "this site can't be reached" page: no server's content."""


class LoadsUnknown(RuntimeError):
    """Chromium did not say which pages it has loaded (the gate then stops the worker)."""

    code = "navigation_unverifiable"


async def loaded_urls(browser_session: Any) -> list[str]:
    """The URL of every tab and of every entry in each tab's history, oldest first.

    Raises:
        LoadsUnknown: The list of tabs could not be read from Chromium.
    """
    try:
        reply = await browser_session.cdp_client.send.Target.getTargets()
        infos = list(reply["targetInfos"])
    except Exception as exc:  # any CDP failure: the caller fails closed
        raise LoadsUnknown(f"could not list the browser's tabs ({type(exc).__name__})") from exc
    urls: list[str] = []
    for info in infos:
        if info.get("type") != "page":
            continue
        urls.extend(await _history(browser_session, str(info.get("targetId", ""))))
        urls.append(str(info.get("url", "")))
    return list(dict.fromkeys(urls))


async def _history(browser_session: Any, target_id: str) -> list[str]:
    """The committed history of one tab; empty when its session is not (yet) attached.

    The tab's current URL is checked either way, so a missing history only loses loads the
    tab has since left.
    """
    with contextlib.suppress(Exception):
        session = await browser_session.get_or_create_cdp_session(target_id, focus=False)
        reply = await session.cdp_client.send.Page.getNavigationHistory(
            session_id=session.session_id
        )
        return [str(entry.get("url", "")) for entry in reply.get("entries", [])]
    return []
