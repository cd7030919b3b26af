"""A Strands model around another, for the wrappers that change only how its requests are
made (worker/journal.py's journal, worker/capacity.py's shared capacity, `StopChecked`
below): configuration and structured output go to the inner model as they are.

`StopChecked` is the innermost of them, around every model `build_model` makes: a model
turn is a reply only if its stream ends with the provider's stop event (Strands'
`messageStop`). A stream that ends cleanly before it, an HTTP body that simply stops,
is a `ProviderStreamCutShort`, a transient error: the turn is asked again (in place,
then by the durable retries), never journaled, committed or handed to the next step. An
empty reply that did end with its stop event is kept, as the provider sent it.

Strands leaves the `messageStop` out when Anthropic's `message_stop` or Bedrock's
`messageStop` is missing; where it makes one up instead (OpenAI's and llama.cpp's missing
`finish_reason`, Gemini's `finishReason`, Ollama's `done`), the provider's module watches
the wire for it (worker/providers/).

`StopChecked` also shows a running step's turns to its live stream (worker/live.py): the
step sets `WATCHING` to a `TurnWatch` for its own model, and the loop that already reads
every event hands each one over, instead of one more generator layer around the model
(a streaming step's CPU, issue 27). Only turns asked of the provider reach it: the
journal replays its turns above it.

And it makes each streamed text and tool input well-formed Unicode: a JSON escape can carry
a lone surrogate (`"\\ud800"`), which no UTF-8 encoder takes, so the live stream's flush,
the commit and every later read of the session would fail on it; it becomes U+FFFD."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from strands_durable.errors import ProviderStreamCutShort

__all__ = ["WATCHING", "ModelWrapper", "StopChecked", "TurnWatch"]

T = TypeVar("T", bound=BaseModel)


class TurnSeen(Protocol):
    def see(self, event: StreamEvent) -> None: ...


class TurnWatch(Protocol):
    """Who watches the turns of one step's model (`model`), as they stream."""

    model: Model

    def next_turn(self) -> TurnSeen: ...


# Per step (a context variable follows the step's task and the tasks it starts): a
# compaction after the call, or another step's model, is not watched.
WATCHING: ContextVar[TurnWatch | None] = ContextVar("durable_turn_watch", default=None)


class ModelWrapper(Model):
    """Subclasses implement `stream`."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def update_config(self, **model_config: Any) -> None:
        self.inner.update_config(**model_config)

    def get_config(self) -> Any:
        return self.inner.get_config()

    def structured_output(self, output_model: type[T], prompt: Messages,
                          system_prompt: str | None = None,
                          **kwargs: Any) -> AsyncGenerator[dict[str, T | Any], None]:
        return self.inner.structured_output(output_model, prompt, system_prompt, **kwargs)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _ill_formed(value: object) -> bool:
    if isinstance(value, str):
        return not value.isascii() and _LONE_SURROGATE.search(value) is not None
    return isinstance(value, dict) and any(_ill_formed(v) for v in value.values())


def _mended(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {k: _mended(v) for k, v in value.items()}
    return value


def well_formed(event: StreamEvent) -> StreamEvent:
    """A content delta with each lone surrogate of its text or tool input as U+FFFD (the
    event itself when it has none, as nearly every one: one `isascii` a string)."""
    delta = event["contentBlockDelta"]
    body: Any = delta.get("delta")
    text = body.get("text") if isinstance(body, dict) else None
    if isinstance(text, str) and len(body) == 1 and text.isascii():
        return event
    if not _ill_formed(body):
        return event
    mended: Any = {**delta, "delta": _mended(body)}
    return {**event, "contentBlockDelta": mended}


class StopChecked(ModelWrapper):
    """A provider's model whose every turn must end with its stop event."""

    def __init__(self, inner: Model, provider: str, model_id: str | None = None) -> None:
        super().__init__(inner)
        self.provider = provider
        self.model_id = model_id

    def cut_short(self) -> ProviderStreamCutShort:
        return ProviderStreamCutShort(self.provider, self.model_id)

    async def stream(self, messages: Messages, tool_specs: list[ToolSpec] | None = None,
                     system_prompt: str | None = None,
                     **kwargs: Any) -> AsyncGenerator[StreamEvent, None]:
        stopped = False
        watch = WATCHING.get()
        if watch is not None and watch.model is not self:
            watch = None
        turn: TurnSeen | None = None
        try:
            async for event in self.inner.stream(messages, tool_specs, system_prompt,
                                                 **kwargs):
                if "contentBlockDelta" in event:
                    event = well_formed(event)
                stopped = stopped or "messageStop" in event
                if watch is not None and (turn is not None or "messageStart" not in event):
                    # Numbered at its first event from the wire: a request refused
                    # before any (a throttle the capacity wrapper asks again) is no turn,
                    # though Gemini's SDK yields a messageStart before it sends it.
                    turn = turn or watch.next_turn()
                    turn.see(event)
                yield event
        except Exception as exc:
            # A provider class that files every error it does not know under one of its
            # own (llama.cpp's "rate" in a message: a throttle) must not hide this one.
            if isinstance(exc.__cause__, ProviderStreamCutShort):
                raise exc.__cause__ from None
            raise
        if not stopped:
            raise self.cut_short()
