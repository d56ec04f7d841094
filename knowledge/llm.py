"""The model provider: an OpenAI-compatible chat-completions server named by WORKSPACE_LLM_* (DESIGN §6 "Models").

A small typed facade over the official `openai` client, shared by the knowledge-base answerer and
the model agent. Every way a provider fails (refused connection, a hang or a slow answer, 429,
5xx, a body that is not the protocol, no choices, a stream cut short) comes out as one
`ProviderError` whose `reason` is one readable sentence for the person waiting. The API key goes
to the provider in the Authorization header and nowhere else: it is in no repr, no message, no
log line.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import openai
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from knowledge.llm_bounds import BoundedTransport, ModelServerRefused, ResponseBounds, refusal_in

logger = logging.getLogger(__name__)

# Servers without keys (Ollama, llama.cpp's server) still need something in the header the client sends.
NO_KEY = "no-key"
Message = Mapping[str, Any]


@dataclass(frozen=True)
class ProviderConfig:
    """Where the model is and how long it may take; the key never shows in a repr."""

    base_url: str
    model: str
    api_key: str = field(default="", repr=False)
    connect_timeout: float = 5.0
    timeout: float = 60.0
    max_tokens: int = 800
    # What one answer may be, raw: a line of it, the whole of it, one tool call's arguments (llm_bounds.py).
    line_bytes: int = 1024 * 1024
    response_bytes: int = 8 * 1024 * 1024
    tool_argument_bytes: int = 1024 * 1024

    @classmethod
    def from_settings(cls) -> ProviderConfig | None:
        """The configured provider, or None when WORKSPACE_LLM_BASE_URL is empty (no model)."""
        if not settings.WORKSPACE_LLM_BASE_URL:
            return None
        return cls(
            base_url=settings.WORKSPACE_LLM_BASE_URL,
            model=settings.WORKSPACE_LLM_MODEL,
            api_key=settings.WORKSPACE_LLM_API_KEY,
            connect_timeout=settings.WORKSPACE_LLM_CONNECT_TIMEOUT,
            timeout=settings.WORKSPACE_LLM_TIMEOUT,
            max_tokens=settings.WORKSPACE_LLM_MAX_TOKENS,
            line_bytes=settings.WORKSPACE_LLM_MAX_LINE_BYTES,
            response_bytes=settings.WORKSPACE_LLM_MAX_RESPONSE_BYTES,
            tool_argument_bytes=settings.WORKSPACE_LLM_MAX_TOOL_ARGUMENT_BYTES,
        )


def check_provider_settings() -> None:
    """Start-up check: a provider is named whole (an http(s) URL and a model) or not at all."""
    base_url = settings.WORKSPACE_LLM_BASE_URL
    if not base_url:
        if settings.KNOWLEDGE_ANSWERER == "knowledge.model_answers.ModelAnswerer":
            raise ImproperlyConfigured(
                "KNOWLEDGE_ANSWERER names the model answerer, so WORKSPACE_LLM_BASE_URL must name a provider."
            )
        return
    if urlsplit(base_url).scheme not in ("http", "https") or not urlsplit(base_url).hostname:
        raise ImproperlyConfigured(
            "WORKSPACE_LLM_BASE_URL must be an http:// or https:// URL, such as http://127.0.0.1:11434/v1."
        )
    if not settings.WORKSPACE_LLM_MODEL:
        raise ImproperlyConfigured("WORKSPACE_LLM_BASE_URL is set, so WORKSPACE_LLM_MODEL must name the model to use.")
    if settings.WORKSPACE_LLM_TIMEOUT <= 0 or settings.WORKSPACE_LLM_CONNECT_TIMEOUT <= 0:
        raise ImproperlyConfigured("WORKSPACE_LLM_TIMEOUT and WORKSPACE_LLM_CONNECT_TIMEOUT must be above 0 seconds.")
    if settings.WORKSPACE_LLM_MAX_TOKENS < 1:
        raise ImproperlyConfigured("WORKSPACE_LLM_MAX_TOKENS must be at least 1.")


class ProviderError(Exception):
    """The provider gave no usable answer. `reason` is one sentence a person can read (it names
    no key and quotes nothing the provider said); `kind` is for code and logs: unreachable,
    timeout, rate_limited, refused, server_error, invalid, too_large. `retry_after` is in seconds when the
    provider said (429 with Retry-After)."""

    def __init__(self, reason: str, *, kind: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        self.retry_after = retry_after


@dataclass(frozen=True)
class ToolCall:
    """A function the model asks to call; `arguments` is the JSON text as the model wrote it
    (perhaps malformed: reading it is the caller's business)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """One whole answer of the model: its text and the tool calls it asks for."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"


class ChatProvider:
    """Chat completions from the configured provider, streamed or not, with `tools` when given.

    No retries: a person waits on the answer, and the callers have a fallback that is immediate.
    """

    def __init__(self, config: ProviderConfig) -> None:
        self.config = config
        bounds = ResponseBounds(
            seconds=config.timeout, line_bytes=config.line_bytes, response_bytes=config.response_bytes
        )
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or NO_KEY,
            max_retries=0,
            # The deadline over the raw bytes, and the caps on them, are the transport's (llm_bounds.py).
            timeout=openai.Timeout(config.timeout, connect=config.connect_timeout),
            http_client=httpx.Client(transport=BoundedTransport(bounds)),
        )

    def __repr__(self) -> str:
        return f"ChatProvider({self.config!r})"

    def complete(
        self, *, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = (), max_tokens: int | None = None
    ) -> Completion:
        """The whole answer at once."""
        with failures_mapped(self.config):
            response = self._client.chat.completions.create(**self._request(messages, tools, max_tokens))
            choices = getattr(response, "choices", None)
            if not choices or getattr(choices[0], "message", None) is None:
                raise ProviderError("The model server answered without any text.", kind="invalid")
            message = choices[0].message
            calls = tuple(
                ToolCall(
                    id=call.id or f"call_{index}", name=call.function.name, arguments=call.function.arguments or ""
                )
                for index, call in enumerate(message.tool_calls or ())
                if getattr(call, "function", None) is not None
            )
            return Completion(
                content=message.content or "", tool_calls=calls, finish_reason=choices[0].finish_reason or "stop"
            )

    def stream(
        self, *, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] = (), max_tokens: int | None = None
    ) -> Iterator[str | Completion]:
        """Each piece of text as it arrives, then the whole `Completion` (the text again, and the
        tool calls assembled from their deltas). Raises `ProviderError` at any point; a stream
        that ends without saying it finished is cut short, and so an error too."""
        deadline = time.monotonic() + self.config.timeout
        with failures_mapped(self.config):
            chunks = self._client.chat.completions.create(**self._request(messages, tools, max_tokens), stream=True)
            try:
                yield from _assembled(chunks, deadline, self.config)
            finally:
                chunks.close()

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]], max_tokens: int | None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": [dict(message) for message in messages],
            "max_tokens": max_tokens or self.config.max_tokens,
        }
        if tools:
            request["tools"] = [dict(tool) for tool in tools]
        return request


def _assembled(chunks: Any, deadline: float, config: ProviderConfig) -> Iterator[str | Completion]:
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in chunks:
        if time.monotonic() > deadline:
            raise _too_slow(config)
        for choice in getattr(chunk, "choices", None) or ():
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
                yield delta.content
            for call in (delta.tool_calls if delta is not None else None) or ():
                slot = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.id or slot["id"]
                if call.function is not None:
                    slot["name"] += call.function.name or ""
                    slot["arguments"] += call.function.arguments or ""
                    if len(slot["arguments"]) > config.tool_argument_bytes or len(slot["name"]) > _NAME_CHARS:
                        raise _tool_call_too_large(config)
            finish = choice.finish_reason or finish
    if finish is None:
        raise ProviderError("The model server stopped in the middle of its answer.", kind="invalid")
    yield Completion(
        content="".join(text),
        tool_calls=tuple(
            ToolCall(id=slot["id"] or f"call_{index}", name=slot["name"], arguments=slot["arguments"])
            for index, slot in sorted(calls.items())
        ),
        finish_reason=finish,
    )


# A tool's name is a word (the tools' names are short); a longer one is not a call of ours.
_NAME_CHARS = 200


def _tool_call_too_large(config: ProviderConfig) -> ProviderError:
    return ProviderError(
        f"The model asked for a tool call with more than {config.tool_argument_bytes:,} bytes of arguments.",
        kind="too_large",
    )


def _too_slow(config: ProviderConfig) -> ProviderError:
    return ProviderError(f"The model server did not answer within {config.timeout:g} seconds.", kind="timeout")


@contextmanager
def failures_mapped(config: ProviderConfig) -> Iterator[None]:
    """Turns whatever the client raises into a `ProviderError`, logged without the key.

    AttributeError and TypeError count: the client builds its objects without validating them, so
    a body of the wrong shape fails only when read.
    """
    try:
        yield
    except ProviderError as error:
        logger.warning("model provider failed (%s): %s", error.kind, error.reason)
        raise
    except ModelServerRefused as refused:
        logger.warning("model provider failed (%s): %s", refused.kind, refused.reason)
        raise ProviderError(refused.reason, kind=refused.kind) from None
    except (openai.OpenAIError, ValueError, AttributeError, TypeError) as error:
        mapped = _mapped(error, config)
        logger.warning(
            "model provider failed (%s): %s [%s: %s]",
            mapped.kind,
            mapped.reason,
            type(error).__name__,
            _scrubbed(str(error), config),
        )
        raise mapped from None


def _mapped(error: BaseException, config: ProviderConfig) -> ProviderError:
    refused = refusal_in(error)
    if refused is not None:
        return ProviderError(refused.reason, kind=refused.kind)
    if isinstance(error, openai.APITimeoutError):
        return _too_slow(config)
    if isinstance(error, openai.APIConnectionError):
        return ProviderError("The model server could not be reached.", kind="unreachable")
    if isinstance(error, openai.RateLimitError):
        wait = retry_after_seconds(error.response.headers)
        asks = f" and asks to wait {wait:.0f} seconds" if wait is not None else ""
        return ProviderError(
            f"The model server is rate-limiting requests{asks}.", kind="rate_limited", retry_after=wait
        )
    if isinstance(error, openai.AuthenticationError | openai.PermissionDeniedError):
        return ProviderError("The model server refused the configured API key.", kind="refused")
    if isinstance(error, openai.NotFoundError):
        return ProviderError(
            f"The model server does not serve the model {config.model!r} at the configured address.", kind="refused"
        )
    if isinstance(error, openai.APIStatusError):
        if error.status_code >= 500:
            return ProviderError(f"The model server failed (HTTP {error.status_code}).", kind="server_error")
        return ProviderError(f"The model server refused the request (HTTP {error.status_code}).", kind="refused")
    return ProviderError("The model server sent something that is not a chat-completions answer.", kind="invalid")


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """`retry-after-ms`, or `Retry-After` in seconds or as an HTTP date; None when absent or unreadable."""
    lowered = {name.lower(): value for name, value in headers.items()}
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return max(0.0, float(lowered[name]) / divisor)
        except (KeyError, ValueError):
            continue
    try:
        moment = email.utils.parsedate_to_datetime(lowered["retry-after"])
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, (moment - timezone.now()).total_seconds())


def _scrubbed(text: str, config: ProviderConfig) -> str:
    """The client's own message for the log, short, with the key cut out should it echo it."""
    if config.api_key:
        text = text.replace(config.api_key, "[key]")
    return text[:300]


def chat_provider() -> ChatProvider | None:
    """The provider the settings name, or None (then callers answer without a model)."""
    config = ProviderConfig.from_settings()
    return ChatProvider(config) if config is not None else None
