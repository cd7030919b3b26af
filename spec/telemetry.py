"""Where a session's traces go: the spec's `telemetry` section and the operator's standard
OTEL_* variables resolved into one TraceConfig (pure), and the submit-time check of a
spec's `telemetry.otel.endpoint` against the fleet's policy (DURABLE_OTEL_ENDPOINTS).

A spec endpoint makes workers send prompts and replies to a URL the spec's author chose:
on the fleet it must be one the operator allows, else the spec is refused at submit
(and a worker that meets one anyway exports to the operator's endpoint instead).
`durable run` on the user's own machine (no DURABLE_REDIS_URL) honours it as written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from urllib.parse import urlsplit

from strands_durable.errors import SpecError
from strands_durable.settings import TelemetryPolicy, current_telemetry_policy
from strands_durable.spec.model import Spec
from strands_durable.spec.sections import Redaction, Telemetry

__all__ = ["DEFAULT_SERVICE_NAME", "DEFAULT_TRACES_URL", "OtelEnv", "TraceConfig",
           "check_telemetry", "endpoint_allowed", "is_local_run", "local_run",
           "resolve_trace_config",
           "shown", "traces_url"]

TRACES_PATH = "/v1/traces"
# The OTLP/HTTP default when no endpoint is named anywhere (the OTel SDK's own).
DEFAULT_TRACES_URL = "http://localhost:4318" + TRACES_PATH
DEFAULT_SERVICE_NAME = "strands-durable"
_RATIO_SAMPLERS = ("traceidratio", "parentbased_traceidratio")
_OFF_SAMPLERS = ("always_off", "parentbased_always_off")

# Set by `durable run` without DURABLE_REDIS_URL, in its own context only (a task or a
# test that did not set it never sees it): the spec's endpoint is the user's to choose.
_LOCAL_RUN: ContextVar[bool] = ContextVar("durable_local_run", default=False)


def local_run(value: bool = True) -> None:
    _LOCAL_RUN.set(value)


def is_local_run() -> bool:
    return _LOCAL_RUN.get()


@dataclass(frozen=True)
class OtelEnv:
    """The operator's standard OpenTelemetry variables, as far as traces go."""

    traces_endpoint: str | None = None  # full URL of the traces endpoint
    service_name: str | None = None
    sample_ratio: float | None = None  # None: OTEL_TRACES_SAMPLER not set
    disabled: bool = False

    @classmethod
    def read(cls, environ: Mapping[str, str] | None = None) -> OtelEnv:
        """`environ`'s variables, or the process's as they are now (a worker asks at
        every step, so a variable changed while it runs counts from its next step)."""
        if environ is None:
            return _PROCESS_ENV.read()
        return cls._parse(environ)

    @classmethod
    def _parse(cls, env: Mapping[str, str]) -> OtelEnv:
        endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip() or None
        if endpoint is None and env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip():
            endpoint = env["OTEL_EXPORTER_OTLP_ENDPOINT"].strip().rstrip("/") + TRACES_PATH
        disabled = (env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"
                    or env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none")
        return cls(traces_endpoint=endpoint,
                   service_name=env.get("OTEL_SERVICE_NAME", "").strip() or None,
                   sample_ratio=_sampler_ratio(env), disabled=disabled)


_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
              "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_SERVICE_NAME",
              "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG")


class _ProcessOtelEnv:
    """The process's OtelEnv, parsed again only when one of its variables changed.

    Read at every step: `os.environ.get` of an unset name raises and catches a KeyError
    inside, so the seven reads and the parse were several microseconds a step. The raw
    values are compared instead, looked up in the dict behind `os.environ` (the bytes
    or str that `os.environ[...] = ...` and `del` keep it in step with); where there is
    none, or `os.environ` was replaced, every read parses again."""

    def __init__(self) -> None:
        self._environ = os.environ
        data = getattr(os.environ, "_data", None)
        self._data: dict[object, object] | None = data if isinstance(data, dict) else None
        self._keys = tuple(os.environ.encodekey(name) for name in _VARIABLES)
        # The raw values and their parse, as one tuple: a thread reading while another
        # replaces it sees one pair or the other, never a mix.
        self._last: tuple[tuple[object, ...], OtelEnv] | None = None

    def read(self) -> OtelEnv:
        data = self._data
        if data is None or os.environ is not self._environ:
            return OtelEnv._parse(os.environ)
        raw = tuple(data.get(key) for key in self._keys)
        last = self._last
        if last is None or last[0] != raw:
            last = self._last = (raw, OtelEnv._parse(os.environ))
        return last[1]


_PROCESS_ENV = _ProcessOtelEnv()


def _sampler_ratio(env: Mapping[str, str]) -> float | None:
    sampler = env.get("OTEL_TRACES_SAMPLER", "").strip().lower()
    if not sampler:
        return None
    if sampler in _OFF_SAMPLERS:
        return 0.0
    if sampler in _RATIO_SAMPLERS:
        try:
            ratio = float(env.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
        except ValueError:
            return 1.0  # the OTel SDK's rule for an unreadable argument
        return ratio if 0.0 <= ratio <= 1.0 else 1.0
    return 1.0  # always_on and the parent-based variants: every session


@dataclass(frozen=True)
class TraceConfig:
    """Where one session's spans go and what they may carry."""

    endpoint: str
    # The operator's own endpoint: its OTEL_EXPORTER_OTLP_*HEADERS (credentials) go
    # with it, and with no other endpoint.
    operator_endpoint: bool
    service_name: str
    sample_ratio: float
    redact_tool_inputs: bool = True
    redact_tool_outputs: bool = False
    # strands-cli's PII masking of the trace artifact: on when the spec writes
    # `telemetry.redact` with tool inputs or outputs redacted.
    mask_pii: bool = False


def traces_url(url: str) -> str:
    """An endpoint as the exporter posts to it: a bare host gets the OTLP traces path
    (`http://collector:4318` -> `http://collector:4318/v1/traces`), a path is kept."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.path in ("", "/"):
        return url.rstrip("/") + TRACES_PATH
    return url


def shown(url: str) -> str:
    """An endpoint for a message: never its user or password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if _port(url) else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _masked(url: str) -> str:
    """An endpoint for a message: bounded, unprintables escaped, its user and password
    masked even where it is no URL (a password may hold '/', so up to the last '@')."""
    masked = re.sub(r"//[\s\S]*@", "//***@", url.strip())
    text = masked[:200] + ("..." if len(masked) > 200 else "")
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def _port(url: str) -> int | None:
    try:
        return urlsplit(url).port
    except ValueError:
        return None


def _endpoint_problem(url: str) -> str | None:
    try:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return "expected an OTLP/HTTP URL, http(s)://host[:port][/path]"
        parts.port  # noqa: B018 - raises for a port that is no number or out of range
    except ValueError as exc:
        return f"not a URL ({exc})"
    return None


def _same(a: str, b: str) -> bool:
    left, right = urlsplit(traces_url(a)), urlsplit(traces_url(b))
    return (left.scheme.lower(), (left.hostname or "").lower(), left.port or 0,
            left.path.rstrip("/")) == (right.scheme.lower(), (right.hostname or "").lower(),
                                       right.port or 0, right.path.rstrip("/"))


def endpoint_allowed(url: str, env: OtelEnv, allowed: tuple[str, ...]) -> bool:
    """The fleet exports to its own endpoint and to those DURABLE_OTEL_ENDPOINTS names."""
    if "*" in allowed:
        return True
    own = (env.traces_endpoint,) if env.traces_endpoint else ()
    return any(_same(url, trusted) for trusted in (*own, *allowed)
               if _endpoint_problem(trusted) is None)


def resolve_trace_config(telemetry: Telemetry | None, env: OtelEnv,
                         allowed: tuple[str, ...], local: bool) -> TraceConfig | None:
    """The session's trace config, or None when nothing is to be traced: neither the
    spec (`telemetry.otel`) nor the operator (an OTEL_EXPORTER_OTLP_* endpoint) asks for
    traces, or OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none turn them off. The spec
    wins over the operator's variables for its service name and its sample ratio."""
    otel = telemetry.otel if telemetry is not None else None
    if env.disabled or (otel is None and env.traces_endpoint is None):
        return None
    written = telemetry.redact if telemetry is not None else None
    redact = written or Redaction()
    endpoint = env.traces_endpoint or DEFAULT_TRACES_URL
    own = True
    if otel is not None and otel.endpoint and _endpoint_problem(otel.endpoint) is None:
        url = traces_url(otel.endpoint)
        if local or endpoint_allowed(url, env, allowed):
            own = env.traces_endpoint is not None and _same(url, env.traces_endpoint)
            endpoint = url
    if otel is not None:
        ratio = otel.sample_ratio
    else:
        ratio = env.sample_ratio if env.sample_ratio is not None else 1.0
    service = (otel.service_name if otel is not None else None) or env.service_name
    return TraceConfig(endpoint=endpoint, operator_endpoint=own,
                       service_name=service or DEFAULT_SERVICE_NAME,
                       sample_ratio=min(max(ratio, 0.0), 1.0),
                       redact_tool_inputs=redact.tool_inputs,
                       redact_tool_outputs=redact.tool_outputs,
                       mask_pii=written is not None and (written.tool_inputs
                                                         or written.tool_outputs))


def check_telemetry(spec: Spec, source: str, policy: TelemetryPolicy | None = None,
                    env: OtelEnv | None = None, local: bool | None = None) -> None:
    """Refuse a `telemetry.otel.endpoint` that is no URL, or (on the fleet) one the
    operator does not allow: naming the field, the endpoint and the setting."""
    otel = spec.telemetry.otel if spec.telemetry is not None else None
    if otel is None or not otel.endpoint:
        return
    where = "telemetry.otel.endpoint"
    problem = _endpoint_problem(otel.endpoint)
    if problem is not None:
        raise SpecError(source, where, f"{_masked(otel.endpoint)!r}: {problem}")
    if is_local_run() if local is None else local:
        return
    policy = policy or current_telemetry_policy()
    env = env or OtelEnv.read()
    url = traces_url(otel.endpoint)
    if endpoint_allowed(url, env, policy.allowed_endpoints):
        return
    own = shown(env.traces_endpoint) if env.traces_endpoint else "none"
    raise SpecError(source, where, f"traces would go to {_masked(shown(url))}, an endpoint "
                    "this fleet does not export to (it sends prompts and replies there); "
                    f"the fleet's own is {own} (OTEL_EXPORTER_OTLP_ENDPOINT) and "
                    "DURABLE_OTEL_ENDPOINTS allows "
                    f"{', '.join(map(shown, policy.allowed_endpoints)) or 'no other'}: "
                    "leave the endpoint out to use the fleet's, or ask its operator")
