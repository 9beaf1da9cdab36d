"""The model endpoint, through the official ``openai`` client (imported on first use).

Transient failures (connection errors, timeouts, 408/409/429/5xx) are retried by the client with
exponential backoff and jitter, honouring ``retry-after``, up to ``max_retries``. What still fails
becomes a :class:`~supervisor.runtime.errors.ModelUnavailable` naming the URL tried (a refused
key is ``model_auth_failed``, an unknown model ``model_not_served``: see
:mod:`supervisor.runtime.model_errors`), and the run stops without losing its state. The client
is given the endpoint without the credentials a ``base_url`` may carry (see
:mod:`supervisor.runtime.endpoint`), so the client's own logs never show them.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from supervisor.runtime.config import LLMConfig
from supervisor.runtime.endpoint import credential_http_client
from supervisor.runtime.model_errors import connection_error, endpoint_shown, status_error

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class ModelToolCall:
    """One tool call the model asked for (arguments exactly as the model sent them)."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class AssistantTurn:
    """One model reply: text and/or tool calls, with token usage."""

    content: str | None
    tool_calls: tuple[ModelToolCall, ...]
    usage: dict[str, int] = field(default_factory=dict)

    def as_message(self) -> dict[str, Any]:
        """The assistant message as it goes back into the history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        return message


class ChatModel:
    """A chat-completions endpoint: the official client, created lazily, one per process."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._client: openai.OpenAI | None = None
        self._lock = threading.Lock()

    def _get_client(self) -> openai.OpenAI:
        with self._lock:
            if self._client is None:
                import openai

                endpoint = self.config.endpoint()
                options: dict[str, Any] = {}
                if endpoint.has_credentials:
                    options["http_client"] = credential_http_client(
                        endpoint, openai.DefaultHttpxClient, timeout=self.config.timeout
                    )
                self._client = openai.OpenAI(
                    api_key=self.config.resolved_api_key(),
                    base_url=endpoint.url,
                    timeout=self.config.timeout,
                    max_retries=self.config.max_retries,
                    **options,
                )
            return self._client

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> AssistantTurn:
        """Ask the model for its next turn.

        The history and the tool definitions are JSON data this runtime built, so they go in
        ``extra_body``, which the client sends as it is (and which takes precedence over the
        empty ``messages`` argument): the client's request transformation of typed parameters
        (aliases, dates, files: none of which chat messages or function tools use) would copy
        them unchanged at ~0.15 ms per message and ~0.1 ms per tool on every request.

        Raises:
            ModelConfigError: no API key is configured.
            ModelUnavailable: the endpoint failed after the retries, or refused the request.
        """
        import openai

        client = self._get_client()
        request: dict[str, Any] = {"model": self.config.model, "messages": ()}
        request["extra_body"] = body = {"messages": messages}
        if tools:
            body["tools"] = tools
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        try:
            if self.config.stream:
                return _turn_from_stream(
                    client.chat.completions.create(
                        **request, stream=True, stream_options={"include_usage": True}
                    )
                )
            response = client.chat.completions.create(**request)
        except openai.APIStatusError as exc:
            url = endpoint_shown(client)
            raise status_error(exc, url, self.config.model, self.config.max_retries) from None
        except openai.APIError as exc:
            url = endpoint_shown(client)
            raise connection_error(exc, url, self.config.max_retries) from None
        return _turn_from(response)


def _turn_from(response: Any) -> AssistantTurn:
    choice = response.choices[0]
    message = choice.message
    calls = tuple(
        ModelToolCall(
            call_id=call.id,
            name=call.function.name,
            arguments=call.function.arguments or "",
        )
        for call in (message.tool_calls or ())
        if getattr(call, "type", "function") == "function"
    )
    usage: dict[str, int] = {}
    if response.usage is not None:
        usage = {
            "prompt_tokens": int(response.usage.prompt_tokens or 0),
            "completion_tokens": int(response.usage.completion_tokens or 0),
            "total_tokens": int(response.usage.total_tokens or 0),
        }
    return AssistantTurn(content=message.content, tool_calls=calls, usage=usage)


def _turn_from_stream(chunks: Any) -> AssistantTurn:
    """Reassemble a streamed reply: text deltas joined, tool calls gathered by index."""
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    usage: dict[str, int] = {}
    for chunk in chunks:
        if chunk.usage is not None:
            usage = {
                "prompt_tokens": int(chunk.usage.prompt_tokens or 0),
                "completion_tokens": int(chunk.usage.completion_tokens or 0),
                "total_tokens": int(chunk.usage.total_tokens or 0),
            }
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for part in delta.tool_calls or ():
                call = calls.setdefault(part.index, {"id": "", "name": "", "arguments": []})
                if part.id:
                    call["id"] = part.id
                if part.function is not None:
                    if part.function.name:
                        call["name"] = part.function.name
                    if part.function.arguments:
                        call["arguments"].append(part.function.arguments)
    tool_calls = tuple(
        ModelToolCall(call["id"], call["name"], "".join(call["arguments"]))
        for _, call in sorted(calls.items())
    )
    return AssistantTurn(content="".join(text) or None, tool_calls=tool_calls, usage=usage)


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    """A tool-result message for the history."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def json_text(value: Any) -> str:
    """Compact JSON text as the model receives tool results."""
    return json.dumps(value, ensure_ascii=False)
