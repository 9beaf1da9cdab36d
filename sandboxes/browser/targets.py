"""Resolving a browser-use action to the concrete target a human approves.

A resolved action carries the proposal's arguments (the action's validated parameters, plus
the element they point at and the URL a navigation loads, with typed passwords masked) and its
execution target (worker, tab, page URL and origin, element). Resolving the same action again
after approval and comparing the hashes is how the gate knows page and element still match.

browser-use objects are typed ``Any`` here: the worker is the only caller and the library ships
no type information.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any
from urllib.parse import quote_plus

from pydantic import BaseModel, ConfigDict

from sandboxes.browser.policy import NAVIGATION_ACTIONS, url_origin
from sandboxes.browser.urls import NavigationURLRefused, read_url, with_placeholders
from supervisor.canonical import args_hash, canonical_hash

_KEPT_ATTRIBUTES = (
    "id",
    "name",
    "type",
    "role",
    "href",
    "action",
    "method",
    "formaction",
    "placeholder",
    "aria-label",
    "title",
    "alt",
    "for",
    "autocomplete",
)
_TEXT_LIMIT = 200
_SEARCH_ENGINES = {
    "duckduckgo": "https://duckduckgo.com/?q={}",
    "google": "https://www.google.com/search?q={}&udm=14",
    "bing": "https://www.bing.com/search?q={}",
}
_SECRET_PLACEHOLDER = re.compile(r"<secret>[^<]*</secret>")


class ResolvedAction(BaseModel):
    """One action, bound to what it touches.

    Attributes:
        action_name: The browser-use action (``navigate``, ``click``, ``input``, ...).
        tool_name: The ledger tool name, ``browser.<action>``.
        schema_hash: Hash of the action's parameter schema (its contract).
        arguments: What the reviewer approves; hashed into the approval.
        execution_target: Worker, tab, page URL and origin, element; hashed too.
        page_url: The URL of the tab the action runs in.
        target_url: For navigations, the URL that will load: the serialised WHATWG URL (the
            model's text as written only when the gate refuses to read it).
    """

    model_config = ConfigDict(frozen=True)

    action_name: str
    tool_name: str
    schema_hash: str
    arguments: dict[str, Any]
    execution_target: dict[str, Any]
    page_url: str
    target_url: str | None = None

    @property
    def args_hash(self) -> str:
        """The hash a claim must present (``supervisor.canonical.args_hash``)."""
        return args_hash(self.tool_name, self.schema_hash, self.arguments, self.execution_target)

    def run_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """The parameters the action runs with: a ``navigate`` goes to `target_url`.

        The worker never hands browser-use the model's URL text, only the URL the gate read
        and the reviewer approved, so Chromium cannot read it differently.
        """
        if "url" in params and self.target_url is not None:
            return {**params, "url": self.target_url}
        return params


def describe_element(node: Any, index: int) -> dict[str, Any]:
    """A reviewer-readable, comparable description of a DOM node from the selector map.

    Includes the tag, identifying attributes, visible text, an XPath, the bounding box in CSS
    pixels (rounded) and the backend node id (stable for the life of the node, so a re-rendered
    element no longer matches its approval).
    """
    attributes: dict[str, str] = dict(getattr(node, "attributes", None) or {})
    kept = {key: str(attributes[key]) for key in _KEPT_ATTRIBUTES if key in attributes}
    if attributes.get("type", "").lower() != "password" and "value" in attributes:
        kept["value"] = str(attributes["value"])[:_TEXT_LIMIT]
    try:
        text = str(node.get_all_children_text()).strip()
    except Exception:  # the DOM node API is best effort; the other fields still bind
        text = ""
    description: dict[str, Any] = {
        "index": index,
        "tag": str(getattr(node, "tag_name", "") or getattr(node, "node_name", "")).lower(),
        "attributes": kept,
        "text": " ".join(text.split())[:_TEXT_LIMIT],
        "xpath": str(getattr(node, "xpath", "")),
        "node": int(getattr(node, "backend_node_id", 0) or 0),
        "frame": getattr(node, "frame_id", None),
    }
    rect = getattr(node, "absolute_position", None)
    if rect is not None:
        description["box"] = {
            "x": round(float(rect.x)),
            "y": round(float(rect.y)),
            "width": round(float(rect.width)),
            "height": round(float(rect.height)),
        }
    return description


def is_password_field(element: dict[str, Any] | None) -> bool:
    """True when the element takes a secret (``type=password`` or password autocomplete)."""
    if element is None:
        return False
    attributes = element.get("attributes") or {}
    field_type = str(attributes.get("type", "")).lower()
    autocomplete = str(attributes.get("autocomplete", "")).lower()
    return field_type == "password" or "password" in autocomplete


def mask_text(text: str, key: bytes) -> dict[str, Any]:
    """A masked stand-in for typed text that still binds the exact value.

    The HMAC key lives only in the worker's memory, so the digest cannot be brute-forced from
    the ledger, yet the approval covers exactly this text and no other.
    """
    digest = hmac.new(key, text.encode("utf-8"), hashlib.sha256).hexdigest()
    return {"masked": True, "length": len(text), "hmac_sha256": digest}


def navigation_url(action_name: str, params: dict[str, Any]) -> str | None:
    """The URL a navigation action would load (``None`` for other actions)."""
    if action_name not in NAVIGATION_ACTIONS:
        return None
    if "url" in params:
        return str(params["url"])
    template = _SEARCH_ENGINES.get(str(params.get("engine", "duckduckgo")).lower())
    if template is None:
        return None
    return template.format(quote_plus(str(params.get("query", ""))))


async def resolve_action(
    action_name: str,
    params: dict[str, Any],
    *,
    param_model: Any,
    browser_session: Any,
    worker_id: str,
    mask_key: bytes,
) -> ResolvedAction:
    """Resolve one action against the browser's current state.

    Args:
        action_name: The registered action name.
        params: The parameters the model sent (before sensitive-data substitution).
        param_model: The action's pydantic parameter model, or ``None``.
        browser_session: The worker's ``BrowserSession``.
        worker_id: The worker's id (the ``browser`` of the execution target).
        mask_key: The worker's secret for masking typed passwords.

    Returns:
        The action with its arguments and execution target.
    """
    if param_model is not None:
        validated = param_model.model_validate(params)
        arguments: dict[str, Any] = validated.model_dump(mode="json")
        schema_hash = canonical_hash(param_model.model_json_schema())
    else:
        arguments = dict(params)
        schema_hash = canonical_hash({})
    page_url = str(await browser_session.get_current_page_url())
    focus = getattr(browser_session, "agent_focus_target_id", None)
    tab = str(focus)[-4:] if focus else None

    element: dict[str, Any] | None = None
    index = arguments.get("index")
    if isinstance(index, int) and index > 0:
        node = await browser_session.get_element_by_index(index)
        element = describe_element(node, index) if node is not None else {"index": index}

    if action_name == "input" and isinstance(arguments.get("text"), str):
        text = arguments["text"]
        if is_password_field(element) and not _SECRET_PLACEHOLDER.fullmatch(text):
            arguments["text"] = mask_text(text, mask_key)

    target_url = navigation_url(action_name, arguments)
    if target_url is not None:
        target_url, target_origin = _read_target(target_url)
        arguments["target_url"] = target_url
        arguments["target_origin"] = target_origin

    execution_target: dict[str, Any] = {
        "browser": worker_id,
        "tab": tab,
        "url": page_url,
        "origin": url_origin(page_url),
        "element": element,
    }
    return ResolvedAction(
        action_name=action_name,
        tool_name=f"browser.{action_name}",
        schema_hash=schema_hash,
        arguments=arguments,
        execution_target=execution_target,
        page_url=page_url,
        target_url=target_url,
    )


def _read_target(text: str) -> tuple[str, str | None]:
    """The URL that will load and its origin; the text as written, no origin, if refused.

    A refused URL is never run (the policy refuses it with the same reading); keeping the
    text as written shows the reviewer and the trace what the model sent.
    """
    try:
        read = read_url(text)
    except NavigationURLRefused:
        return text, None
    return with_placeholders(read.href), read.origin
