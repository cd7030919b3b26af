"""Where a spec's model requests may go (pure: no resolution, no sockets).

A spec's `runtime.host` picks the endpoint every agent's provider calls. For a provider
that sends a key (openai, anthropic, gemini, bedrock, litellm) that endpoint receives the
fleet's credentials, so it must be the provider's own endpoint, or one the operator lists
(DURABLE_<PROVIDER>_HOSTS), or one the user of `durable run` grants on their own machine
(`--allow-host`). A keyless server (ollama, llamacpp) may be any public host, reached
through the network guard (checked and pinned where the socket opens, redirects
included); a private or loopback one only where listed, granted, or the provider's own
default (what the fleet reaches with no host at all).

The same decision runs at submit (`check_provider_hosts`: SpecError naming the field and
the setting) and again where a worker builds the model (`judge_host`), so a spec written
to Redis directly gains nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from strands_durable.addresses import literal_address, refused_address
from strands_durable.errors import SpecError
from strands_durable.provider_policy import (
    Origin,
    ProviderPolicy,
    current_provider_policy,
    host_setting,
    parse_base_url,
    shown,
)
from strands_durable.spec.model import Spec

__all__ = ["KEYED_PROVIDERS", "KEYLESS_PROVIDERS", "HostVerdict", "Origin", "check_provider_hosts",
           "grant_hosts", "granted_hosts", "judge_host", "parse_base_url"]

# Providers whose SDK sends the fleet's credentials with every request.
KEYED_PROVIDERS = frozenset({"openai", "anthropic", "gemini", "bedrock", "litellm"})
# Providers that call a model server without credentials.
KEYLESS_PROVIDERS = frozenset({"ollama", "llamacpp"})

# Each keyed provider's own endpoint (https, default port, any path). Bedrock's depends on
# the region; litellm has none of its own (it routes by model id when no host is given).
OFFICIAL_HOSTS: dict[str, tuple[str, ...]] = {
    "openai": ("https://api.openai.com",),
    "anthropic": ("https://api.anthropic.com",),
    "gemini": ("https://generativelanguage.googleapis.com",),
}
_BEDROCK_HOST = re.compile(r"bedrock-runtime(-fips)?\.[a-z0-9-]{1,40}\.amazonaws\.com(\.cn)?")
# Where a keyless provider's SDK goes when the spec names no host: naming it is no new reach.
DEFAULT_HOSTS: dict[str, tuple[str, ...]] = {
    "ollama": ("http://localhost:11434", "http://127.0.0.1:11434"),
    "llamacpp": ("http://localhost:8080", "http://127.0.0.1:8080"),
}
# An AWS region is one DNS label (us-east-1); anything else could steer the endpoint.
_REGION = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")

# `durable run --allow-host`, in that command's own context (its steps inherit it).
_GRANTED: ContextVar[tuple[str, ...]] = ContextVar("durable_granted_hosts", default=())


def grant_hosts(urls: tuple[str, ...]) -> None:
    _GRANTED.set(urls)


def granted_hosts() -> tuple[str, ...]:
    return _GRANTED.get()


@dataclass(frozen=True)
class HostVerdict:
    """`allowed`; `guarded`: connect only through the network guard (public addresses);
    `problem`: why not, one line naming what would allow it."""

    allowed: bool
    guarded: bool = False
    problem: str = ""


def _listed(origin: Origin, entries: tuple[str, ...]) -> bool:
    for entry in entries:
        allowed = parse_base_url(entry)
        if isinstance(allowed, Origin) and allowed.covers(origin):
            return True
    return False


def _official(provider: str, origin: Origin) -> bool:
    if provider == "bedrock":
        return (origin.scheme, origin.port) == ("https", 443) and \
            _BEDROCK_HOST.fullmatch(origin.host) is not None
    return _listed(origin, OFFICIAL_HOSTS.get(provider, ()))


def _local_name(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")


def judge_host(provider: str, host: str | None, listed: tuple[str, ...],
               granted: tuple[str, ...] = ()) -> HostVerdict:
    """May `provider`'s requests go to `host` (None: the provider's own default)?"""
    if not host or (provider not in KEYED_PROVIDERS and provider not in KEYLESS_PROVIDERS):
        return HostVerdict(True)  # the SDK's own endpoint, or a provider with no network
    setting = host_setting(provider)
    origin = parse_base_url(host)
    if isinstance(origin, str):
        return HostVerdict(False, problem=f"{shown(host)!r}: {origin}")
    if _listed(origin, listed) or _listed(origin, granted):
        return HostVerdict(True)
    if provider in KEYED_PROVIDERS:
        if _official(provider, origin):
            return HostVerdict(True)
        own = ", ".join(OFFICIAL_HOSTS.get(provider, ())) or (
            "bedrock-runtime.<region>.amazonaws.com" if provider == "bedrock" else
            "the endpoint its model id names")
        return HostVerdict(False, problem=(
            f"{provider} requests carry the fleet's credentials and go only to {own} or to a "
            f"host the operator lists in {setting}, not to {shown(host)}; leave runtime.host "
            "out, or ask the operator to list it (durable run on your own machine: "
            "--allow-host URL)"))
    if _listed(origin, DEFAULT_HOSTS.get(provider, ())):
        return HostVerdict(True)
    address = literal_address(origin.host)
    if _local_name(origin.host) or (address is not None and refused_address(address)):
        return HostVerdict(False, problem=(
            f"{shown(host)} is a private, loopback or link-local address, which a spec's "
            f"{provider} host may reach only where the operator lists it in {setting} "
            "(durable run on your own machine: --allow-host URL)"))
    return HostVerdict(True, guarded=True)


# LiteLLM routes a request by its model id's prefix, and many routes send OPENAI_API_KEY
# to their own endpoints (or to a URL written in the id). Without a listed proxy a spec
# may use only these, whose endpoints are fixed and whose keys are their own.
LITELLM_ROUTES = ("openai/", "anthropic/", "gemini/", "bedrock/")


def model_problem(provider: str, model_id: str | None, host: str | None) -> str | None:
    """Why `provider` may not be asked for `model_id` (a litellm id picks an endpoint)."""
    if provider != "litellm" or not model_id:
        return None
    if "://" in model_id or "\\" in model_id or any(not ch.isprintable() for ch in model_id):
        return f"{shown(model_id)!r}: a litellm model id names no URL"
    if not host and not model_id.startswith(LITELLM_ROUTES):
        return (f"{shown(model_id)!r}: without a runtime.host the operator lists "
                f"(DURABLE_LITELLM_HOSTS), a litellm model id starts with one of "
                f"{', '.join(LITELLM_ROUTES)} (other routes send the fleet's keys to "
                "endpoints of their own)")
    return None


def region_problem(region: str) -> str | None:
    if _REGION.fullmatch(region) is None:
        return f"{shown(region)!r} is not an AWS region name (e.g. us-east-1)"
    return None


def _providers(spec: Spec) -> Iterator[tuple[str, list[str]]]:
    """Each provider the spec's agents use, with the agents that use it."""
    users: dict[str, list[str]] = {}
    for agent_id, agent in spec.agents.items():
        users.setdefault(agent.provider or spec.runtime.provider, []).append(agent_id)
    yield from users.items()


def check_provider_hosts(spec: Spec, source: str, policy: ProviderPolicy | None = None,
                         granted: tuple[str, ...] | None = None) -> None:
    """Refuse a `runtime.host` (or `runtime.region`) a provider of the spec may not call."""
    policy = policy or current_provider_policy()
    granted = granted_hosts() if granted is None else granted
    runtime = spec.runtime
    for provider, agents in _providers(spec):
        if provider == "bedrock" and runtime.region:
            problem = region_problem(runtime.region)
            if problem is not None:
                raise SpecError(source, "runtime.region", problem)
        verdict = judge_host(provider, runtime.host, policy.hosts(provider), granted)
        if not verdict.allowed:
            raise SpecError(source, "runtime.host",
                            f"agents {', '.join(map(repr, agents))} ({provider}): "
                            f"{verdict.problem}")
        for path, model_id in _model_ids(spec, provider):
            problem = model_problem(provider, model_id, runtime.host)
            if problem is not None:
                raise SpecError(source, path, problem)


def _model_ids(spec: Spec, provider: str) -> Iterator[tuple[str, str | None]]:
    """Each model id the spec asks `provider` for, with where it is written."""
    for agent_id, agent in spec.agents.items():
        if (agent.provider or spec.runtime.provider) != provider:
            continue
        if agent.model_id:
            yield f"agents.{agent_id}.model_id", agent.model_id
        else:
            yield "runtime.model_id", spec.runtime.model_id
    compaction = spec.context_policy.compaction if spec.context_policy else None
    if compaction is not None and compaction.summarization_model:
        yield "context_policy.compaction.summarization_model", compaction.summarization_model
