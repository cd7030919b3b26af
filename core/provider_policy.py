"""The operator's policy for model providers (never a spec's): where a provider's requests
may go besides its own endpoint (DURABLE_<PROVIDER>_HOSTS), and the account limits the
fleet keeps to together (DURABLE_CAPACITY_*). Part of DurableSettings
(strands_durable.settings re-exports these names)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["HOST_PROVIDERS", "CapacityLimit", "CapacityPolicy", "ProviderPolicy",
           "current_provider_policy", "host_setting"]


def _names(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


class CapacityLimit(BaseModel):
    """An account limit the operator declares for a provider's model (at a host): every
    worker of the fleet keeps to it together (worker/capacity.py). `model` and `host`
    left out match every model and every host; the most specific entry wins."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1, max_length=64)
    model: str | None = Field(default=None, max_length=256)
    host: str | None = Field(default=None, max_length=2048)
    rpm: int = Field(default=0, ge=0, le=10_000_000)  # requests per minute; 0: not declared
    tpm: int = Field(default=0, ge=0, le=10_000_000_000)  # input + output tokens a minute
    in_flight: int = Field(default=0, ge=0, le=100_000)  # requests at once


@lru_cache(maxsize=16)
def _parse_limits(value: str) -> tuple[CapacityLimit, ...]:
    if not value.strip():
        return ()
    try:
        return tuple(TypeAdapter(list[CapacityLimit]).validate_json(value))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value"
        raise ValueError(f"{where}: {first['msg']} (expected a JSON list like "
                         '[{"provider": "openai", "model": "gpt-4o", "rpm": 500}])') from None


class CapacityPolicy(BaseSettings):
    """The fleet's shared provider capacity: limits declared per provider and model
    (DURABLE_CAPACITY_LIMITS, a JSON list of CapacityLimit), learned from throttling
    where none is declared, and how long a step may wait for its turn."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # Off: every worker calls providers on its own (throttles are then transient errors).
    capacity_enabled: bool = True
    # A JSON list of CapacityLimit: [{"provider": "openai", "model": "gpt-4o", "rpm": 500,
    # "tpm": 200000, "in_flight": 20}, ...]; empty: nothing declared (limits are learned).
    capacity_limits: str = ""
    # A model request that waited this long for capacity (the shared backoff, the limits)
    # fails its step, naming the key and the limit.
    capacity_max_wait_s: float = Field(default=300.0, gt=0, le=86_400, allow_inf_nan=False)
    # A request in flight holds a lease for this long, renewed while it runs: a worker
    # that dies gives its share back within it.
    capacity_lease_s: float = Field(default=30.0, ge=1, le=3600, allow_inf_nan=False)

    @field_validator("capacity_limits")
    @classmethod
    def _limits_list(cls, value: str) -> str:
        _parse_limits(value)
        return value

    @property
    def declared_limits(self) -> tuple[CapacityLimit, ...]:
        return _parse_limits(self.capacity_limits)

    def declared(self, provider: str, model: str, host: str) -> CapacityLimit | None:
        """The most specific declared limit for the key, if any."""
        best: tuple[int, CapacityLimit] | None = None
        for limit in self.declared_limits:
            if limit.provider != provider or (limit.model not in (None, "*", model)) \
                    or (limit.host not in (None, host)):
                continue
            rank = (limit.model not in (None, "*")) * 2 + (limit.host is not None)
            if best is None or rank > best[0]:
                best = (rank, limit)
        return best[1] if best else None


# The providers whose endpoint a spec's `runtime.host` may name, each with its setting.
HOST_PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "litellm", "ollama", "llamacpp")


def host_setting(provider: str) -> str:
    """The variable that lists where `provider`'s requests may go besides its default."""
    return f"DURABLE_{provider.upper()}_HOSTS"


class ProviderPolicy(BaseSettings):
    """Where the fleet's model requests may go besides each provider's own endpoint, set
    by the operator (never by a spec). A provider that sends a key (openai, anthropic,
    gemini, bedrock, litellm) sends it to a spec's `runtime.host` only if it is listed
    here; a keyless server's host (ollama, llamacpp) may be any public address, and a
    private or loopback one only if listed. Comma-separated base URLs; a listed URL
    allows its scheme, host and port, and the paths under its path. Read where specs are
    checked (API, CLI) and where steps run (workers): set it alike."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    openai_hosts: str = ""
    anthropic_hosts: str = ""
    gemini_hosts: str = ""
    bedrock_hosts: str = ""
    litellm_hosts: str = ""
    ollama_hosts: str = ""
    llamacpp_hosts: str = ""

    @field_validator(*(f"{name}_hosts" for name in HOST_PROVIDERS))
    @classmethod
    def _base_urls(cls, value: str) -> str:
        for entry in _names(value):
            scheme, sep, rest = entry.partition("://")
            if scheme.lower() not in ("http", "https") or not sep or not rest.strip("/"):
                raise ValueError(f"{entry[:200]!r} is not a base URL: expected "
                                 "http(s)://host[:port][/path], comma-separated")
            if "@" in rest.split("/", 1)[0]:
                raise ValueError(f"{entry[:200].split('@')[-1]!r}: a listed host carries "
                                 "no user or password")
        return value

    def hosts(self, provider: str) -> tuple[str, ...]:
        value = getattr(self, f"{provider}_hosts", "")
        return _names(value) if isinstance(value, str) else ()


@lru_cache(maxsize=1)
def current_provider_policy() -> ProviderPolicy:
    """This process's provider policy, read from the environment once."""
    return ProviderPolicy()
