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
the wire for it (worker/providers/)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from strands_durable.errors import ProviderStreamCutShort

__all__ = ["ModelWrapper", "StopChecked"]

T = TypeVar("T", bound=BaseModel)


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
        try:
            async for event in self.inner.stream(messages, tool_specs, system_prompt,
                                                 **kwargs):
                stopped = stopped or "messageStop" in event
                yield event
        except Exception as exc:
            # A provider class that files every error it does not know under one of its
            # own (llama.cpp's "rate" in a message: a throttle) must not hide this one.
            if isinstance(exc.__cause__, ProviderStreamCutShort):
                raise exc.__cause__ from None
            raise
        if not stopped:
            raise self.cut_short()
