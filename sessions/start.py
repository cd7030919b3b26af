"""Start a session: plan its first steps and store everything in one transaction."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from strands_durable.access import DEFAULT_NAMESPACE
from strands_durable.errors import SpecError
from strands_durable.models import PRIORITY_DEFAULT, SessionStatus, StepJob, now_iso, now_ms
from strands_durable.patterns import PlanContext, planner_for
from strands_durable.planning.advance import timeout_job, waiting_entry, waiting_reason
from strands_durable.settings import Limits, current_limits
from strands_durable.spec.loader import LoadedSpec
from strands_durable.store.keys import check_token
from strands_durable.store.store import NewSession, Store, dumps


def spec_json(loaded: LoadedSpec) -> str:
    """The effective spec (overrides applied) as workers rebuild it."""
    data = loaded.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    # Key order kept: graph nodes and routes keep the spec's order, as strands-cli sees it.
    return json.dumps(data, separators=(",", ":"))


def spec_digest(text: str) -> str:
    """Workers cache parsed specs under this digest of the spec snapshot's JSON."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def request_digest(spec_text: str, variables: dict[str, object],
                   priority: int = PRIORITY_DEFAULT) -> str:
    """What an idempotency key is bound to: the effective spec (overrides applied), the
    variables and the priority, so a repeat of the same request matches however the spec
    was sent (YAML text, a JSON object, a file) and a different one does not. The default
    priority adds nothing: digests stored before priorities existed still match."""
    canonical = json.dumps(variables, sort_keys=True, separators=(",", ":"), default=str)
    tail = "" if priority == PRIORITY_DEFAULT else f"\npriority={priority}"
    return hashlib.sha256(f"{spec_text}\n{canonical}{tail}".encode()).hexdigest()[:32]


def with_priority(new: NewSession, priority: int | None) -> NewSession:
    """`new` submitted at `priority` (None: the default); an idempotency key is bound to
    it too, so a repeat at another priority is a different request (409)."""
    if priority is None or priority == new.priority:
        return new
    digest = (request_digest(new.spec_json, new.variables, priority)
              if new.idempotency_key else "")
    return replace(new, priority=priority, request_digest=digest)


def in_namespace(new: NewSession, namespace: str) -> NewSession:
    """`new` in `namespace`. Its idempotency key becomes the namespace's own (a digest of
    the two): the same key sent in two namespaces names two sessions, and never reveals
    one namespace's session to another."""
    if namespace == DEFAULT_NAMESPACE:
        return new
    key = new.idempotency_key
    if key is not None:
        check_token("idempotency key", key)  # as the store checks the key it keeps
    scoped = (f"ns.{namespace}.{hashlib.sha256(key.encode()).hexdigest()[:40]}"
              if key is not None else None)
    return replace(new, namespace=namespace, idempotency_key=scoped)


def stored_bytes(new: NewSession) -> int:
    """About what creating `new` writes to Redis (UTF-8 bytes of its large fields)."""
    parts = [new.spec_json, dumps(new.variables), dumps(new.state),
             *(job.to_json() for job in new.jobs), *(dumps(w) for w in new.waiting)]
    return sum(len(part.encode("utf-8")) for part in parts)


def check_session_size(new: NewSession, source: str, limits: Limits) -> None:
    size = stored_bytes(new)
    if size > limits.max_session_bytes:
        raise SpecError(source, "", f"the new session would store {size:,} bytes; the limit "
                        f"is {limits.max_session_bytes:,} (DURABLE_MAX_SESSION_BYTES)")


def new_session(loaded: LoadedSpec, idempotency_key: str | None = None,
                limits: Limits | None = None) -> NewSession:
    """Pure: the session record and first jobs for `loaded` (render errors raise, and so
    does a session larger than DURABLE_MAX_SESSION_BYTES)."""
    pattern = loaded.spec.pattern.type
    try:
        planner = planner_for(pattern)
    except NotImplementedError as exc:
        raise SpecError(loaded.source, "pattern.type", str(exc)) from None
    decision = planner.start(PlanContext(spec=loaded.spec, variables=loaded.variables,
                                         state={}, results={}))
    text = spec_json(loaded)
    created_ms = now_ms()
    runnable = tuple(j for j in decision.schedule if j.kind != "hitl")
    waiting = [waiting_entry(j, created_ms) for j in decision.schedule if j.kind == "hitl"]
    status = SessionStatus.RUNNING if decision.status == SessionStatus.COMPLETED \
        else decision.status
    paused_reason = ""
    if waiting and not runnable and status == SessionStatus.RUNNING:
        status = SessionStatus.PAUSED
        paused_reason = waiting_reason(waiting)
    new = NewSession(
        workflow_name=loaded.spec.name,
        pattern_type=pattern,
        spec_hash=loaded.spec_hash,
        spec_json=text,
        spec_digest=spec_digest(text),
        source=loaded.source,
        variables=dict(loaded.variables),
        state=decision.state,
        jobs=runnable,
        status=status,
        created_at=now_iso(),
        created_ms=created_ms,
        idempotency_key=idempotency_key,
        request_digest=request_digest(text, dict(loaded.variables)) if idempotency_key else "",
        error=decision.reason,
        paused_reason=paused_reason,
        waiting=waiting,
        timers=[(w["timeout_at_ms"], timeout_job(StepJob.from_json(w["job"])))
                for w in waiting if w["timeout_at_ms"]],
    )
    check_session_size(new, loaded.source, limits or current_limits())
    return new


async def start_session(store: Store, loaded: LoadedSpec,
                        idempotency_key: str | None = None) -> tuple[str, bool]:
    """(session id, created). A repeated idempotency key returns the first session when
    the request is the same; IdempotencyConflict when it is not."""
    return await store.create_session(new_session(loaded, idempotency_key))
