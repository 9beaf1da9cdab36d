"""What the model sees of a browser task's ``sensitive_data``: placeholders, in every encoding.

browser-use replaces each raw value with ``<secret>name</secret>`` in the messages it sends
to the model. A value the browser put into a URL reaches those messages percent-encoded (the
tab list, the page URL, links), which browser-use does not recognise. `hide_encoded_values`
extends browser-use's message filter so the usual encoded forms of each value
(:func:`supervisor.redact.encoded_forms`) become the same placeholder.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sandboxes.browser.config import SensitiveData
from supervisor.redact import encoded_forms


class SensitiveFilterUnavailable(RuntimeError):
    """The installed browser-use has no message filter to extend; the worker does not start
    with ``sensitive_data`` rather than let encoded values reach the model."""

    code = "sensitive_filter_unavailable"


def placeholder_forms(data: SensitiveData) -> tuple[tuple[str, str], ...]:
    """``(form, placeholder)`` for every encoded form of every value in ``data``, longest
    form first (so a shorter form never splits a longer one)."""
    pairs: dict[str, str] = {}
    for key, content in data.items():
        named = content.items() if isinstance(content, dict) else [(key, content)]
        for name, value in named:
            for form in encoded_forms(value) if value else ():
                pairs.setdefault(form, f"<secret>{name}</secret>")
    return tuple(sorted(pairs.items(), key=lambda pair: (-len(pair[0]), pair[0])))


def replace_forms(text: str, pairs: tuple[tuple[str, str], ...]) -> str:
    """``text`` with every form in ``pairs`` replaced by its placeholder."""
    for form, placeholder in pairs:
        if form in text:
            text = text.replace(form, placeholder)
    return text


def hide_encoded_values(agent: Any, data: SensitiveData) -> None:
    """Make ``agent`` (a browser-use ``Agent``) show the model placeholders for encoded
    sensitive values too.

    Raises:
        SensitiveFilterUnavailable: ``data`` is not empty and the agent's message manager has
            no ``_filter_sensitive_data`` (another browser-use version than the one pinned).
    """
    if not data:
        return
    manager: Any = getattr(agent, "_message_manager", None)
    original: Callable[[Any], Any] | None = getattr(manager, "_filter_sensitive_data", None)
    if original is None:
        raise SensitiveFilterUnavailable(
            "browser-use's message filter for sensitive_data was not found; "
            "install the pinned browser-use version"
        )
    pairs = placeholder_forms(data)

    def filtered(message: Any) -> Any:
        message = original(message)
        content = message.content
        if isinstance(content, str):
            message.content = replace_forms(content, pairs)
        elif isinstance(content, list):
            for part in content:
                text = getattr(part, "text", None)
                if isinstance(text, str):
                    part.text = replace_forms(text, pairs)
        return message

    manager._filter_sensitive_data = filtered
