"""`AsyncClient`: every operation of the HTTP API as a typed coroutine, over HTTP or,
with `connect_redis`, on a Redis store directly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any

import httpx

from strands_durable.access import NAMESPACE_FORM, is_namespace
from strands_durable.api.schemas import (
    ActionResponse,
    ArtifactInfo,
    EventOut,
    ForkResponse,
    Health,
    RequeueResponse,
    SubmitResponse,
)
from strands_durable.api.schemas_fleet import QueueOut, WorkerOut
from strands_durable.api.schemas_webhooks import WebhookList, WebhookRetried
from strands_durable.client.access import AsyncAccess
from strands_durable.client.backend import Backend, Changes, ListFilter, Submission
from strands_durable.client.errors import InvalidClientSetting, WaitTimeout
from strands_durable.client.http_backend import HttpBackend, Verify
from strands_durable.client.quotas import AsyncQuotas
from strands_durable.client.schedules import AsyncSchedules
from strands_durable.client.transfer import TransferMethods
from strands_durable.client.wire import SpecInput
from strands_durable.errors import InvalidInput
from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import Checkpoint, CheckpointDetail
from strands_durable.sessions.live import LiveEntry
from strands_durable.sessions.status import SessionDetail, SessionSummary
from strands_durable.webhooks import WebhookSubscription

DEFAULT_URL = "http://127.0.0.1:8080"
EVENTS_PAGE = 1_000
# `list` is a method here: the builtin under another name for the annotations below.
Artifacts = list[ArtifactInfo]
Checkpoints = list[Checkpoint]
Workers = list[WorkerOut]


class AsyncClient(AsyncSchedules, TransferMethods, AsyncAccess, AsyncQuotas):
    """The API's operations as coroutines, answered with the API's own models.

    ```python
    async with AsyncClient("http://127.0.0.1:8080", token="s3cret") as client:
        started = await client.submit(Path("examples/chain-research.yaml"))
        done = await client.wait(started.session_id, timeout=120)
        print(done.status, done.final_response)
    ```

    `verify` is True, False, a CA bundle's path or an `ssl.SSLContext`; `retries` is how
    many times an idempotent call (GET, DELETE, a submit with an idempotency key, a
    requeue dry run) is tried again on 503, 429 or a lost connection, after Retry-After
    when the server sends one. Errors are `DurableError` kinds (strands_durable.client.
    errors): `except NotFound` catches an unknown session. `AsyncClient.connect_redis()`
    answers the same methods without an API server."""

    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None,
                 timeout: float = 30.0, verify: Verify = True, retries: int = 3,
                 transport: httpx.AsyncBaseTransport | None = None,
                 namespace: str | None = None) -> None:
        if namespace is not None and not is_namespace(namespace):
            raise InvalidClientSetting(f"namespace {namespace[:80]!r} is not {NAMESPACE_FORM}")
        self._backend: Backend = HttpBackend(url, token=token, timeout=timeout, verify=verify,
                                             retries=retries, transport=transport,
                                             namespace=namespace)

    @classmethod
    def connect_redis(cls, url: str | None = None, *, key_prefix: str | None = None
                      ) -> AsyncClient:
        """A client that runs the same operations on a Redis store directly, no API
        server: `url` None means the settings' store (DURABLE_REDIS_URL, else your local
        store, started on demand). Events and the live stream are followed with blocking
        reads of the store.

        ```python
        async with AsyncClient.connect_redis("redis://localhost:6379/0") as client:
            print([s.session_id async for s in client.list(status="running")])
        ```"""
        from strands_durable.client.redis_backend import RedisBackend

        client = cls.__new__(cls)
        client._backend = RedisBackend.open(url, key_prefix=key_prefix)
        return client

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (`async with` does it for you)."""
        await self._backend.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self._backend).__name__})"  # never the token

    # -- sessions ---------------------------------------------------------------------
    async def submit(self, spec: SpecInput, *, variables: Mapping[str, Any] | None = None,
                     idempotency_key: str | None = None, priority: int | None = None,
                     provider: str | None = None,
                     webhook: WebhookSubscription | None = None) -> SubmitResponse:
        """Start a session of `spec`: a `pathlib.Path` to a YAML file, YAML text, the
        document as a dict, or a `strands_durable.spec.model.Spec`. The same
        `idempotency_key` again answers the first session (`created` False). `webhook`:
        where its events are POSTed (`strands_durable.webhooks.WebhookSubscription`).

        ```python
        started = await client.submit(Path("examples/chain-research.yaml"),
                                      variables={"topic": "kelp"}, idempotency_key="kelp-1")
        ```"""
        return await self._backend.submit(Submission(spec, variables, idempotency_key,
                                                     priority, provider, webhook))

    async def get(self, session_id: str) -> SessionDetail:
        """The session's status document (`durable status --json`).

        ```python
        detail = await client.get(sid); print(detail.status, detail.steps_committed)
        ```"""
        return await self._backend.get(session_id)

    async def list(self, *, status: SessionStatus | str | None = None,
                   workflow: str | None = None, updated_after: datetime | None = None,
                   updated_before: datetime | None = None, page_size: int = 50
                   ) -> AsyncIterator[SessionSummary]:
        """Every session matching the filters, most recently updated first, fetched a
        page (`page_size`, 1-500) at a time as you iterate.

        ```python
        async for s in client.list(status="failed", workflow="chain-research"):
            print(s.session_id, s.error)
        ```"""
        query = ListFilter(status, workflow, updated_after, updated_before, page_size)
        cursor: str | None = None
        while True:
            page = await self._backend.list_page(query, cursor)
            for item in page.items:
                yield item
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def wait(self, session_id: str, *, timeout: float | None = None,
                   poll: float = 0.5) -> SessionDetail:
        """Wait until the session is no longer `running` and answer its status document:
        completed, failed or cancelled, or paused (by an operator, a budget, or for a
        human's answer: `detail.waiting` then names the step; answer with `signal`).
        Raises `WaitTimeout` when `timeout` seconds pass first. Polls every `poll` s.

        ```python
        done = await client.wait(sid, timeout=300)
        if done.status == "paused" and done.waiting:
            await client.signal(sid, "approved")
        ```"""
        if not poll > 0:
            raise InvalidInput(f"wait: poll must be a positive number of seconds, not {poll!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            detail = await self._backend.get(session_id)
            if detail.status != SessionStatus.RUNNING:
                return detail
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeout("wait_timeout", f"session {session_id} still running "
                                  f"after {timeout} s", 0,
                                  {"session_id": session_id, "timeout_s": timeout})
            left = poll if deadline is None else min(poll, max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(left)

    async def events(self, session_id: str, *, after: str | None = None, follow: bool = True
                     ) -> AsyncIterator[EventOut]:
        """The session's events, oldest first (after the event id `after`). With
        `follow` it goes on as new ones are written, until the session ends; a dropped
        connection is resumed after the last event seen (Last-Event-ID).

        ```python
        async for event in client.events(sid):
            print(event.type, event.step)
        ```"""
        if follow:
            async for event in self._backend.follow_events(session_id, after):
                yield event
            return
        while True:
            page = await self._backend.events_page(session_id, after, EVENTS_PAGE)
            for event in page.items:
                yield event
            if len(page.items) < EVENTS_PAGE:
                return
            after = page.last_id

    async def stream(self, session_id: str, *, after: str | None = None
                     ) -> AsyncIterator[LiveEntry]:
        """What the session's models write as they write it (text deltas, tool calls,
        turn ends, attempts) until the session ends; resumed like `events`.

        ```python
        async for entry in client.stream(sid):
            if entry.kind == "text":
                print(entry.text, end="")
        ```"""
        async for entry in self._backend.follow_stream(session_id, after):
            yield entry

    # -- control ----------------------------------------------------------------------
    async def pause(self, session_id: str) -> ActionResponse:
        """Pause at the next step boundary (running steps finish and commit).

        ```python
        await client.pause(sid)
        ```"""
        return await self._backend.pause(session_id)

    async def resume(self, session_id: str, *, variables: Mapping[str, Any] | None = None,
                     budgets: Mapping[str, int] | None = None, spec: SpecInput | None = None
                     ) -> ActionResponse:
        """Continue a paused or failed session, optionally with new variables, raised
        budgets (`max_tokens`, `max_steps`, `max_duration_s`) or a new spec.

        ```python
        await client.resume(sid, budgets={"max_tokens": 50_000})
        ```"""
        return await self._backend.resume(session_id, Changes(variables, budgets, spec))

    async def fork(self, session_id: str, checkpoint: int, *,
                   variables: Mapping[str, Any] | None = None,
                   budgets: Mapping[str, int] | None = None) -> ForkResponse:
        """A new session from checkpoint `checkpoint` of this one (kept as it is).

        ```python
        forked = await client.fork(sid, 1, variables={"topic": "kelp"})
        await client.wait(forked.session_id)
        ```"""
        return await self._backend.fork(session_id, checkpoint, Changes(variables, budgets))

    async def cancel(self, session_id: str) -> ActionResponse:
        """Stop scheduling and mark the session cancelled.

        ```python
        await client.cancel(sid)
        ```"""
        return await self._backend.cancel(session_id)

    async def signal(self, session_id: str, response: str) -> ActionResponse:
        """Answer the human-in-the-loop step the session waits for; it then continues.

        ```python
        await client.signal(sid, "approved")
        ```"""
        return await self._backend.signal(session_id, response)

    async def requeue(self, session_id: str, *, step: str | None = None, dead: bool = False,
                      dry_run: bool = False) -> RequeueResponse:
        """Put failed or dead-lettered steps back on the stream (only `step`, only dead
        ones, or just report what would move).

        ```python
        report = await client.requeue(sid, dry_run=True)
        ```"""
        return await self._backend.requeue(session_id, step, dead, dry_run)

    async def delete(self, session_id: str) -> None:
        """Delete the session and everything it stored.

        ```python
        await client.delete(sid)
        ```"""
        await self._backend.delete(session_id)

    # -- outputs ----------------------------------------------------------------------
    async def artifacts(self, session_id: str) -> Artifacts:
        """The artifacts a completed session rendered (name and size).

        ```python
        names = [a.name for a in await client.artifacts(sid)]
        ```"""
        return (await self._backend.artifacts(session_id)).items

    async def artifact(self, session_id: str, name: str) -> bytes:
        """One artifact's content.

        ```python
        Path("report.md").write_bytes(await client.artifact(sid, "report.md"))
        ```"""
        return await self._backend.artifact(session_id, name)

    async def checkpoints(self, session_id: str) -> Checkpoints:
        """Every checkpoint (one per commit), numbered from 1.

        ```python
        for c in await client.checkpoints(sid): print(c.n, c.step, c.clean)
        ```"""
        return (await self._backend.checkpoints(session_id)).items

    async def checkpoint(self, session_id: str, n: int) -> CheckpointDetail:
        """Checkpoint `n` in full: pattern_state and token usage at that point.

        ```python
        state = (await client.checkpoint(sid, 2)).pattern_state
        ```"""
        return await self._backend.checkpoint(session_id, n)

    # -- the fleet --------------------------------------------------------------------
    async def health(self) -> Health:
        """/healthz: `ok`, `degraded` (no worker seen recently) or `unavailable` (Redis
        down; answered, not raised). Details only with the token.

        ```python
        assert (await client.health()).status == "ok"
        ```"""
        return await self._backend.health()

    async def metrics(self) -> str:
        """/metrics: Prometheus text (this API process's and the fleet's).

        ```python
        text = await client.metrics()
        ```"""
        return await self._backend.metrics()

    async def workers(self) -> Workers:
        """The workers, live ones first (`durable workers --json`).

        ```python
        alive = [w.consumer for w in await client.workers() if w.alive]
        ```"""
        return (await self._backend.workers()).items

    async def queue(self) -> QueueOut:
        """The step streams per shard and in total (`durable queue --json`).

        ```python
        print((await client.queue()).total["lag"])
        ```"""
        return await self._backend.queue()

    # -- the webhook outbox --------------------------------------------------------------
    async def webhooks(self, *, status: str = "pending", limit: int = 50) -> WebhookList:
        """The webhook outbox's newest entries in `status` (pending, in_flight, delivered,
        dead), an admin token; never a secret (`durable webhooks list --json`).

        ```python
        for hook in (await client.webhooks(status="dead")).items:
            print(hook.id, hook.event, hook.last_error)
        ```"""
        return await self._backend.webhooks(status, limit)

    async def retry_webhook(self, webhook_id: str) -> WebhookRetried:
        """Deliver a dead (or pending) webhook again now, with a fresh day of retries.

        ```python
        await client.retry_webhook(hook.id)
        ```"""
        return await self._backend.retry_webhook(webhook_id)
