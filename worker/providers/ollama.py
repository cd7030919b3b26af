"""Ollama at `host` (extra: ollama)."""

from __future__ import annotations

from typing import cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import guarded_transport, load_class, require_model_id


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.ollama", "OllamaModel", "ollama")
    # ollama's AsyncClient hands these to its httpx client.
    client_args = {"transport": guarded_transport(cfg)} if cfg.guarded else None
    return cast(Model, cls(cfg.host, model_id=cfg.model_id, ollama_client_args=client_args,
                           **sampling(cfg)))
