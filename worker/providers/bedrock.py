"""Amazon Bedrock (extra: bedrock)."""

from __future__ import annotations

import sys
from typing import Any, cast

from strands.models.model import Model

from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import load_class, require_model_id

# What Strands' BedrockModel sets when given no botocore Config (it sets only its user
# agent on one it is given).
_STRANDS_READ_TIMEOUT_S = 120


def build(cfg: ModelConfig) -> Model:
    require_model_id(cfg)
    cls = load_class(cfg, "strands.models.bedrock", "BedrockModel", "bedrock")
    from botocore.config import Config  # load_class found boto3, so botocore is there

    read_timeout = getattr(sys.modules[cls.__module__], "DEFAULT_READ_TIMEOUT",
                           _STRANDS_READ_TIMEOUT_S)
    kwargs: dict[str, Any] = {
        "model_id": cfg.model_id,
        **sampling(cfg),
        # One request per attempt (botocore counts `max_attempts` as retries, hence
        # `total_max_attempts`): call_agent owns retries, and botocore's own (3 by
        # default) would hide a ThrottlingException from the fleet's capacity and multiply
        # ours. Strands merges its user agent into this Config.
        "boto_client_config": Config(read_timeout=read_timeout,
                                     retries={"total_max_attempts": 1, "mode": "standard"}),
    }
    if cfg.region:
        kwargs["region_name"] = cfg.region
    if cfg.host:  # e.g. a VPC (PrivateLink) endpoint
        kwargs["endpoint_url"] = cfg.host
    return cast(Model, cls(**kwargs))
