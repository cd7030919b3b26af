"""OpenAI, or any OpenAI-compatible server at `host` (extra: openai)."""

from __future__ import annotations

import os
from typing import Any, cast

from strands.models.model import Model

from strands_durable.errors import ProviderError
from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import load_class, require_model_id


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.openai", "OpenAIModel", "openai")
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
