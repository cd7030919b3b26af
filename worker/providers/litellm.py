"""LiteLLM, optionally through a proxy at `host` (extra: litellm)."""

from __future__ import annotations

from typing import cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import load_class, require_model_id


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.litellm", "LiteLLMModel", "litellm")
    client_args = {"api_base": cfg.host} if cfg.host else {}
    return cast(Model, cls(client_args=client_args, model_id=cfg.model_id, params=sampling(cfg)))
