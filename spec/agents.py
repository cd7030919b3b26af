"""The spec's agents and providers, checked on the raw data before the schema: agent
ids (they name Redis keys), known providers; and `--provider`, which replaces every
provider of the spec. (`$ref` agents: agent_refs.py.)"""

from __future__ import annotations

from typing import Any

from strands_durable.errors import InvalidId, SpecError
from strands_durable.providers import PROVIDERS
from strands_durable.store.keys import check_name

__all__ = ["apply_provider", "check_agent_ids", "check_providers"]


def apply_provider(data: dict[str, Any], provider: str | None) -> None:
    """`--provider` wins everywhere: an offline run must not reach a per-agent provider."""
    if provider is None:
        return
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        runtime["provider"] = provider
    agents = data.get("agents")
    if isinstance(agents, dict):
        for agent in agents.values():
            if isinstance(agent, dict) and "provider" in agent:
                agent["provider"] = provider


def check_agent_ids(data: dict[str, Any], source: str) -> None:
    """An agent's id names its conversation's Redis key: bounded, no control characters."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return
    for agent_id in agents:
        try:
            check_name("agent id", str(agent_id))
        except InvalidId as exc:
            raise SpecError(source, "agents", str(exc)) from None


def check_providers(data: dict[str, Any], source: str) -> None:
    _check_provider(data["runtime"]["provider"], "runtime.provider", source)
    for agent_id, agent in data["agents"].items():
        if "provider" in agent:
            _check_provider(agent["provider"], f"agents.{agent_id}.provider", source)


def _check_provider(provider: str, path: str, source: str) -> None:
    if provider not in PROVIDERS:
        raise SpecError(
            source,
            path,
            f"unsupported provider {provider!r}; supported: {', '.join(PROVIDERS)}",
        )


