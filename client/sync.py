"""`Client`: the `AsyncClient`'s methods, blocking. One private event loop per client,
on a thread of its own, runs the async client's coroutines: one implementation of
every operation, the sync methods are one line each."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import httpx

from strands_durable.api.schemas import (
    ActionResponse,
    EventOut,
    ForkResponse,
    Health,
    RequeueResponse,
    SubmitResponse,
)
from strands_durable.api.schemas_fleet import QueueOut
from strands_durable.api.schemas_webhooks import WebhookList, WebhookRetried
from strands_durable.client.access import SyncAccess
from strands_durable.client.aio import (
    DEFAULT_URL,
    Artifacts,
    AsyncClient,
    Checkpoints,
    Workers,
)
from strands_durable.client.http_backend import Verify
from strands_durable.client.quotas import SyncQuotas
from strands_durable.client.schedules import SyncSchedules
from strands_durable.client.transfer import SyncTransferMethods
from strands_durable.client.wire import SpecInput
from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import CheckpointDetail
from strands_durable.sessions.live import LiveEntry
from strands_durable.sessions.status import SessionDetail, SessionSummary
from strands_durable.webhooks import WebhookSubscription

T = TypeVar("T")


async def _next(agen: AsyncIterator[T]) -> T:
    return await anext(agen)


class _LoopThread:
    """An event loop running on a daemon thread; `run` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="durable-client",
                                       daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def iterate(self, agen: AsyncIterator[T]) -> Iterator[T]:
        """An async iterator's items, one by one; closed when the caller stops early."""
        try:
            while True:
                try:
                    yield self.run(_next(agen))
                except StopAsyncIteration:
                    return
        finally:
            closer: Callable[[], Coroutine[Any, Any, None]] | None = getattr(agen, "aclose",
                                                                              None)
            if closer is not None and self.loop.is_running():
                self.run(closer())

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


class Client(SyncSchedules, SyncTransferMethods, SyncAccess, SyncQuotas):
    """The blocking client: the same constructor, methods and answers as `AsyncClient`.

    ```python
    from strands_durable.client import Client

    with Client("http://127.0.0.1:8080", token="s3cret") as client:
        sid = client.submit(Path("examples/chain-research.yaml")).session_id
        for event in client.events(sid):
            print(event.type, event.step)
        print(client.get(sid).final_response)
    ```"""

    def __init__(self, url: str = DEFAULT_URL, *, token: str | None = None,
                 timeout: float = 30.0, verify: Verify = True, retries: int = 3,
                 transport: httpx.AsyncBaseTransport | None = None,
                 namespace: str | None = None) -> None:
        # The client first: a refused argument leaves no thread behind.
        self._async = AsyncClient(url, token=token, timeout=timeout, verify=verify,
                                  retries=retries, transport=transport, namespace=namespace)
        self._thread = _LoopThread()

    @classmethod
    def connect_redis(cls, url: str | None = None, *, key_prefix: str | None = None
                      ) -> Client:
        """The same methods on a Redis store directly (see `AsyncClient.connect_redis`).

        ```python
        with Client.connect_redis() as client:   # your local store
            print(client.wait(sid).status)
        ```"""
        client = cls.__new__(cls)
        client._async = AsyncClient.connect_redis(url, key_prefix=key_prefix)
        client._thread = _LoopThread()
        return client

    def __enter__(self) -> Client:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the client's loop (`with` does it for you)."""
        if self._thread.loop.is_closed():
            return
        try:
            self._thread.run(self._async.aclose())
        finally:
            self._thread.stop()

    def __repr__(self) -> str:
        return f"Client({self._async!r})"

    def submit(self, spec: SpecInput, *, variables: Mapping[str, Any] | None = None,
               idempotency_key: str | None = None, priority: int | None = None,
               provider: str | None = None,
               webhook: WebhookSubscription | None = None) -> SubmitResponse:
        """Start a session (see `AsyncClient.submit`). `client.submit(Path("x.yaml"))`"""
        return self._thread.run(self._async.submit(
            spec, variables=variables, idempotency_key=idempotency_key, priority=priority,
            provider=provider, webhook=webhook))

    def get(self, session_id: str) -> SessionDetail:
        """The status document. `client.get(sid).status`"""
        return self._thread.run(self._async.get(session_id))

    def list(self, *, status: SessionStatus | str | None = None, workflow: str | None = None,
             updated_after: datetime | None = None, updated_before: datetime | None = None,
             page_size: int = 50) -> Iterator[SessionSummary]:
        """Sessions, paged as you iterate. `[s.session_id for s in client.list(status="failed")]`"""
        return self._thread.iterate(self._async.list(
            status=status, workflow=workflow, updated_after=updated_after,
            updated_before=updated_before, page_size=page_size))

    def wait(self, session_id: str, *, timeout: float | None = None, poll: float = 0.5
             ) -> SessionDetail:
        """Wait until no longer running (see `AsyncClient.wait`). `client.wait(sid, timeout=60)`"""
        return self._thread.run(self._async.wait(session_id, timeout=timeout, poll=poll))

    def events(self, session_id: str, *, after: str | None = None, follow: bool = True
               ) -> Iterator[EventOut]:
        """The session's events (see `AsyncClient.events`). `for e in client.events(sid): ...`"""
        return self._thread.iterate(self._async.events(session_id, after=after, follow=follow))

    def stream(self, session_id: str, *, after: str | None = None) -> Iterator[LiveEntry]:
        """The live token stream. `for entry in client.stream(sid): print(entry.text)`"""
        return self._thread.iterate(self._async.stream(session_id, after=after))

    def pause(self, session_id: str) -> ActionResponse:
        """Pause at the next step boundary. `client.pause(sid)`"""
        return self._thread.run(self._async.pause(session_id))

    def resume(self, session_id: str, *, variables: Mapping[str, Any] | None = None,
               budgets: Mapping[str, int] | None = None, spec: SpecInput | None = None
               ) -> ActionResponse:
        """Continue, with changes. `client.resume(sid, budgets={"max_steps": 20})`"""
        return self._thread.run(self._async.resume(session_id, variables=variables,
                                                   budgets=budgets, spec=spec))

    def fork(self, session_id: str, checkpoint: int, *,
             variables: Mapping[str, Any] | None = None,
             budgets: Mapping[str, int] | None = None) -> ForkResponse:
        """A new session from a checkpoint. `client.fork(sid, 1).session_id`"""
        return self._thread.run(self._async.fork(session_id, checkpoint, variables=variables,
                                                 budgets=budgets))

    def cancel(self, session_id: str) -> ActionResponse:
        """Cancel the session. `client.cancel(sid)`"""
        return self._thread.run(self._async.cancel(session_id))

    def signal(self, session_id: str, response: str) -> ActionResponse:
        """Answer the waiting human step. `client.signal(sid, "approved")`"""
        return self._thread.run(self._async.signal(session_id, response))

    def requeue(self, session_id: str, *, step: str | None = None, dead: bool = False,
                dry_run: bool = False) -> RequeueResponse:
        """Requeue failed or dead-lettered steps. `client.requeue(sid, dry_run=True)`"""
        return self._thread.run(self._async.requeue(session_id, step=step, dead=dead,
                                                    dry_run=dry_run))

    def delete(self, session_id: str) -> None:
        """Delete the session. `client.delete(sid)`"""
        self._thread.run(self._async.delete(session_id))

    def artifacts(self, session_id: str) -> Artifacts:
        """Artifact names and sizes. `[a.name for a in client.artifacts(sid)]`"""
        return self._thread.run(self._async.artifacts(session_id))

    def artifact(self, session_id: str, name: str) -> bytes:
        """One artifact's content. `client.artifact(sid, "report.md").decode()`"""
        return self._thread.run(self._async.artifact(session_id, name))

    def checkpoints(self, session_id: str) -> Checkpoints:
        """Every checkpoint. `[c.n for c in client.checkpoints(sid)]`"""
        return self._thread.run(self._async.checkpoints(session_id))

    def checkpoint(self, session_id: str, n: int) -> CheckpointDetail:
        """Checkpoint n in full. `client.checkpoint(sid, 1).pattern_state`"""
        return self._thread.run(self._async.checkpoint(session_id, n))

    def health(self) -> Health:
        """/healthz. `client.health().status`"""
        return self._thread.run(self._async.health())

    def metrics(self) -> str:
        """/metrics text. `client.metrics()`"""
        return self._thread.run(self._async.metrics())

    def workers(self) -> Workers:
        """The workers. `[w.consumer for w in client.workers() if w.alive]`"""
        return self._thread.run(self._async.workers())

    def queue(self) -> QueueOut:
        """The step streams. `client.queue().total["lag"]`"""
        return self._thread.run(self._async.queue())

    def webhooks(self, *, status: str = "pending", limit: int = 50) -> WebhookList:
        """The webhook outbox. `client.webhooks(status="dead").items`"""
        return self._thread.run(self._async.webhooks(status=status, limit=limit))

    def retry_webhook(self, webhook_id: str) -> WebhookRetried:
        """Deliver a webhook again now. `client.retry_webhook(hook.id)`"""
        return self._thread.run(self._async.retry_webhook(webhook_id))
