"""A Strands model around another, for the wrappers that change only how its requests are
made (worker/journal.py's journal, worker/capacity.py's shared capacity): configuration and
structured output go to the inner model as they are."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages

__all__ = ["ModelWrapper"]

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
