"""The Redis backend: the API's operations run here, on the store, with the functions
its routes call (api/routes_*.py -> sessions/*.py, store/fleet.py), and checked by the
same request models; no API server between. Events and the live stream are followed
with the store's blocking reads, as the API's followers do."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from strands_durable.access import DEFAULT_NAMESPACE
from strands_durable.api.errors import ApiError
from strands_durable.api.listing import (
    BadCursor,
    ListQuery,
    decode_cursor,
    encode_cursor,
    epoch_ms,
)
from strands_durable.api.listing import list_page as list_sessions_page
from strands_durable.api.routes_fleet import fleet_queue, fleet_workers
from strands_durable.api.routes_system import worker_health
from strands_durable.api.schemas import (
    ActionResponse,
    ArtifactInfo,
    ArtifactList,
    CheckpointList,
    EventOut,
    EventPage,
    ForkResponse,
    Health,
    RedisHealth,
    RequeueRequest,
    RequeueResponse,
    ResumeRequest,
    SessionPage,
    SubmitRequest,
    SubmitResponse,
)
from strands_durable.api.schemas_access import (
    AuditPage,
    TokenCreated,
    TokenCreateRequest,
    TokenList,
    TokenOut,
)
from strands_durable.api.schemas_fleet import QueueOut, WorkerList
from strands_durable.api.schemas_transfer import ImportedOut, SessionExport
from strands_durable.api.schemas_webhooks import WebhookList, WebhookRetried
from strands_durable.api.submission import Submitted, load_only, plan_submitted, with_webhook
from strands_durable.client import wire
from strands_durable.client.backend import Changes, ListFilter, Submission
from strands_durable.client.errors import (
    ApiInvalidInput,
    ApiNotFound,
    ClientError,
    ConnectionFailed,
    class_for,
)
from strands_durable.client.redis_quotas import RedisQuotas
from strands_durable.client.redis_schedules import RedisSchedules
from strands_durable.metrics import render_api_metrics
from strands_durable.models import SessionStatus, now_ms
from strands_durable.sessions import access, control, transfer
from strands_durable.sessions.checkpoints import (
    CheckpointDetail,
    fork_from_checkpoint,
    get_checkpoint,
    list_checkpoints,
)
from strands_durable.sessions.deletion import delete_session
from strands_durable.sessions.history import Idle, event_doc, event_docs, follow_events
from strands_durable.sessions.live import LiveEntry, LiveFollowers
from strands_durable.sessions.quotas import create_within_quota
from strands_durable.sessions.requeue import requeue as do_requeue
from strands_durable.sessions.start import with_priority
from strands_durable.sessions.status import SessionDetail, session_status, summary
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store, session_settings
from strands_durable.store.fleet import list_workers, liveness_window_s
from strands_durable.store.outage import REDIS_DOWN
from strands_durable.store.store import Store

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")
MAX_PAGE = 500  # GET /v1/sessions's largest page
FOLLOW_BLOCK_MS = 1_000  # a blocking read's length; under the socket timeout (below)


def checked(model: type[M], body: dict[str, Any]) -> M:
    """`body` as the route's request model: the same 422 the API would answer."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
                             for e in exc.errors()[:5])
        raise ApiInvalidInput("invalid_request", problems, 422,
                              {"errors": exc.errors(include_url=False)}) from None


def as_client_error(exc: ApiError) -> ClientError:
    return class_for(exc.status)(exc.code, exc.message, exc.status, exc.details)



def python_actor() -> str:
    """Who a Redis-backed client acts as in the audit trail (it holds no token)."""
    return access.local_actor("python")


def redis_down(exc: Exception) -> ConnectionFailed:
    return ConnectionFailed("redis_unavailable", f"cannot reach Redis ({exc})")


def answering_redis_down(cls: type[T]) -> type[T]:
    """Every public operation of `cls` raises ConnectionFailed (an Unavailable) when
    Redis cannot be reached, as the API answers 503, instead of redis-py's own error."""
    for name, fn in list(vars(cls).items()):
        if name.startswith("_") or not callable(fn):
            continue
        if inspect.isasyncgenfunction(fn):
            setattr(cls, name, _generator_guard(fn))
        elif inspect.iscoroutinefunction(fn):
            setattr(cls, name, _coroutine_guard(fn))
    return cls


def _coroutine_guard(fn: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(fn)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except REDIS_DOWN as exc:
            raise redis_down(exc) from None

    return guarded


def _generator_guard(fn: Callable[..., AsyncIterator[Any]]) -> Callable[..., AsyncIterator[Any]]:
    @functools.wraps(fn)
    async def guarded(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        try:
            async for item in fn(*args, **kwargs):
                yield item
        except REDIS_DOWN as exc:
            raise redis_down(exc) from None

    return guarded


# The schedule operations answer Redis down as the others do.
answering_redis_down(RedisSchedules)
answering_redis_down(RedisQuotas)


@answering_redis_down
class RedisBackend(RedisSchedules, RedisQuotas):
    def __init__(self, settings: DurableSettings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self.block_ms = max(100, min(FOLLOW_BLOCK_MS,
                                     int(settings.redis_socket_timeout_s * 1000) - 1000))
        self.followers: LiveFollowers | None = None
        self.prepared = False

    @classmethod
    def open(cls, url: str | None, *, key_prefix: str | None = None) -> RedisBackend:
        settings = DurableSettings()
        updates: dict[str, Any] = {"key_prefix": key_prefix} if key_prefix else {}
        if url is not None:
            updates["redis_url"] = url
        settings = settings.model_copy(update=updates)
        if url is None:
            settings = session_settings(settings)  # DURABLE_REDIS_URL, else the local store
        return cls(settings, open_store(settings))

    async def aclose(self) -> None:
        await self.store.close()

    async def _prepared(self) -> Store:
        if not self.prepared:
            await self.store.prepare()
            self.prepared = True
        return self.store

    async def _in_thread(self, work: Callable[[Submitted], T], submitted: Submitted) -> T:
        """Loading a spec is CPU work: off the loop, as the API's render stage does."""
        try:
            return await asyncio.to_thread(work, submitted)
        except ApiError as exc:  # 413: the spec over its limit
            raise as_client_error(exc) from None

    async def submit(self, s: Submission) -> SubmitResponse:
        body = checked(SubmitRequest, wire.submit_call(
            s.spec, variables=s.variables, priority=s.priority, provider=s.provider,
            webhook=s.webhook).body)
        planned = await self._in_thread(plan_submitted, Submitted(
            body.spec, body.variables, body.provider, body.script, s.idempotency_key))
        store = await self._prepared()
        planned = with_webhook(with_priority(planned, body.priority), body.webhook,
                               self.settings.webhook_allow_list)
        sid, created = await create_within_quota(store, planned)
        if created:
            await self._audit("submit", sid, planned.namespace)
        record = await store.get_session(sid)
        return SubmitResponse(session_id=sid, status=record.status, created=created)

    async def get(self, session_id: str) -> SessionDetail:
        return await session_status(self.store, session_id)

    async def list_page(self, query: ListFilter, cursor: str | None) -> SessionPage:
        try:
            position = decode_cursor(cursor) if cursor else None
        except BadCursor as exc:
            raise ApiInvalidInput("invalid_cursor", str(exc), 422, {"cursor": cursor}) from None
        try:
            status = SessionStatus(query.status) if query.status is not None else None
        except ValueError:
            raise ApiInvalidInput("invalid_request", f"status: {query.status!r} is not one "
                                  f"of {', '.join(SessionStatus)}", 422) from None
        if not 1 <= query.limit <= MAX_PAGE:
            raise ApiInvalidInput("invalid_request", f"limit: {query.limit} is not within "
                                  f"1-{MAX_PAGE}", 422)
        page = await list_sessions_page(self.store, ListQuery(
            limit=query.limit, status=status, workflow=query.workflow, cursor=position,
            updated_after_ms=epoch_ms(query.updated_after),
            updated_before_ms=epoch_ms(query.updated_before)))
        return SessionPage(items=[summary(r) for r in page.records],
                           next_cursor=encode_cursor(page.next_cursor)
                           if page.next_cursor else None)

    async def events_page(self, session_id: str, after: str | None, limit: int) -> EventPage:
        await self.store.get_session(session_id)
        docs = event_docs(await self.store.events(session_id, after=after or "-", count=limit))
        return EventPage(items=[EventOut.model_validate(d) for d in docs],
                         last_id=docs[-1]["id"] if docs else after)

    async def follow_events(self, session_id: str, after: str | None
                            ) -> AsyncIterator[EventOut]:
        await self.store.get_session(session_id)  # NotFound before anything is followed
        async for item in follow_events(self.store, session_id, after or "0-0",
                                        block_ms=self.block_ms):
            if not isinstance(item, Idle):
                yield EventOut.model_validate(event_doc(*item))

    async def follow_stream(self, session_id: str, after: str | None
                            ) -> AsyncIterator[LiveEntry]:
        await self.store.get_session(session_id)
        if self.followers is None:
            self.followers = LiveFollowers(self.store, self.block_ms)
        async for item in self.followers.follow(session_id, after or "0-0"):
            if not isinstance(item, Idle):
                yield item

    async def _audit(self, action: str, session_id: str, namespace: str | None = None) -> None:
        await access.record_action(self.store, action, session_id, actor=python_actor(),
                                   source="python", namespace=namespace)

    async def pause(self, session_id: str) -> ActionResponse:
        status = await control.pause(self.store, session_id)
        await self._audit("pause", session_id)
        return ActionResponse(session_id=session_id, status=status)

    async def cancel(self, session_id: str) -> ActionResponse:
        status = await control.cancel(self.store, session_id)
        await self._audit("cancel", session_id)
        return ActionResponse(session_id=session_id, status=status)

    async def resume(self, session_id: str, changes: Changes) -> ActionResponse:
        req = checked(ResumeRequest, wire.resume_body(
            variables=changes.variables, budgets=changes.budgets, spec=changes.spec))
        new_spec = (await self._in_thread(load_only, Submitted(req.spec))
                    if req.spec is not None else None)
        outcome = await control.resume(self.store, session_id, variables=req.variables,
                                       budget_sets=req.budgets.model_dump(exclude_none=True),
                                       new_spec=new_spec)
        await self._audit("resume", session_id)
        return ActionResponse(session_id=session_id, status=outcome.status,
                              notes=outcome.notes)

    async def fork(self, session_id: str, checkpoint: int, changes: Changes) -> ForkResponse:
        req = checked(ResumeRequest, wire.resume_body(
            variables=changes.variables, budgets=changes.budgets, from_checkpoint=checkpoint))
        new_sid = await fork_from_checkpoint(
            self.store, session_id, checkpoint, variables=req.variables,
            budget_sets=req.budgets.model_dump(exclude_none=True))
        await self._audit("fork", session_id)
        record = await self.store.get_session(new_sid)
        return ForkResponse(session_id=new_sid, forked_from=session_id, checkpoint=checkpoint,
                            status=record.status.value)

    async def signal(self, session_id: str, response: str) -> ActionResponse:
        outcome = await control.resume(self.store, session_id, hitl_response=response)
        await self._audit("signal", session_id)
        return ActionResponse(session_id=session_id, status=outcome.status,
                              notes=outcome.notes)

    async def requeue(self, session_id: str, step: str | None, dead: bool, dry_run: bool
                      ) -> RequeueResponse:
        req = checked(RequeueRequest, wire.requeue_body(step=step, dead=dead, dry_run=dry_run))
        report = await do_requeue(self.store, session_id, step=req.step, dead=req.dead,
                                  dry_run=req.dry_run)
        if not req.dry_run and session_id is not None:
            await self._audit("requeue", session_id)
        return RequeueResponse.model_validate(report.to_dict())

    async def delete(self, session_id: str) -> None:
        namespace = await self.store.session_namespace(session_id)
        await delete_session(self.store, session_id)
        await self._audit("delete", session_id, namespace)

    async def artifacts(self, session_id: str) -> ArtifactList:
        await self.store.get_session(session_id)
        found = await self.store.artifacts(session_id)
        return ArtifactList(items=[ArtifactInfo(name=n, size_bytes=len(body.encode()))
                                   for n, body in sorted(found.items())])

    async def artifact(self, session_id: str, name: str) -> bytes:
        await self.store.get_session(session_id)
        body = (await self.store.artifacts(session_id)).get(name)
        if body is None:
            raise ApiNotFound("artifact_not_found",
                              f"session {session_id} has no artifact {name!r}", 404,
                              {"session_id": session_id, "name": name})
        return body.encode()

    async def checkpoints(self, session_id: str) -> CheckpointList:
        return CheckpointList(items=await list_checkpoints(self.store, session_id))

    async def checkpoint(self, session_id: str, n: int) -> CheckpointDetail:
        return await get_checkpoint(self.store, session_id, n)

    async def export_session(self, session_id: str) -> SessionExport:
        return await transfer.export_session(self.store, session_id)

    async def import_session(self, document: SessionExport, new_id: bool) -> ImportedOut:
        imported = await transfer.import_session(await self._prepared(), document,
                                                 new_id=new_id)
        return ImportedOut(**imported.__dict__)

    async def health(self) -> Health:
        window_s = liveness_window_s(self.settings.heartbeat_s)
        try:
            await self.store.ping()
            workers = worker_health(await list_workers(self.store, alive_within_s=window_s),
                                    window_s)
        except (*REDIS_DOWN, TimeoutError) as exc:
            return Health(status="unavailable",
                          redis=RedisHealth(ok=False, error=str(exc) or type(exc).__name__))
        return Health(status="ok" if workers.recent else "degraded",
                      redis=RedisHealth(ok=True), workers=workers)

    async def metrics(self) -> str:
        body = await render_api_metrics(self.store, heartbeat_s=self.settings.heartbeat_s)
        return body.decode()

    async def workers(self) -> WorkerList:
        return await fleet_workers(self.store, self.settings)

    async def queue(self) -> QueueOut:
        return await fleet_queue(self.store)

    async def tokens(self) -> TokenList:
        now = now_ms()
        return TokenList(items=[TokenOut.of(r, now) for r in await access.list_tokens(
            self.store)])

    async def create_token(self, request: TokenCreateRequest) -> TokenCreated:
        request = checked(TokenCreateRequest, request.model_dump(mode="json"))
        issued = await access.create_token(
            self.store, request.role, request.namespaces, name=request.name,
            expires_in_s=request.expires_in_s, actor=python_actor(), source="python")
        return TokenCreated(token=issued.token, info=TokenOut.of(issued.record, now_ms()))

    async def revoke_token(self, token_id: str) -> None:
        await access.revoke_token(self.store, token_id, actor=python_actor(), source="python")

    async def audit(self, limit: int, before: str | None) -> AuditPage:
        items = await access.audit_page(self.store, DEFAULT_NAMESPACE, limit, before)
        return AuditPage(items=items, next_before=items[-1].id if len(items) == limit
                         else None)

    async def webhooks(self, status: str, limit: int) -> WebhookList:
        from strands_durable.api.routes_webhooks import list_outbox
        from strands_durable.api.schemas_webhooks import WebhookListQuery

        query = checked(WebhookListQuery, {"status": status, "limit": limit})
        return await list_outbox(self.store, self.settings, query.status, query.limit, None)

    async def retry_webhook(self, webhook_id: str) -> WebhookRetried:
        from strands_durable.api.routes_webhooks import retry_outbox

        return await retry_outbox(self.store, self.settings, webhook_id, None)
