"""A llama.cpp server at `host`. It needs only httpx, a core dependency: no extra."""

from __future__ import annotations

from typing import Any, cast

import httpx
from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import guarded_transport, load_class


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
    return cast(Model, model)
