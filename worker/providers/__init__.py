"""Model providers: a `ModelConfig` (from the spec's runtime) -> a Strands `Model`.

One module per provider, named as the provider (bedrock.py, openai.py, ...), each with
`build(cfg)`; the names are the one list in strands_durable/providers.py, which the
spec's validation accepts. A provider's SDK is an optional extra, imported only when
that provider builds a model; a missing SDK becomes a `ProviderError` that says which
extra to install. `is_transient` decides which provider errors are worth retrying.

Every model `build_model` makes is `StopChecked` (worker/model_wrapper.py): a reply
stream that ends before its stop event is a transient `ProviderStreamCutShort`, never a
reply; a provider whose Strands class makes a stop up where the wire had none watches
the wire itself (openai.py, gemini.py, ollama.py, llamacpp.py).
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import cast

from strands.models.model import Model

from strands_durable.errors import ProviderError
from strands_durable.provider_policy import ProviderPolicy, current_provider_policy
from strands_durable.providers import PROVIDERS
from strands_durable.spec.provider_hosts import (
    granted_hosts,
    judge_host,
    model_problem,
    region_problem,
)
from strands_durable.worker.model_wrapper import StopChecked
from strands_durable.worker.providers.config import Builder, ModelConfig
from strands_durable.worker.providers.transient import is_transient

__all__ = ["BUILDERS", "SUPPORTED_PROVIDERS", "ModelConfig", "build_model", "is_transient"]

# Every provider name has its module here; importing one imports no SDK.
BUILDERS: dict[str, Builder] = {
    name: cast(Builder, importlib.import_module(f"{__name__}.{name}").build)
    for name in PROVIDERS
}
SUPPORTED_PROVIDERS: tuple[str, ...] = PROVIDERS


def build_model(cfg: ModelConfig, policy: ProviderPolicy | None = None) -> StopChecked:
    """A fresh Strands model for `cfg` (the provider's, as `.inner`, its every turn
    checked for its stop event); raises `ProviderError` on any config problem, and on a
    host or region the provider host policy does not allow (the same decision as at
    submit: a spec that reached Redis some other way is held to it here)."""
    build = BUILDERS.get(cfg.provider)
    if build is None:
        raise ProviderError(
            f"agent {cfg.agent_id!r}: unknown provider {cfg.provider!r}; "
            f"supported: {', '.join(SUPPORTED_PROVIDERS)}"
        )
    policy = policy or current_provider_policy()
    if cfg.provider == "bedrock" and cfg.region:
        problem = region_problem(cfg.region)
        if problem is not None:
            raise ProviderError(f"agent {cfg.agent_id!r}: runtime.region: {problem}")
    verdict = judge_host(cfg.provider, cfg.host, policy.hosts(cfg.provider), granted_hosts())
    if not verdict.allowed:
        raise ProviderError(f"agent {cfg.agent_id!r}: runtime.host: {verdict.problem}")
    problem = model_problem(cfg.provider, cfg.model_id, cfg.host)
    if problem is not None:
        raise ProviderError(f"agent {cfg.agent_id!r}: model_id: {problem}")
    model = build(replace(cfg, guarded=verdict.guarded))
    return StopChecked(model, cfg.provider, cfg.model_id or _model_id(model))


def _model_id(model: Model) -> str | None:
    """The model id a provider's class chose itself (Gemini's default), if any."""
    config = model.get_config()
    model_id = config.get("model_id") if isinstance(config, dict) else None
    return model_id if isinstance(model_id, str) and model_id else None
