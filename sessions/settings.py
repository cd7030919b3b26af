"""Process configuration from the environment (DURABLE_*), via pydantic-settings."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# memory:// is the in-process store of `durable run`; the +sentinel ones go through Sentinel.
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel", "memory")


class Limits(BaseSettings):
    """Bounds on the work one spec or one template may cause, in every process that loads
    specs or renders templates (API, workers, CLI). Each refusal names the limit's variable."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # A spec's text (YAML or JSON) as submitted or read from a file.
    max_spec_bytes: int = Field(default=256 * 1024, ge=1024)
    # Nesting of mappings and lists in a spec and in its variables.
    max_spec_depth: int = Field(default=64, ge=8, le=500)
    # Nodes and scalar characters once YAML aliases are expanded (alias bombs).
    max_spec_nodes: int = Field(default=20_000, ge=100)
    max_spec_expanded_bytes: int = Field(default=1024 * 1024, ge=1024)
    # One template render: wall time, and characters produced (also the largest string
    # or list any expression inside it may build).
    render_timeout_s: float = Field(default=2.0, gt=0, le=600)
    max_render_chars: int = Field(default=1_000_000, ge=1024)
    # One rendered artifact (UTF-8 bytes), and everything a session stores in Redis.
    max_artifact_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    max_session_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024)


@lru_cache(maxsize=1)
def current_limits() -> Limits:
    """This process's limits, read from the environment once."""
    return Limits()


class DurableSettings(Limits):
    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    redis_url: str = DEFAULT_REDIS_URL
    key_prefix: str = Field(default="durable", pattern=r"^[A-Za-z0-9_.:-]+$")
    shards: int = Field(default=1, ge=1, le=1024)

    worker_concurrency: int = Field(default=8, ge=1)
    claim_idle_ms: int = Field(default=15_000, ge=100)
    max_deliveries: int = Field(default=5, ge=1)
    # How often a running step's lease is renewed; must stay well under claim_idle_ms.
    lease_renew_ms: int | None = Field(default=None, ge=50)
    read_block_ms: int = Field(default=1_000, ge=10)
    timer_poll_ms: int = Field(default=500, ge=10)
    heartbeat_s: float = Field(default=5.0, gt=0)
    shutdown_grace_s: float = Field(default=20.0, ge=0)
    # One model call (one attempt) may take this long; a hung provider then counts as a
    # transient failure instead of holding the step's lease forever. 0 = no limit.
    model_timeout_s: float = Field(default=600.0, ge=0)
    # Messages of an agent's committed conversation restored for its next step.
    conversation_window: int = Field(default=20, ge=0)
    # Bench mode: the agent call is replaced by a no-op so the engine alone is measured.
    bench_noop: bool = False
    # Observability and the scheduler role (sessions/metrics.py, scheduler/service.py).
    metrics_port: int = Field(default=9464, ge=0, le=65535)  # worker/scheduler /metrics; 0 = off
    scheduler_lock_ttl_ms: int = Field(default=10_000, ge=300)  # leadership lapses after this
    scheduler_check_s: float = Field(default=5.0, gt=0)  # max_duration_s and stuck checks
    stuck_after_s: float = Field(default=900.0, gt=0)  # running, no commit, nothing queued
    # HTTP API (`durable api`): where it listens; a token makes every route but
    # /healthz require `Authorization: Bearer <token>`.
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_token: str | None = None
    # Recovery drills only: crash the worker at a step-life point (see worker/faults.py).
    crash_at: str = Field(
        default="", pattern=r"^((after_gate|before_commit|after_commit):[1-9][0-9]*)?$")

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in REDIS_SCHEMES or (not rest and scheme != "memory"):
            raise ValueError(f"expected {', '.join(s + '://...' for s in REDIS_SCHEMES)}")
        return url

    @property
    def effective_lease_renew_ms(self) -> int:
        return self.lease_renew_ms or max(50, self.claim_idle_ms // 3)

    @field_validator("api_token")
    @classmethod
    def _empty_token_is_none(cls, value: str | None) -> str | None:
        # `DURABLE_API_TOKEN=` (empty) means no token, not a token everyone matches.
        return value or None
