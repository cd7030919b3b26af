"""Process configuration from the environment (DURABLE_*), via pydantic-settings."""

from __future__ import annotations

from functools import lru_cache

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from strands_durable.errors import RedisUrlError
from strands_durable.provider_policy import (
    HOST_PROVIDERS,
    CapacityPolicy,
    ProviderPolicy,
)
from strands_durable.redis_targets import Timeouts, parse_redis_url, redact

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# memory:// is the in-process store of `durable run`; the +sentinel ones go through Sentinel.
REDIS_SCHEMES = ("redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel",
                 "redis+cluster", "rediss+cluster", "memory")


class Limits(BaseSettings):
    """Bounds on the work one spec or one template may cause, in every process that loads
    specs or renders templates (API, workers, CLI). Each refusal names the limit's variable."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # A spec's text (YAML or JSON) as submitted or read from a file.
    max_spec_bytes: int = Field(default=256 * 1024, ge=1024, le=1024**3)
    # Nesting of mappings and lists in a spec and in its variables.
    max_spec_depth: int = Field(default=64, ge=8, le=500)
    # Nodes and scalar characters once YAML aliases are expanded (alias bombs).
    max_spec_nodes: int = Field(default=20_000, ge=100, le=100_000_000)
    max_spec_expanded_bytes: int = Field(default=1024 * 1024, ge=1024, le=1024**3)
    # One template render: wall time, and characters produced (also the largest string
    # or list any expression inside it may build).
    render_timeout_s: float = Field(default=2.0, gt=0, le=600)
    max_render_chars: int = Field(default=1_000_000, ge=1024, le=1024**3)
    # One rendered artifact (UTF-8 bytes), and everything a session stores in Redis.
    max_artifact_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=1024**3)
    max_session_bytes: int = Field(default=64 * 1024 * 1024, ge=64 * 1024, le=64 * 1024**3)
    # One session export document read by `durable import` or POST /v1/sessions/import
    # (a session of max_session_bytes, with room for JSON's escaping).
    max_import_bytes: int = Field(default=128 * 1024 * 1024, ge=64 * 1024, le=128 * 1024**3)


@lru_cache(maxsize=1)
def current_limits() -> Limits:
    """This process's limits, read from the environment once."""
    return Limits()


def _names(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


class ToolPolicy(BaseSettings):
    """What a spec's tools may do on this fleet, set by the operator (never by a spec).
    Read where specs are checked (API, CLI) and where tools run (workers): set it alike."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # Import-path prefixes of python tools beyond the native ones (comma-separated).
    tool_modules: str = ""
    # A tool call that runs longer is a tool error the model sees.
    tool_timeout_s: float = Field(default=120.0, gt=0, le=86_400, allow_inf_nan=False)
    # The one directory the file tools (file_read, file_write, grep, ...) may touch;
    # empty: they refuse every path.
    tool_files_dir: str = ""
    # Hosts (name, IP or CIDR) the HTTP tools may reach although they are private,
    # loopback or link-local (comma-separated); public addresses need no entry.
    tool_http_allow: str = ""
    # Environment variables a spec's headers may name as ${VAR} (comma-separated).
    tool_secrets: str = ""
    # Commands a spec's stdio MCP servers may start (comma-separated, exact match).
    mcp_commands: str = ""
    # python_exec runs the model's code on the worker: off unless the operator says so.
    tool_python_exec: bool = False

    @property
    def module_prefixes(self) -> tuple[str, ...]:
        return _names(self.tool_modules)

    @property
    def http_allow(self) -> tuple[str, ...]:
        return _names(self.tool_http_allow)

    @property
    def secrets(self) -> tuple[str, ...]:
        return _names(self.tool_secrets)

    @property
    def commands(self) -> tuple[str, ...]:
        return _names(self.mcp_commands)

    def allows_module(self, path: str) -> bool:
        """A prefix allows itself and what is below it (`acme.tools` allows
        `acme.tools.search`, not `acme.toolshed`)."""
        return any(path == prefix or path.startswith(prefix.rstrip(".") + ".")
                   or path.startswith(prefix.rstrip(".") + ":")
                   for prefix in self.module_prefixes)


@lru_cache(maxsize=1)
def current_tool_policy() -> ToolPolicy:
    """This process's tool policy, read from the environment once."""
    return ToolPolicy()


class TelemetryPolicy(BaseSettings):
    """Where a spec's traces may go, set by the operator (never by a spec). A spec's
    `telemetry.otel.endpoint` would make workers send prompts and replies to a URL its
    author chose: the fleet exports only to these (and to its own OTEL_EXPORTER_OTLP_*
    endpoint). Read where specs are checked (API, CLI) and where steps run (workers)."""

    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # Spec endpoints this fleet may export to: comma-separated URLs, `*` for any.
    otel_endpoints: str = ""
    # One OTLP export request (its retries included) gives up after this long.
    otel_export_timeout_s: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    # Finished spans waiting for export, per endpoint; beyond it new spans are dropped.
    otel_queue_size: int = Field(default=2048, ge=64, le=1_000_000)
    # Distinct endpoints one process exports to at once (the least recently used closes).
    otel_max_endpoints: int = Field(default=8, ge=1, le=256)

    @property
    def allowed_endpoints(self) -> tuple[str, ...]:
        return _names(self.otel_endpoints)


@lru_cache(maxsize=1)
def current_telemetry_policy() -> TelemetryPolicy:
    """This process's telemetry policy, read from the environment once."""
    return TelemetryPolicy()


class DurableSettings(Limits, ToolPolicy, TelemetryPolicy, ProviderPolicy,
                       CapacityPolicy):
    model_config = SettingsConfigDict(env_prefix="DURABLE_", extra="ignore")

    # repr=False: a settings object in a log or traceback never shows the password.
    redis_url: str = Field(default=DEFAULT_REDIS_URL, repr=False)
    # Every Redis connection of every role: TCP + TLS handshake + AUTH within connect,
    # any reply within socket (longer than the longest blocking read, XREADGROUP BLOCK).
    redis_connect_timeout_s: float = Field(default=5.0, gt=0, le=300)
    redis_socket_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    # A worker rides out a Redis outage this long (reconnecting with backoff), then exits.
    redis_outage_s: float = Field(default=300.0, ge=0)
    key_prefix: str = Field(default="durable", pattern=r"^[A-Za-z0-9_.:-]+$")
    shards: int = Field(default=1, ge=1, le=1024)

    # Steps one worker takes at once (its slots), the ceiling adaptive concurrency works under.
    # Sized for agent steps, which mostly wait on a model: a waiting step costs a coroutine
    # and its conversation (under 100 KiB besides, bench/inflight.py), and adaptive concurrency
    # takes fewer while steps keep the event loop busy.
    worker_concurrency: int = Field(default=1000, ge=1, le=1_000_000)
    # Fewer steps at once while the worker's event loop is saturated (worker/slots.py).
    worker_adaptive_concurrency: bool = True
    claim_idle_ms: int = Field(default=15_000, ge=100, le=30 * 86_400_000)
    max_deliveries: int = Field(default=5, ge=1, le=1_000_000)
    # How often a running step's lease is renewed; must stay well under claim_idle_ms.
    lease_renew_ms: int | None = Field(default=None, ge=50)
    read_block_ms: int = Field(default=1_000, ge=10)
    timer_poll_ms: int = Field(default=500, ge=10)
    heartbeat_s: float = Field(default=5.0, gt=0)
    shutdown_grace_s: float = Field(default=20.0, ge=0)
    # One model call (one attempt) may take this long; a hung provider then counts as a
    # transient failure instead of holding the step's lease forever. 0 = no limit.
    model_timeout_s: float = Field(default=600.0, ge=0)
    # An operator ceiling on the messages of an agent's committed conversation restored
    # for its next step (the newest ones; the spec's context_policy bounds it first).
    # 0 = no ceiling: the whole conversation since its latest compaction.
    conversation_window: int = Field(default=0, ge=0, le=100_000_000)
    # Bench mode: the agent call is replaced by a no-op so the engine alone is measured.
    bench_noop: bool = False
    # Observability and the scheduler role (metrics/, scheduler/service.py).
    metrics_port: int = Field(default=9464, ge=0, le=65535)  # worker/scheduler /metrics; 0 = off
    # Where /metrics listens: loopback unless told (the container image sets 0.0.0.0 for
    # a Prometheus in another container or pod).
    metrics_host: str = Field(default="127.0.0.1", min_length=1, max_length=255)
    scheduler_lock_ttl_ms: int = Field(default=10_000, ge=300)  # leadership lapses after this
    scheduler_check_s: float = Field(default=5.0, gt=0)  # max_duration_s and stuck checks
    stuck_after_s: float = Field(default=900.0, gt=0)  # running, no commit, nothing queued
    # Retention, by the scheduler's leader: completed, failed and cancelled sessions not
    # updated for this many days are deleted with every key they own (idempotency key
    # included); 0 keeps them forever.
    retention_days: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    # A session's event stream keeps about this many of its newest events (XADD MAXLEN ~).
    events_max: int = Field(default=10_000, ge=100, le=100_000_000)
    # Live streams (store/live.py): model output as it is written, for clients that follow
    # a running step (GET /v1/sessions/{id}/stream, `durable watch --tokens`). Off: nothing
    # is written; committed results and events are the same either way.
    live_stream: bool = True
    # A session's live stream keeps about this many of its newest entries (XADD MAXLEN ~).
    live_max: int = Field(default=2_000, ge=10, le=1_000_000)
    # A live stream expires this long after its last write.
    live_ttl_s: int = Field(default=3_600, ge=1, le=365 * 86_400)
    # Model output is gathered this long, then written in one round trip for all sessions.
    live_flush_ms: int = Field(default=50, ge=1, le=5_000)
    # A worker silent this long is gone: the scheduler forgets its heartbeat and retires
    # its consumer from the groups once others re-claimed what it held.
    worker_retire_s: float = Field(default=120.0, gt=0, allow_inf_nan=False)
    # Fast failover (worker/failover.py, store/liveness.py): every step consumer beats on
    # each shard it reads from a thread of its own every failover_beat_ms; one silent for
    # failover_missed_beats beats is declared dead by whoever notices first (a live worker
    # or the scheduler) and its pending entries run again at once. claim_idle_ms stays
    # the backstop (a hung event loop whose beat thread lives, a worker never seen).
    failover: bool = True
    failover_beat_ms: int = Field(default=500, ge=20, le=60_000)
    failover_missed_beats: int = Field(default=6, ge=2, le=1000)
    # Drills only: `S:P` keeps the worker's event loop busy (CPU, GIL held as by Python
    # code) for S seconds every P seconds (worker/faults.py), as a heavy render would.
    loop_stall: str = Field(default="", pattern=r"^([0-9]+(\.[0-9]+)?:[0-9]+(\.[0-9]+)?)?$")
    # HTTP API (`durable api`): where it listens; a token makes every route but
    # /healthz require `Authorization: Bearer <token>`.
    api_host: str = "127.0.0.1"
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_token: str | None = Field(default=None, repr=False)
    # Submits load and plan their spec (first templates rendered) in this many processes,
    # off the API's event loop and GIL; this many more may wait, and past that a submit
    # is answered 503 with Retry-After (api/render_stage.py).
    api_render_workers: int = Field(default=2, ge=1, le=64)
    api_render_queue: int = Field(default=8, ge=0, le=1024)
    # A request's body must arrive whole within this, or the API answers 408 and closes
    # the connection (a client that sends less than it declared held it for good).
    api_body_timeout_s: float = Field(default=30.0, gt=0, le=3_600)
    # A step's agent may take this many model turns (each answer to a tool call is one
    # more); past it the step fails and is not retried: a model that calls tools forever
    # (or a script rule that always does) stops here, naming the limit. At most 250:
    # Strands runs each turn a level deeper in Python's stack, whose limit came between
    # 300 and 600 turns (a RecursionError, retried as any error).
    max_model_turns: int = Field(default=100, ge=1, le=250)
    # Recovery drills only: crash the worker at a step-life point (see worker/faults.py).
    crash_at: str = Field(
        default="", pattern=r"^((after_gate|before_commit|after_commit|after_tool):[1-9][0-9]*)?$")
    # Tests only: stop steps at breakpoints set as files in this directory (worker/faults.py).
    breakpoint_dir: str = ""
    # Without DURABLE_REDIS_URL, sessions live in the user's local store: a private
    # redis-server under this folder (default $XDG_STATE_HOME/strands-durable, see
    # store/local_server.py), started on demand, stopped after local_idle_s unused.
    # Completed local sessions go after retention_days, 7 unless it is set.
    home: str = ""
    local_idle_s: float = Field(default=300.0, ge=1, allow_inf_nan=False)
    # Memory only: `durable run` keeps nothing; the other commands use redis_url.
    ephemeral: bool = False
    # Webhooks (core/webhooks.py, scheduler/webhooks.py): the fleet's default subscription,
    # for sessions submitted without one of their own (empty: none), its signing secret
    # (whsec_<base64>) and events (comma-separated; empty: all). Hosts (name, IP or CIDR)
    # a webhook may reach although private or loopback (comma-separated).
    webhook_url: str = Field(default="", repr=False, max_length=2048)
    webhook_secret: str | None = Field(default=None, repr=False)
    webhook_events: str = ""
    webhook_allow: str = ""
    # Delivery: a failed attempt waits base * 2^(n-1) (at most max, spread over its upper
    # half), for up to max_age since the event; then the entry is dead-lettered.
    webhook_backoff_base_s: float = Field(default=5.0, gt=0, le=3600, allow_inf_nan=False)
    webhook_backoff_max_s: float = Field(default=3600.0, gt=0, le=86_400, allow_inf_nan=False)
    webhook_max_age_s: float = Field(default=86_400.0, gt=0, le=30 * 86_400,
                                     allow_inf_nan=False)
    webhook_timeout_s: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)
    # An entry being delivered is leased this long: a leader that dies mid-delivery
    # leaves it to be sent again (the receiver dedupes on webhook-id).
    webhook_lease_s: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)
    # How often the leader looks for sessions whose status changed, and how far back
    # (behind the newest change it saw) it looks again: writers' clocks and commits
    # that land late are covered up to this.
    webhook_scan_ms: int = Field(default=1_000, ge=10, le=600_000)
    webhook_lookback_ms: int = Field(default=60_000, ge=0, le=86_400_000)
    # Delivered entries kept per shard for `durable webhooks list --status delivered`.
    webhook_keep_delivered: int = Field(default=1_000, ge=0, le=1_000_000)

    @field_validator("redis_url")
    @classmethod
    def _usable_url(cls, url: str) -> str:
        scheme, sep, rest = url.partition("://")
        if not sep or scheme.lower() not in REDIS_SCHEMES or (not rest and scheme != "memory"):
            raise ValueError(f"expected {', '.join(s + '://...' for s in REDIS_SCHEMES)}")
        if scheme.lower() != "memory":
            try:
                parse_redis_url(url)
            except RedisUrlError as exc:
                raise ValueError(exc.problem) from None
        return url

    @model_validator(mode="after")
    def _socket_outlasts_blocking_reads(self) -> DurableSettings:
        if self.redis_socket_timeout_s * 1000 < self.read_block_ms + 1000:
            raise ValueError(f"DURABLE_REDIS_SOCKET_TIMEOUT_S ({self.redis_socket_timeout_s}) "
                             f"must exceed DURABLE_READ_BLOCK_MS ({self.read_block_ms} ms) "
                             "by 1 s, or every idle XREADGROUP times out")
        return self

    @property
    def redis_timeouts(self) -> Timeouts:
        return Timeouts(self.redis_connect_timeout_s, self.redis_socket_timeout_s)

    @property
    def webhook_allow_list(self) -> tuple[str, ...]:
        return _names(self.webhook_allow)

    @property
    def effective_lease_renew_ms(self) -> int:
        return self.lease_renew_ms or max(50, self.claim_idle_ms // 3)

    @field_validator("api_token")
    @classmethod
    def _empty_token_is_none(cls, value: str | None) -> str | None:
        # `DURABLE_API_TOKEN=` (empty) means no token, not a token everyone matches.
        return value or None


# Never echoed (a listed host's message masks what it shows itself).
SECRET_SETTINGS = {"api_token", "webhook_url", "webhook_secret",
                   *(f"{name}_hosts" for name in HOST_PROVIDERS)}
REDACTED_SETTINGS = {"redis_url"}  # echoed without the password


MAX_SHOWN_CHARS = 80  # of a refused value in its message


def describe_settings_error(exc: ValidationError) -> str:
    """The first problem, naming the variable: `DURABLE_SHARDS=0: Input should be...`,
    never a secret (the API token is left out, the Redis password masked)."""
    first = exc.errors()[0]
    field = "_".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    if not field:  # a check across settings names them itself
        return message
    name = f"DURABLE_{field.upper()}"
    value = first.get("input")
    if field in SECRET_SETTINGS or not isinstance(value, str | int | float):
        return f"{name}: {message}"
    shown = redact(value) if field in REDACTED_SETTINGS and isinstance(value, str) else value
    if isinstance(shown, str) and len(shown) > MAX_SHOWN_CHARS:  # bounded, like InvalidId
        return f"{name}={shown[:MAX_SHOWN_CHARS]!r}... ({len(shown):,} characters): {message}"
    return f"{name}={shown!r}: {message}"
