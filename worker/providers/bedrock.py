"""Amazon Bedrock (extra: bedrock)."""

from __future__ import annotations

from typing import Any, cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import load_class, require_model_id


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.bedrock", "BedrockModel", "bedrock")
    kwargs: dict[str, Any] = {"model_id": cfg.model_id, **sampling(cfg)}
    if cfg.region:
        kwargs["region_name"] = cfg.region
    if cfg.host:  # e.g. a VPC (PrivateLink) endpoint
        kwargs["endpoint_url"] = cfg.host
    return cast(Model, cls(**kwargs))
