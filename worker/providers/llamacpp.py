"""A llama.cpp server at `host`. It needs only httpx, a core dependency: no extra.

Strands reads llama.cpp's chat-completions stream (SSE, read whole) and reports one that
ended without a `finish_reason` as a whole reply; here the client checks each such
answer for one, and raises `ProviderStreamCutShort` where none came. Read whole, a reply
is bounded (MAX_REPLY_BYTES, as a spec-named host's is by its transport)."""

from __future__ import annotations

import json
from typing import Any, cast

import httpx
from strands.models.model import Model

from strands_durable.errors import ProviderStreamCutShort
from strands_durable.worker.providers import sdk
from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import (
    ProviderStreamMalformed,
    guarded_transport,
    load_class,
)
from strands_durable.worker.tools.net_guard import CappedBody

CHAT_PATH = "/v1/chat/completions"  # the one Strands' LlamaCppModel streams from


def build(cfg: ModelConfig) -> Model:
    cls = load_class(cfg, "strands.models.llamacpp", "LlamaCppModel", None)
    kwargs: dict[str, Any] = {"params": sampling(cfg)}
    if cfg.host:
        kwargs["base_url"] = cfg.host
    if cfg.model_id:  # llama.cpp serves one model; Strands defaults the id to "default"
        kwargs["model_id"] = cfg.model_id
    model = cls(**kwargs)
    if cfg.guarded:
        # LlamaCppModel takes no client arguments: replace its (unused) client with one
        # that connects through the network guard, same base URL and timeout.
        model.client = httpx.AsyncClient(base_url=model.client.base_url,
                                         timeout=model.client.timeout,
                                         transport=guarded_transport(cfg), trust_env=False)
    hooks = model.client.event_hooks
    hooks["response"] = [*hooks["response"], _finish_check(model.config.get("model_id"))]
    model.client.event_hooks = hooks
    return cast(Model, model)


def _finish_check(model_id: str | None) -> Any:
    """An httpx response hook: a streamed chat completion must hold a `finish_reason`."""

    async def check(response: httpx.Response) -> None:
        request = response.request
        if response.status_code != 200 or not request.url.path.endswith(CHAT_PATH):
            return
        try:
            streamed = json.loads(request.content).get("stream") is True
        except (ValueError, AttributeError, httpx.RequestNotRead):
            streamed = False
        if not streamed:
            return
        limit = sdk.MAX_REPLY_BYTES
        response.stream = CappedBody(cast(httpx.AsyncByteStream, response.stream), limit,
                                     lambda: ProviderStreamMalformed(
                                         "llamacpp", model_id,
                                         f"longer than {limit:,} bytes, read whole"))
        await response.aread()
        if not any(_finished(line) for line in response.text.splitlines()):
            raise ProviderStreamCutShort("llamacpp", model_id)

    return check


def _finished(line: str) -> bool:
    """An SSE line whose chunk ends its choice."""
    if not line.startswith("data:"):
        return False
    try:
        chunk = json.loads(line[5:])
    except ValueError:
        return False
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    return any(isinstance(choice, dict) and choice.get("finish_reason")
               for choice in choices or ())
