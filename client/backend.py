"""What a client runs its methods on: the HTTP API (client/http_backend.py) or a Redis
store directly (client/redis_backend.py). Each operation once, typed with the API's
own models; the clients (client/aio.py, client/sync.py) add paging, waiting and docs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

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
from strands_durable.client.wire import SpecInput
from strands_durable.models import SessionStatus
from strands_durable.sessions.checkpoints import CheckpointDetail
from strands_durable.sessions.live import LiveEntry
from strands_durable.sessions.status import SessionDetail


@dataclass(frozen=True)
class ListFilter:
    """GET /v1/sessions's filters."""

    status: SessionStatus | str | None = None
    workflow: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    limit: int = 50


@dataclass(frozen=True)
class Submission:
    spec: SpecInput
    variables: Mapping[str, Any] | None = None
    idempotency_key: str | None = None
    priority: int | None = None
    provider: str | None = None


@dataclass(frozen=True)
class Changes:
    """What a resume or a fork changes on the way."""

    variables: Mapping[str, Any] | None = None
    budgets: Mapping[str, int] | None = None
    spec: SpecInput | None = None


class Backend(Protocol):
    async def submit(self, submission: Submission) -> SubmitResponse: ...
    async def get(self, session_id: str) -> SessionDetail: ...
    async def list_page(self, query: ListFilter, cursor: str | None) -> SessionPage: ...
    async def events_page(self, session_id: str, after: str | None, limit: int
                          ) -> EventPage: ...
    def follow_events(self, session_id: str, after: str | None) -> AsyncIterator[EventOut]: ...
    def follow_stream(self, session_id: str, after: str | None) -> AsyncIterator[LiveEntry]: ...
    async def pause(self, session_id: str) -> ActionResponse: ...
    async def cancel(self, session_id: str) -> ActionResponse: ...
    async def resume(self, session_id: str, changes: Changes) -> ActionResponse: ...
    async def fork(self, session_id: str, checkpoint: int, changes: Changes
                   ) -> ForkResponse: ...
    async def signal(self, session_id: str, response: str) -> ActionResponse: ...
    async def requeue(self, session_id: str, step: str | None, dead: bool, dry_run: bool
                      ) -> RequeueResponse: ...
    async def delete(self, session_id: str) -> None: ...
    async def artifacts(self, session_id: str) -> ArtifactList: ...
    async def artifact(self, session_id: str, name: str) -> bytes: ...
    async def checkpoints(self, session_id: str) -> CheckpointList: ...
    async def checkpoint(self, session_id: str, n: int) -> CheckpointDetail: ...
    async def health(self) -> Health: ...
    async def metrics(self) -> str: ...
    async def workers(self) -> WorkerList: ...
    async def queue(self) -> QueueOut: ...
    async def tokens(self) -> TokenList: ...
    async def create_token(self, request: TokenCreateRequest) -> TokenCreated: ...
    async def revoke_token(self, token_id: str) -> None: ...
    async def audit(self, limit: int, before: str | None) -> AuditPage: ...
    async def aclose(self) -> None: ...
