"""OpenAI, or any OpenAI-compatible server at `host` (extra: openai).

Strands reports a chat-completions stream that ended without a `finish_reason` as a
whole reply (`end_turn`); here its client's streams must carry one, or they end in
`ProviderStreamCutShort` (worker/providers/sdk.py). The SDK itself stops at `[DONE]`
and says nothing when it is missing; a stream that gave its `finish_reason` and then
lost its usage chunk or `[DONE]` lost nothing of the reply.

Strands opens a new `AsyncOpenAI` client for every request (an httpx client may not
cross event loops): about 90 ms of CPU each, mostly its TLS context. Here each model
keeps one client per event loop; a changed OPENAI_API_KEY gets a new one. (Connections
are not kept either way: the SDK closes a stream's response at `[DONE]`, before the
chunked body's end is read, so httpx drops the connection.)"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

from strands.models.model import Model

from strands_durable.errors import ProviderError
from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import (
    StopWatched,
    Watched,
    load_class,
    require_model_id,
)
from strands_durable.worker.providers.told import hear


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = _finish_watched(load_class(cfg, "strands.models.openai", "OpenAIModel", "openai"))
    # The SDK reads OPENAI_API_KEY itself (the key never enters our config); it would
    # only complain at the first request, so fail at build time with a clear message.
    if not os.environ.get("OPENAI_API_KEY"):
        raise ProviderError(
            f"agent {cfg.agent_id!r}: provider 'openai' needs OPENAI_API_KEY in the "
            "environment (any value for a local OpenAI-compatible server)"
        )
    # max_retries=0: call_agent owns retries, the SDK's own would multiply them.
    client_args: dict[str, Any] = {"max_retries": 0}
    if cfg.host:
        client_args["base_url"] = cfg.host
    return cast(Model, cls(client_args=client_args, model_id=cfg.model_id, params=sampling(cfg)))


@functools.cache
def _finish_watched(base: type[Any]) -> type[Any]:
    """Strands' OpenAIModel class `base`, its streams watched for a `finish_reason`."""

    class FinishWatchedOpenAIModel(base):
        @asynccontextmanager
        async def _get_client(self) -> AsyncIterator[Any]:
            model_id = str(self.config.get("model_id") or "") or None

            def watch(response: Any, request: dict[str, Any]) -> Any:
                if not request.get("stream"):
                    return response
                return StopWatched(response, _finished, "openai", model_id)

            yield Watched(self._loop_client(), ("chat", "completions", "create"), watch)

        def _loop_client(self) -> Any:
            """This loop's client, made on its first request (or when the key changed)."""
            import openai

            clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[str, Any]] = \
                self.__dict__.setdefault("_durable_clients", weakref.WeakKeyDictionary())
            loop = asyncio.get_running_loop()
            key = _key_fingerprint()
            held = clients.get(loop)
            if held is not None and held[0] == key:
                return held[1]
            # A replaced client is not closed: a turn still streaming may hold it.
            args = self._resolve_client_args()
            if "http_client" not in args:  # the SDK's defaults, and an ear for its limits
                args["http_client"] = openai.DefaultAsyncHttpxClient(
                    event_hooks={"response": [hear]})
            client = _data_events_only()(**args)
            clients[loop] = (key, client)
            return client

    return FinishWatchedOpenAIModel


@functools.cache
def _data_events_only() -> type[Any]:
    """`openai.AsyncOpenAI`, its streams reading only the SSE events that carry data."""
    import openai
    from openai._streaming import ServerSentEvent, SSEDecoder

    class DataEventsDecoder(SSEDecoder):
        def decode(self, line: str) -> ServerSentEvent | None:
            sse = super().decode(line)
            # A block of only `retry:` or `id:` (valid SSE, and the SDK repeats a seen
            # `id` on every later blank line) has no data: the SDK would json-decode "".
            return sse if sse is None or sse.data else None

    class DataEventsAsyncOpenAI(openai.AsyncOpenAI):
        def _make_sse_decoder(self) -> SSEDecoder:
            return DataEventsDecoder()

    return DataEventsAsyncOpenAI


def _key_fingerprint() -> str:
    """Which OPENAI_API_KEY a client was made with, without keeping the key itself."""
    return hashlib.sha256(os.environ.get("OPENAI_API_KEY", "").encode()).hexdigest()


def _finished(chunk: Any) -> bool:
    """A ChatCompletionChunk that ends its choice (any choice: Strands reads the first)."""
    return any(getattr(choice, "finish_reason", None)
               for choice in getattr(chunk, "choices", None) or ())
