"""What a provider builds a model from: the spec's runtime and agent settings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strands.models.model import Model

from strands_durable.spec.script import ScriptConfig

__all__ = ["Builder", "ModelConfig", "sampling"]


@dataclass(frozen=True)
class ModelConfig:
    provider: str
    agent_id: str
    model_id: str | None = None
    host: str | None = None
    region: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    script: ScriptConfig | None = None
    # A keyless server's host reached only through the network guard (set by
    # build_model from the provider host policy, never by a spec).
    guarded: bool = False


# A provider module's `build`: a fresh Strands model, or ProviderError on a config problem.
Builder = Callable[[ModelConfig], Model]


def sampling(cfg: ModelConfig, *, with_max_tokens: bool = True) -> dict[str, Any]:
    """The sampling settings that are set, so provider defaults apply to the rest."""
    values: dict[str, Any] = {"temperature": cfg.temperature, "top_p": cfg.top_p}
    if with_max_tokens:
        values["max_tokens"] = cfg.max_tokens
    return {key: value for key, value in values.items() if value is not None}
