"""The operator's policy for model providers (never a spec's): where a provider's requests
may go besides its own endpoint (DURABLE_<PROVIDER>_HOSTS), and the account limits the
fleet keeps to together (DURABLE_CAPACITY_*). Part of DurableSettings
(strands_durable.settings re-exports these names)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["HOST_PROVIDERS", "CapacityLimit", "CapacityPolicy", "Origin", "ProviderPolicy",
           "current_provider_policy", "host_setting", "parse_base_url", "shown"]

MAX_URL_CHARS = 2048


@dataclass(frozen=True)
class Origin:
    """A base URL as the request will see it: scheme, host (lower case, ASCII), port and
    path (no trailing slash)."""

    scheme: str
    host: str
    port: int
    path: str

    def covers(self, other: Origin) -> bool:
        """Whether a listed base URL allows `other`: same scheme, host and port, and
        `other`'s path at or under this one's."""
        return ((self.scheme, self.host, self.port) == (other.scheme, other.host, other.port)
                and (not self.path or other.path == self.path
                     or other.path.startswith(self.path + "/")))


def shown(url: str) -> str:
    """A URL for a message: bounded, unprintables escaped, user and password masked."""
    text = re.sub(r"//[\s\S]*@", "//***@", url.strip())
    text = text[:200] + ("..." if len(text) > 200 else "")
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def parse_base_url(url: str) -> Origin | str:
    """The URL's origin, or what is wrong with it. Two parsers (the stdlib's, which
    botocore and aiohttp follow, and httpx's, which the other SDKs use) must agree on
    host and port: a URL they read differently goes nowhere."""
    if len(url) > MAX_URL_CHARS:
        return f"longer than {MAX_URL_CHARS} characters"
    if any(not ch.isprintable() or ch.isspace() or ch == "\\" for ch in url):
        return "has spaces, control characters or backslashes"
    import httpx  # ~0.1 s to import: the CLI's commands that read no URL never pay it

    try:
        parts = urlsplit(url)
        parsed = httpx.URL(url)
        port = parts.port
    except (ValueError, httpx.InvalidURL, UnicodeError) as exc:
        return f"not a URL ({str(exc)[:200]})"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return "expected http(s)://host[:port][/path]"
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        return "a base URL carries no user or password"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "a base URL has no query or fragment"
    if "%" in parts.path or any(seg in (".", "..") for seg in parts.path.split("/")):
        # A client normalises these away: /tenant-a/../admin would leave a listed path.
        return "a base URL's path has no '.' or '..' segments and no percent-escapes"
    if "%" in parts.netloc:
        return "a host is written without percent-escapes"
    host = parsed.raw_host.decode("ascii", "replace").lower().rstrip(".")
    default = 443 if scheme == "https" else 80
    if parts.hostname.rstrip(".") != parsed.host.rstrip(".") or \
            (port or default) != (parsed.port or default):
        return "its host or port reads differently to different parsers"
    return Origin(scheme, host, port or default, parts.path.rstrip("/"))


# The providers whose endpoint a spec's `runtime.host` may name, each with its setting;
# also those with an account whose limits the fleet shares (`scripted` has none).
HOST_PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "litellm", "ollama", "llamacpp")


def _refused_base_url(url: str, problem: str, form: str) -> str:
    """Why a setting's base URL is refused: the URL shown without what a query or
    fragment could hold (a token), the problem, and the form expected."""
    bare = url.split("?", 1)[0].split("#", 1)[0]
    return f"{shown(bare)!r}: {problem}; expected http(s)://host[:port][/path], {form}"


@lru_cache(maxsize=256)
def same_base_url(a: str, b: str) -> bool:
    """Whether two base URLs name one endpoint: the same text, or the same origin and
    path as parse_base_url reads them (`HTTP://Host:80/v1/` is `http://host/v1`)."""
    if a == b:
        return True
    first, second = parse_base_url(a), parse_base_url(b)
    return isinstance(first, Origin) and first == second


def _names(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


class CapacityLimit(BaseModel):
    """An account limit the operator declares for a provider's model (at a host): every
    worker of the fleet keeps to it together (worker/capacity.py). `model` and `host`
    left out match every model and every host; the most specific entry wins."""

    # Strict: `true`, "7" or 2.0 is refused as a spec's runtime.capacity refuses it, not
    # read as 1 or 7 or 2.
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    provider: str = Field(min_length=1, max_length=64)
    model: str | None = Field(default=None, max_length=256)
    host: str | None = Field(default=None, max_length=2048)
    rpm: int = Field(default=0, ge=0, le=10_000_000)  # requests per minute; 0: not declared
    tpm: int = Field(default=0, ge=0, le=10_000_000_000)  # input + output tokens a minute
    in_flight: int = Field(default=0, ge=0, le=100_000)  # requests at once

    # A limit that can never match a key would leave the operator believing the fleet
    # is held to it: a provider that has no account to share, or a host no spec's
    # `runtime.host` can be.
    @field_validator("provider")
    @classmethod
    def _known_provider(cls, value: str) -> str:
        if value not in HOST_PROVIDERS:
            raise ValueError(f"{value[:64]!r} is not a provider with limits to share; "
                             f"expected one of {', '.join(HOST_PROVIDERS)}")
        return value

    @field_validator("host")
    @classmethod
    def _base_url(cls, value: str | None) -> str | None:
        if value is not None:
            problem = parse_base_url(value)
            if isinstance(problem, str):
                raise ValueError(_refused_base_url(value, problem,
                                                  "as a spec's runtime.host names it"))
        return value


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
                    or not (limit.host is None or same_base_url(limit.host, host)):
                continue
            rank = (limit.model not in (None, "*")) * 2 + (limit.host is not None)
            if best is None or rank > best[0]:
                best = (rank, limit)
        return best[1] if best else None



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
            problem = parse_base_url(entry)
            if isinstance(problem, str):  # one rule for listed and spec URLs
                raise ValueError(_refused_base_url(entry, problem, "comma-separated"))
        return value

    def hosts(self, provider: str) -> tuple[str, ...]:
        value = getattr(self, f"{provider}_hosts", "")
        return _names(value) if isinstance(value, str) else ()


@lru_cache(maxsize=1)
def current_provider_policy() -> ProviderPolicy:
    """This process's provider policy, read from the environment once."""
    return ProviderPolicy()
