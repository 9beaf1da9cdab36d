"""What a failed model request means, said with the endpoint it tried and what to do.

The ``openai`` client retries connection errors, timeouts and 408/409/429/5xx answers; other
answers fail at once. This module turns what is left into a typed error that names the URL
tried (the endpoint without the credentials a ``base_url`` may carry), the cause, and whether
retrying could help: a wrong key (401/403) is :class:`ModelAuthFailed`, a model the endpoint
does not serve (404) is :class:`ModelNotServed`, anything else :class:`ModelUnavailable`. The
endpoint's own error text is untrusted: it is cut short and its hidden characters escaped.
"""

from __future__ import annotations

from typing import Any

from supervisor.runtime.errors import ModelAuthFailed, ModelNotServed, ModelUnavailable
from supervisor.services.rendering import visible_escapes

#: HTTP answers the client retries (its ``_should_retry``), besides connection errors.
RETRIED_STATUSES = frozenset({408, 409, 429})
_EXCERPT_CHARS = 200
_KEPT = "the run kept its state and can be run again on the same thread."


def endpoint_shown(client: Any) -> str:
    """The URL the client sends requests to, as it may be shown (never with credentials)."""
    return str(getattr(client, "base_url", "") or "the default OpenAI endpoint").rstrip("/")


def status_error(exc: Any, url: str, model: str, max_retries: int) -> ModelUnavailable:
    """The typed error for an HTTP error answer (``openai.APIStatusError``)."""
    status = int(exc.status_code)
    said = _excerpt(_server_message(exc))
    if status in (401, 403):
        return ModelAuthFailed(
            f"The model endpoint {url} refused the API key (HTTP {status}){said}. It was not "
            "retried: the same key fails the same way.",
            hint="Set OPENAI_API_KEY (or api_key in with_llm_config) to a key this endpoint "
            f"accepts, then run again; {_KEPT}",
            status=status, url=url,
        )  # fmt: skip
    if status == 404:
        return ModelNotServed(
            f"The model endpoint {url} answered HTTP 404 for model {model!r}{said}.",
            hint="Check the model name (GET /models lists what the endpoint serves) and that the "
            f"base URL ends where the API starts (often /v1); {_KEPT}",
            status=status, url=url, model=model,
        )  # fmt: skip
    retried = status in RETRIED_STATUSES or status >= 500
    tries = f" after {max_retries} retries" if retried else ""
    return ModelUnavailable(
        f"The model endpoint {url} answered HTTP {status}{tries}{said}.",
        hint="Check the endpoint, the model name and the request limits; " + _KEPT,
        status=status, url=url,
    )  # fmt: skip


def connection_error(exc: BaseException, url: str, max_retries: int) -> ModelUnavailable:
    """The typed error for a request that got no answer (``openai.APIConnectionError``)."""
    cause = _root_cause(exc)
    return ModelUnavailable(
        f"Could not reach the model endpoint {url} ({cause}) after {max_retries} retries.",
        hint="Check OPENAI_BASE_URL (or base_url) and that the server is up and listening; "
        + _KEPT,
        url=url,
    )


def _root_cause(exc: BaseException) -> str:
    """The innermost cause's message (``Connection refused``, ``timed out``...), escaped."""
    seen: BaseException = exc
    while seen.__cause__ is not None or seen.__context__ is not None:
        seen = seen.__cause__ or seen.__context__  # type: ignore[assignment]
    text = str(seen).strip() or type(seen).__name__
    if type(exc).__name__ == "APITimeoutError":
        text = "timed out"
    return visible_escapes(text[:_EXCERPT_CHARS])


def _server_message(exc: Any) -> str:
    """The endpoint's own words: ``error.message`` of an OpenAI-style body, else the client's."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(getattr(exc, "message", "") or "")


def _excerpt(message: str) -> str:
    message = " ".join(message.split()).rstrip(".")
    if not message:
        return ""
    if len(message) > _EXCERPT_CHARS:
        message = message[:_EXCERPT_CHARS] + "..."
    return f": {visible_escapes(message)}"
