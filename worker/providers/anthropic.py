"""Anthropic (extra: anthropic).

Strands reads a reply through the SDK's `messages.stream` helper, whose accumulator
assumes the `usage` Anthropic itself always sends: an Anthropic-compatible server whose
`message_start` or `message_delta` has none crashed it (AttributeError on None). Here the
helper reads events whose missing usage is filled in first: unknown where the wire named
none (Strands then reports no usage, and the capacity gate keeps its estimate), else what
the stream named so far."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import (
    Delegate,
    load_class,
    malformed,
    require_model_id,
)
from strands_durable.worker.providers.told import hear

__all__ = ["ANTHROPIC_DEFAULT_MAX_TOKENS", "build"]

# Anthropic's API requires max_tokens; Strands has no default for it.
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = _usage_tolerant(load_class(cfg, "strands.models.anthropic", "AnthropicModel",
                                     "anthropic"))
    import anthropic  # load_class found it

    client_args: dict[str, Any] = {
        "max_retries": 0,  # call_agent owns retries
        # The SDK's defaults, and an ear for the limits each answer names (told.py).
        "http_client": anthropic.DefaultAsyncHttpxClient(event_hooks={"response": [hear]}),
    }
    if cfg.host:
        client_args["base_url"] = cfg.host
    return cast(
        Model,
        cls(
            client_args=client_args,
            model_id=cfg.model_id,
            max_tokens=cfg.max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
            params=sampling(cfg, with_max_tokens=False),
        ),
    )


@functools.cache
def _usage_tolerant(base: type[Any]) -> type[Any]:
    """Strands' AnthropicModel class `base`, its replies read with their usage filled in."""

    class UsageTolerantAnthropicModel(base):
        client: Any

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            model_id = str(self.config.get("model_id") or "") or None
            self.client = _Client(self.client, model_id)

    return UsageTolerantAnthropicModel


class _Client(Delegate):
    """An `AsyncAnthropic` whose `messages.stream` fills in a reply's missing usage."""

    def __init__(self, client: Any, model_id: str | None) -> None:
        super().__init__(client)
        self.messages = _Messages(client.messages, model_id)


class _Messages(Delegate):
    def __init__(self, messages: Any, model_id: str | None) -> None:
        super().__init__(messages)
        self._model_id = model_id

    def stream(self, **kwargs: Any) -> Any:
        if "output_format" in kwargs:  # the helper's own parameter (Strands sends none)
            return self._target.stream(**kwargs)
        # What `stream` sends is `create(stream=True)`'s request; its events go through
        # the same public helper, AsyncMessageStream, after their usage is filled in.
        return _StreamManager(lambda: self._target.create(stream=True, **kwargs),
                              self._model_id)


class _StreamManager:
    """As the SDK's AsyncMessageStreamManager: the request is sent on entering."""

    def __init__(self, request: Callable[[], Awaitable[Any]], model_id: str | None) -> None:
        self._request = request
        self._model_id = model_id
        self._stream: Any = None

    async def __aenter__(self) -> Any:
        import anthropic
        from anthropic.lib.streaming import AsyncMessageStream

        raw = _UsageFilled(await self._request(), self._model_id)
        # The helper iterates and closes what it is given; the rest (its response, the
        # tracing's observer) is the SDK's stream's.
        self._stream = AsyncMessageStream(cast(Any, raw), output_format=anthropic.NOT_GIVEN)
        return self._stream

    async def __aexit__(self, *_exc: object) -> None:
        if self._stream is not None:
            await self._stream.close()


@dataclass
class _Seen:
    """What the reply's usage named so far (output_tokens None: no count yet)."""

    output_tokens: int | None = None
    input_named: bool = False


class _UsageFilled(Delegate):
    """The SDK's raw stream of events (its response, close and tracing are its own), each
    `message_start` and `message_delta` with a usage the accumulator can read; a `data:`
    line that is not JSON is an error that names the provider."""

    def __init__(self, raw: Any, model_id: str | None) -> None:
        super().__init__(raw)
        self._model_id = model_id

    async def __aiter__(self) -> AsyncIterator[Any]:
        seen = _Seen()
        events = aiter(self._target)
        while True:
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            except ValueError as exc:  # a bare JSONDecodeError would name no provider
                if (named := malformed(exc, "anthropic", self._model_id)) is not None:
                    raise named from exc
                raise
            _fill_usage(event, seen)
            yield event


def _fill_usage(event: Any, seen: _Seen) -> None:
    from anthropic.types import MessageDeltaUsage, Usage

    kind = getattr(event, "type", None)
    if kind == "message_start" and (message := getattr(event, "message", None)) is not None:
        usage: Any = getattr(message, "usage", None)
        named_in, named_out = _count(usage, "input_tokens"), _count(usage, "output_tokens")
        if named_in is None and named_out is None:
            # Unknown, not zero: Strands then reports no usage at all.
            message.usage = Usage.construct(input_tokens=None, output_tokens=None)
            return
        # Strands reads both counts once either is named.
        usage.input_tokens, usage.output_tokens = named_in or 0, named_out or 0
        seen.output_tokens, seen.input_named = usage.output_tokens, True
    elif kind == "message_delta":
        usage = getattr(event, "usage", None)
        if usage is None:  # a delta's counts overwrite: what message_start named stands
            event.usage = MessageDeltaUsage.construct(output_tokens=seen.output_tokens)
            return
        named_in, named_out = _count(usage, "input_tokens"), _count(usage, "output_tokens")
        if named_in is None and named_out is None:
            usage.output_tokens = seen.output_tokens
            return
        usage.output_tokens = named_out if named_out is not None else seen.output_tokens or 0
        if not seen.input_named and named_in is None:
            usage.input_tokens = 0  # an output count and no input: Strands reads both
        seen.output_tokens, seen.input_named = usage.output_tokens, True


def _count(usage: Any, name: str) -> int | None:
    value = getattr(usage, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
