"""Anthropic (extra: anthropic)."""

from __future__ import annotations

from typing import Any, cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import load_class, require_model_id
from strands_durable.worker.providers.told import hear

# Anthropic's API requires max_tokens; Strands has no default for it.
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.anthropic", "AnthropicModel", "anthropic")
    import anthropic  # load_class found it

    client_args: dict[str, Any] = {
        "max_retries": 0,  # call_agent owns retries
        # The SDK's defaults, and an ear for the limits each answer names (told.py).
        "http_client": anthropic.DefaultAsyncHttpxClient(event_hooks={"response": [hear]}),
    }
    if cfg.host:
        client_args["base_url"] = cfg.host
    return cast(
        Model,
        cls(
            client_args=client_args,
            model_id=cfg.model_id,
            max_tokens=cfg.max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
            params=sampling(cfg, with_max_tokens=False),
        ),
    )
