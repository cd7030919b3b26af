"""A spec arriving over HTTP (YAML text or a JSON object) loaded like `durable submit`
loads a file: size checked first, then the loader's validation, nothing stored yet.

Loading and planning a spec is CPU work bounded by the limits (core/settings.py):
routes hand it to the render stage (render_stage.py), which runs `plan_submitted` or
`load_only` in a process of its own, a few at a time, so /healthz and every other
request keep being answered meanwhile."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from strands_durable.api.errors import ApiError
from strands_durable.api.limits import too_large
from strands_durable.sessions.start import new_session
from strands_durable.settings import Limits, current_limits
from strands_durable.spec.loader import (
    LoadedSpec,
    check_data_shape,
    load_spec_data,
    load_spec_text,
)
from strands_durable.spec.script import ScriptConfig
from strands_durable.store.records import NewSession
from strands_durable.webhooks import WebhookSubscription

SOURCE = "spec"  # what SpecError messages name as the file: "spec: <path>: <problem>"


@dataclass(frozen=True)
class Submitted:
    """What a request gives the render stage to load (and plan); it is pickled to the
    stage's process, so plain data only."""

    spec: str | dict[str, Any]
    variables: dict[str, Any] | None = None
    provider: str | None = None
    script: ScriptConfig | None = None
    idempotency_key: str | None = None


def with_webhook(new: NewSession, webhook: WebhookSubscription | None,
                 allow: tuple[str, ...]) -> NewSession:
    """`new` with its webhook subscription, its URL checked against the operator's
    DURABLE_WEBHOOK_ALLOW (InvalidWebhook: 422, exit 2)."""
    if webhook is None:
        return new
    return replace(new, webhook=webhook.checked(allow).stored())


def spec_size(spec: str | Mapping[str, Any]) -> int:
    if isinstance(spec, str):
        # A lone surrogate (which JSON can carry) is counted here and refused by the
        # loader with a clear message.
        return len(spec.encode("utf-8", "surrogatepass"))
    return len(json.dumps(spec, separators=(",", ":")).encode("utf-8"))


def load_submitted(spec: str | Mapping[str, Any], variables: Mapping[str, Any] | None = None,
                   provider: str | None = None, script: ScriptConfig | None = None,
                   limits: Limits | None = None) -> LoadedSpec:
    """The loaded spec; ApiError 413 when too large, SpecError (422) when invalid."""
    limits = limits or current_limits()
    if not isinstance(spec, str):
        # Shape (and valid Unicode) first: json.dumps recurses into it.
        check_data_shape(spec, SOURCE, "", limits)
    if variables:
        check_data_shape(dict(variables), SOURCE, "variables", limits)
    size = spec_size(spec)
    if size > limits.max_spec_bytes:
        body = too_large("the spec", size, limits.max_spec_bytes)["error"]
        raise ApiError(413, body["code"], body["message"] + " (DURABLE_MAX_SPEC_BYTES)",
                       body["details"])
    if isinstance(spec, str):
        return load_spec_text(spec, SOURCE, variables, provider=provider, script=script,
                              limits=limits)
    return load_spec_data(spec, SOURCE, variables, provider=provider, script=script,
                          limits=limits)


def plan_submitted(work: Submitted) -> NewSession:
    """The new session of a submit: loaded, and its first steps planned (their templates
    rendered, each within DURABLE_RENDER_TIMEOUT_S). Runs in the render stage."""
    loaded = load_submitted(work.spec, work.variables, work.provider, work.script)
    return new_session(loaded, work.idempotency_key)


def load_only(work: Submitted) -> LoadedSpec:
    """A spec loaded and checked, nothing planned (a resume's new spec). Runs in the
    render stage."""
    return load_submitted(work.spec, work.variables, work.provider, work.script)
