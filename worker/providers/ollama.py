"""Ollama at `host` (extra: ollama).

Ollama's stream stops with a line marked `done` (its counts, its `done_reason`). Strands
ends the turn whichever line came last, or none; here a stream whose last line is not
`done` ends in `ProviderStreamCutShort` instead."""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator
from typing import Any, cast

from strands.models.model import Model

from strands_durable.errors import ProviderStreamCutShort
from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import guarded_transport, load_class, require_model_id


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = _done_watched(load_class(cfg, "strands.models.ollama", "OllamaModel", "ollama"))
    # ollama's AsyncClient hands these to its httpx client.
    client_args = {"transport": guarded_transport(cfg)} if cfg.guarded else None
    return cast(Model, cls(cfg.host, model_id=cfg.model_id, ollama_client_args=client_args,
                           **sampling(cfg)))


@functools.cache
def _done_watched(base: type[Any]) -> type[Any]:
    """Strands' OllamaModel class `base`, its streams required to end with a `done` line.

    Strands formats the stream's last line as the turn's `metadata` (and no metadata
    when no line came): that line must be `done`."""

    class DoneWatchedOllamaModel(base):
        def _cut_short(self) -> ProviderStreamCutShort:
            return ProviderStreamCutShort("ollama", self.config.get("model_id"))

        def format_chunk(self, event: dict[str, Any], **kwargs: Any) -> Any:
            if event.get("chunk_type") == "metadata" and not getattr(event["data"], "done",
                                                                    False):
                raise self._cut_short()
            return super().format_chunk(event, **kwargs)

        async def stream(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            lines = False
            async for event in super().stream(*args, **kwargs):
                lines = lines or "metadata" in event
                yield event
            if not lines:
                raise self._cut_short()

    return DoneWatchedOllamaModel
