"""The HTTP backend: each operation one request (client/wire.py builds and decodes it),
idempotent ones retried on 503, 429 and lost connections; the two event streams
followed over server-sent events, reconnecting with Last-Event-ID."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from strands_durable.access import NAMESPACE_HEADER
from strands_durable.api.schemas import (
    ActionResponse,
    ArtifactList,
    CheckpointList,
    EventOut,
    EventPage,
    ForkResponse,
    Health,
    RequeueResponse,
    SessionPage,
    SubmitResponse,
)
from strands_durable.api.schemas_access import (
    AuditPage,
    TokenCreated,
    TokenCreateRequest,
    TokenList,
)
from strands_durable.api.schemas_fleet import QueueOut, WorkerList
from strands_durable.api.schemas_quotas import QuotaList, QuotaOut
from strands_durable.api.schemas_schedules import (
    ScheduleList,
    ScheduleRun,
    ScheduleView,
)
from strands_durable.api.schemas_transfer import ImportedOut, SessionExport
from strands_durable.api.schemas_webhooks import WebhookList, WebhookRetried
from strands_durable.client import wire
from strands_durable.client.backend import Changes, ListFilter, Submission
from strands_durable.client.errors import (
    ApiUnavailable,
    ClientError,
    ConnectionFailed,
    InvalidClientSetting,
    RateLimited,
)
from strands_durable.sessions.checkpoints import CheckpointDetail
from strands_durable.sessions.live import LiveEntry
from strands_durable.sessions.status import SessionDetail

M = TypeVar("M", bound=BaseModel)
Verify = bool | str | Path | ssl.SSLContext
RETRYABLE = (ApiUnavailable, RateLimited, ConnectionFailed)
BACKOFF_S = 0.25  # doubled per attempt, up to BACKOFF_MAX_S, unless Retry-After says
BACKOFF_MAX_S = 5.0


def tls_verify(verify: Verify) -> bool | ssl.SSLContext:
    """A CA bundle path becomes an SSL context (httpx wants one)."""
    if isinstance(verify, str | Path):
        try:
            return ssl.create_default_context(cafile=str(verify))
        except (OSError, ssl.SSLError) as exc:
            raise InvalidClientSetting(f"verify: cannot use {verify} as CA bundle "
                                       f"({exc})") from None
    return verify


def backoff_s(attempt: int, error: BaseException | None) -> float:
    """How long before attempt `attempt + 1`: Retry-After when the server said one."""
    said = error.retry_after_s if isinstance(error, ClientError) else None
    if said is not None:
        return min(said, wire.MAX_RETRY_AFTER_S)
    return min(BACKOFF_S * 2 ** (attempt - 1), BACKOFF_MAX_S)


def quota_path(namespace: str) -> str:
    return "/v1/quotas/" + quote(namespace, safe="")


class HttpBackend:
    def __init__(self, url: str, *, token: str | None, timeout: float, verify: Verify,
                 retries: int, transport: httpx.AsyncBaseTransport | None,
                 namespace: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if namespace is not None:
            headers[NAMESPACE_HEADER] = namespace
        self.retries = max(0, retries)
        self.http = httpx.AsyncClient(base_url=url.rstrip("/"), headers=headers,
                                      timeout=timeout, verify=tls_verify(verify),
                                      transport=transport)

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- one request ------------------------------------------------------------------
    async def _once(self, call: wire.Call) -> httpx.Response:
        what = f"{call.method} {call.path}"
        try:
            response = await self.http.request(call.method, call.path, params=call.params,
                                               json=call.body, headers=call.headers)
        except httpx.TransportError as exc:
            raise ConnectionFailed("connection_failed",
                                   f"{what}: no answer ({type(exc).__name__}: {exc})") from None
        if response.status_code >= 400:
            raise wire.error_of(response.status_code, response.content, response.headers, what)
        return response

    async def send(self, call: wire.Call) -> httpx.Response:
        """The answer to `call`, retried while it may be (client errors raised)."""
        if not call.idempotent or not self.retries:
            return await self._once(call)

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            return backoff_s(state.attempt_number, error)

        retrying = AsyncRetrying(stop=stop_after_attempt(self.retries + 1), wait=wait,
                                 retry=retry_if_exception(lambda e: isinstance(e, RETRYABLE)),
                                 reraise=True)
        response: httpx.Response | None = None
        async for attempt in retrying:
            with attempt:
                response = await self._once(call)
        assert response is not None
        return response

    async def typed(self, call: wire.Call, model: type[M]) -> M:
        response = await self.send(call)
        return wire.decode(model, response.status_code, response.content,
                           f"{call.method} {call.path}")

    # -- operations -------------------------------------------------------------------
    async def submit(self, s: Submission) -> SubmitResponse:
        return await self.typed(wire.submit_call(
            s.spec, variables=s.variables, idempotency_key=s.idempotency_key,
            priority=s.priority, provider=s.provider, webhook=s.webhook), SubmitResponse)

    async def get(self, session_id: str) -> SessionDetail:
        return await self.typed(wire.Call("GET", wire.session_path(session_id)), SessionDetail)

    async def list_page(self, query: ListFilter, cursor: str | None) -> SessionPage:
        status = str(query.status) if query.status is not None else None
        return await self.typed(wire.list_call(
            status=status, workflow=query.workflow, updated_after=query.updated_after,
            updated_before=query.updated_before, limit=query.limit, cursor=cursor),
            SessionPage)

    async def events_page(self, session_id: str, after: str | None, limit: int) -> EventPage:
        params = {"limit": str(limit), **({"after": after} if after else {})}
        return await self.typed(wire.Call("GET", wire.session_path(session_id, "events"),
                                          params=params), EventPage)

    def follow_events(self, session_id: str, after: str | None) -> AsyncIterator[EventOut]:
        return self._follow(wire.session_path(session_id, "events"), {"follow": "1"},
                            after, EventOut)

    def follow_stream(self, session_id: str, after: str | None) -> AsyncIterator[LiveEntry]:
        return self._follow(wire.session_path(session_id, "stream"), {}, after, LiveEntry)

    async def _action(self, session_id: str, action: str, body: Any = None
                      ) -> ActionResponse:
        # Pause, cancel and signal change state: a lost answer is not retried blindly.
        return await self.typed(wire.Call("POST", wire.session_path(session_id, action),
                                          body=body, idempotent=False), ActionResponse)

    async def pause(self, session_id: str) -> ActionResponse:
        return await self._action(session_id, "pause")

    async def cancel(self, session_id: str) -> ActionResponse:
        return await self._action(session_id, "cancel")

    async def resume(self, session_id: str, changes: Changes) -> ActionResponse:
        return await self._action(session_id, "resume", wire.resume_body(
            variables=changes.variables, budgets=changes.budgets, spec=changes.spec))

    async def fork(self, session_id: str, checkpoint: int, changes: Changes) -> ForkResponse:
        body = wire.resume_body(variables=changes.variables, budgets=changes.budgets,
                                from_checkpoint=checkpoint)
        return await self.typed(wire.Call("POST", wire.session_path(session_id, "resume"),
                                          body=body, idempotent=False), ForkResponse)

    async def signal(self, session_id: str, response: str) -> ActionResponse:
        return await self._action(session_id, "signal", {"response": response})

    async def requeue(self, session_id: str, step: str | None, dead: bool, dry_run: bool
                      ) -> RequeueResponse:
        body = wire.requeue_body(step=step, dead=dead, dry_run=dry_run)
        return await self.typed(wire.Call("POST", wire.session_path(session_id, "requeue"),
                                          body=body, idempotent=dry_run), RequeueResponse)

    async def delete(self, session_id: str) -> None:
        await self.send(wire.Call("DELETE", wire.session_path(session_id)))

    async def artifacts(self, session_id: str) -> ArtifactList:
        return await self.typed(wire.Call("GET", wire.session_path(session_id, "artifacts")),
                                ArtifactList)

    async def artifact(self, session_id: str, name: str) -> bytes:
        return (await self.send(wire.Call(
            "GET", wire.session_path(session_id, "artifacts", name)))).content

    async def checkpoints(self, session_id: str) -> CheckpointList:
        return await self.typed(wire.Call("GET", wire.session_path(session_id, "checkpoints")),
                                CheckpointList)

    async def checkpoint(self, session_id: str, n: int) -> CheckpointDetail:
        return await self.typed(wire.Call(
            "GET", wire.session_path(session_id, "checkpoints", str(n))), CheckpointDetail)

    async def export_session(self, session_id: str) -> SessionExport:
        return await self.typed(wire.Call("GET", wire.session_path(session_id, "export")),
                                SessionExport)

    async def import_session(self, document: SessionExport, new_id: bool) -> ImportedOut:
        # Not idempotent: a retry after a lost answer would be refused as existing.
        return await self.typed(wire.Call(
            "POST", "/v1/sessions/import", params={"new_id": "true"} if new_id else {},
            body=document.model_dump(mode="json"), idempotent=False), ImportedOut)

    async def health(self) -> Health:
        try:
            return await self.typed(wire.Call("GET", "/healthz"), Health)
        except ApiUnavailable as exc:
            # /healthz answers its own document with 503 (Redis down): a health, not an error.
            try:
                return Health.model_validate(exc.detail_value or {"status": "unavailable"})
            except ValidationError:
                return Health(status="unavailable")

    async def metrics(self) -> str:
        return (await self.send(wire.Call("GET", "/metrics"))).text

    async def workers(self) -> WorkerList:
        return await self.typed(wire.Call("GET", "/v1/workers"), WorkerList)

    async def queue(self) -> QueueOut:
        return await self.typed(wire.Call("GET", "/v1/queue"), QueueOut)

    async def tokens(self) -> TokenList:
        return await self.typed(wire.Call("GET", "/v1/tokens"), TokenList)

    async def create_token(self, request: TokenCreateRequest) -> TokenCreated:
        return await self.typed(wire.Call("POST", "/v1/tokens", body=request.model_dump(
            mode="json", exclude_none=True), idempotent=False), TokenCreated)

    async def revoke_token(self, token_id: str) -> None:
        await self.send(wire.Call("DELETE", "/v1/tokens/" + quote(token_id, safe="")))

    async def audit(self, limit: int, before: str | None) -> AuditPage:
        params = {"limit": str(limit), **({"before": before} if before else {})}
        return await self.typed(wire.Call("GET", "/v1/audit", params=params), AuditPage)

    async def quotas(self) -> QuotaList:
        return await self.typed(wire.Call("GET", "/v1/quotas"), QuotaList)

    async def quota(self, namespace: str) -> QuotaOut:
        return await self.typed(wire.Call("GET", quota_path(namespace)), QuotaOut)

    async def set_quota(self, namespace: str, body: dict[str, Any]) -> QuotaOut:
        # A PUT replaces the quota whole: sending it twice sets the same quota.
        return await self.typed(wire.Call("PUT", quota_path(namespace), body=body), QuotaOut)

    async def delete_quota(self, namespace: str) -> None:
        await self.send(wire.Call("DELETE", quota_path(namespace), idempotent=False))

    async def webhooks(self, status: str, limit: int) -> WebhookList:
        params = {"status": status, "limit": str(limit)}
        return await self.typed(wire.Call("GET", "/v1/webhooks", params=params), WebhookList)

    async def retry_webhook(self, webhook_id: str) -> WebhookRetried:
        path = "/v1/webhooks/" + quote(webhook_id, safe="") + "/retry"
        return await self.typed(wire.Call("POST", path, idempotent=False), WebhookRetried)

    # -- server-sent events -----------------------------------------------------------
    async def _follow(self, path: str, params: dict[str, str], after: str | None,
                      model: type[M]) -> AsyncIterator[M]:
        """Frames as `model` until the `end` frame; a dropped connection (or a 503) is
        reconnected after the last id seen, up to `retries` times in a row."""
        last, failures = after, 0
        while True:
            try:
                async with aclosing(self._frames(path, params, last)) as frames:
                    async for frame in frames:
                        failures = 0
                        if frame.event == "end":
                            return
                        if frame.event == "error":
                            raise wire.stream_error(frame)
                        last = frame.id or last
                        yield wire.decode(model, 200, (frame.data or "").encode(),
                                          f"GET {path}")
            except RETRYABLE as exc:
                failures += 1
                if failures > self.retries:
                    raise
                await asyncio.sleep(backoff_s(failures, exc))

    async def _frames(self, path: str, params: dict[str, str], last: str | None
                      ) -> AsyncGenerator[wire.SseFrame, None]:
        headers = {"Last-Event-ID": last} if last else {}
        what = f"GET {path}"
        try:
            async with self.http.stream("GET", path, params=params, headers=headers) as r:
                if r.status_code >= 400:
                    raise wire.error_of(r.status_code, await r.aread(), r.headers, what)
                parser = wire.SseParser()
                async for line in r.aiter_lines():
                    frame = parser.feed(line)
                    if frame is not None:
                        yield frame
        except httpx.TransportError as exc:
            raise ConnectionFailed("connection_failed",
                                   f"{what}: stream lost ({type(exc).__name__}: {exc})") from None
        # The server closed the stream without an `end` frame (a restart): reconnect.
        raise ConnectionFailed("connection_failed", f"{what}: stream closed before its end")


    # -- schedules (/v1/schedules) ----------------------------------------------------
    async def schedules(self) -> ScheduleList:
        return await self.typed(wire.Call("GET", "/v1/schedules"), ScheduleList)

    async def schedule(self, name: str) -> ScheduleView:
        return await self.typed(wire.Call("GET", _schedule_path(name)), ScheduleView)

    async def create_schedule(self, body: dict[str, Any]) -> ScheduleView:
        return await self.typed(wire.Call("POST", "/v1/schedules", body=body,
                                          idempotent=False), ScheduleView)

    async def update_schedule(self, name: str, body: dict[str, Any]) -> ScheduleView:
        return await self.typed(wire.Call("PATCH", _schedule_path(name), body=body,
                                          idempotent=False), ScheduleView)

    async def delete_schedule(self, name: str) -> None:
        await self.send(wire.Call("DELETE", _schedule_path(name), idempotent=False))

    async def schedule_action(self, name: str, action: str) -> ScheduleView:
        return await self.typed(wire.Call("POST", _schedule_path(name, action),
                                          idempotent=False), ScheduleView)

    async def trigger_schedule(self, name: str) -> ScheduleRun:
        # A lost answer is not retried: a retry would start a second run.
        return await self.typed(wire.Call("POST", _schedule_path(name, "trigger"),
                                          idempotent=False), ScheduleRun)


def _schedule_path(name: str, *rest: str) -> str:
    """/v1/schedules/{name}/...; the name quoted, so no name reaches another route."""
    return "/".join(["/v1/schedules", quote(name, safe=""), *rest])
