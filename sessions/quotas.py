"""Namespaces' quotas of sessions not yet ended (running or paused).

A submit in a namespace with a quota first reserves a place in the namespace's active
set (atomically: the count is checked and the place added in one transaction), then
creates its session, then turns the reservation into the session's id. Places of
sessions that ended are given back lazily: when the set looks full, its members'
statuses are read and the ended ones (and reservations of submits that died midway)
are dropped before the count is trusted. Over the quota a submit is refused
(QuotaExceeded: HTTP 429, CLI exit 1), or, with `over: queue`, its session is created
paused and queued; the scheduler leader resumes queued sessions, oldest first, as
places free up. Nothing here is on a step's path.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from strands_durable.access import QUEUED_FOR_QUOTA, NamespaceQuota
from strands_durable.errors import Conflict
from strands_durable.models import SessionStatus, now_ms
from strands_durable.sessions import control
from strands_durable.sessions.access import record_action
from strands_durable.sessions.token_quota import TokensExceeded, tokens_spent
from strands_durable.store.store import NewSession, Store

STALE_RESERVATION_MS = 60_000  # a submit that reserved and died: its place comes back
ADMIT_BATCH = 20  # queued sessions looked at per namespace per round


class QuotaExceeded(Conflict):
    """The namespace holds as many sessions not yet ended as its quota allows."""

    code = "quota_exceeded"

    def __init__(self, quota: NamespaceQuota) -> None:
        self.quota = quota
        super().__init__(f"namespace {quota.namespace!r} has {quota.running_sessions} "
                         f"session(s) not yet ended, its quota; submit again once one ends")

    def details(self) -> dict[str, object]:
        return {"namespace": self.quota.namespace,
                "running_sessions": self.quota.running_sessions}


def _ended(status: str | None) -> bool:
    if status is None:
        return True
    try:
        return SessionStatus(status).is_terminal
    except ValueError:
        return False  # not ours to judge: it keeps its place


async def _prune(store: Store, namespace: str, now: int) -> None:
    """Drop the places of ended (or deleted) sessions and of stale reservations."""
    places = await store.active_places(namespace)
    stale = [m for m, at in places if m.startswith("r:") and at < now - STALE_RESERVATION_MS]
    sessions = [m for m, _ in places if not m.startswith("r:")]
    statuses = await store.session_statuses(sessions) if sessions else []
    ended = [sid for sid, status in zip(sessions, statuses, strict=True) if _ended(status)]
    await store.free_places(namespace, stale + ended)


async def _place(store: Store, quota: NamespaceQuota, member: str) -> bool:
    if quota.running_sessions is None:
        return True  # a quota of tokens only: no places to count
    now = now_ms()
    if await store.reserve_place(quota.namespace, member, quota.running_sessions, now):
        return True
    await _prune(store, quota.namespace, now)
    return await store.reserve_place(quota.namespace, member, quota.running_sessions, now)


async def _queued(store: Store, new: NewSession) -> tuple[str, bool]:
    if new.status == SessionStatus.RUNNING:
        new = replace(new, status=SessionStatus.PAUSED, paused_reason=QUEUED_FOR_QUOTA)
    sid, created = await store.create_session(new)
    if created:
        await store.queue_for_place(new.namespace, sid, now_ms())
    return sid, created


async def create_within_quota(store: Store, new: NewSession, *, at_ms: int | None = None
                              ) -> tuple[str, bool]:
    """(session id, created), as Store.create_session answers, within the namespace's
    quota: QuotaExceeded or TokensExceeded over it, or (`over: queue`) the session
    created paused and queued. `at_ms`: the clock (tests turn the day with it)."""
    quota = await store.quota(new.namespace)
    if quota is None:
        return await store.create_session(new)
    now = now_ms() if at_ms is None else at_ms
    used = await tokens_spent(store, quota, now)
    if used is not None:
        if quota.over != "queue":
            raise TokensExceeded(quota, used, now)
        return await _queued(store, new)
    reservation = f"r:{uuid.uuid4().hex}"
    if not await _place(store, quota, reservation):
        if quota.over != "queue":
            raise QuotaExceeded(quota)
        return await _queued(store, new)
    try:
        sid, created = await store.create_session(new)
    except BaseException:
        await store.settle_place(new.namespace, reservation, None, now_ms())
        raise
    if quota.running_sessions is not None:
        await store.settle_place(new.namespace, reservation, sid if created else None,
                                 now_ms())
    return sid, created


async def admit_queued(store: Store, *, at_ms: int | None = None) -> int:
    """Resume queued sessions, oldest first, while their namespaces have places and
    tokens left today (the scheduler leader's round). Returns how many were resumed."""
    admitted = 0
    now = now_ms() if at_ms is None else at_ms
    for quota in await store.quotas():
        if quota.over != "queue" or await tokens_spent(store, quota, now) is not None:
            continue
        for sid in await store.queued_first(quota.namespace, ADMIT_BATCH):
            record = await store.session_paused_reason(sid)
            if record != QUEUED_FOR_QUOTA:
                # Resumed, cancelled or deleted by someone meanwhile: no longer queued.
                await store.unqueue(quota.namespace, sid)
                continue
            if not await _place(store, quota, sid):
                break
            try:
                await control.resume(store, sid)
            except Conflict:
                await store.free_places(quota.namespace, [sid])
            await store.unqueue(quota.namespace, sid)
            admitted += 1
    return admitted


async def set_quota(store: Store, quota: NamespaceQuota, *, actor: str, source: str) -> None:
    await store.set_quota(quota)
    await record_action(store, "quota_set", quota.namespace, actor=actor, source=source,
                        namespace=quota.namespace,
                        detail=f"{quota.running_sessions} session(s), "
                        f"{quota.tokens_per_day} token(s) a day, over: {quota.over}")


async def drop_quota(store: Store, namespace: str, *, actor: str, source: str) -> bool:
    dropped = await store.drop_quota(namespace)
    if dropped:
        await record_action(store, "quota_drop", namespace, actor=actor, source=source,
                            namespace=namespace)
    return dropped
