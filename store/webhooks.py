"""The webhook outbox (per shard, in the shard's slot: store/keys.py `webhooks`) and
the reads the scheduler's leader finds events with.

Finding: the leader reads each shard's status indexes (completed, failed, cancelled,
paused) from a little before the newest score it saw (`mark`), skips sessions whose
score it already looked at (`seen`), and reads the events of the others after their
cursor (`S:webhook`). Recording: `webhook_record.lua` writes the session's entries,
its new cursor and the `seen` note in one step, so each event is recorded once
whatever the leader does (a failover re-reads; the cursor, compared and set in the
script, stops a second copy). Delivering: `webhook_claim.lua` leases due entries,
`webhook_settle.lua` ends an attempt while its lease holds, `webhook_retry.lua` is the
operator's retry. The scripts are this module's own, typed like store/scripts.py's.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from redis.asyncio import Redis

from strands_durable.errors import Conflict, InvalidId, NotFound
from strands_durable.store.base import StoreBase
from strands_durable.store.codec import as_str, dumps
from strands_durable.store.keys import is_session_id
from strands_durable.store.script_library import flat, script_source

__all__ = [
    "WATCHED_STATUSES",
    "WEBHOOK_SCRIPTS",
    "WEBHOOK_STATES",
    "ClaimArgs",
    "ClaimKeys",
    "RecordArgs",
    "RecordKeys",
    "RetryArgs",
    "RetryKeys",
    "SessionWebhookView",
    "SettleArgs",
    "SettleKeys",
    "WebhookEntry",
    "WebhookNotFound",
    "WebhookOps",
    "check_webhook_id",
    "webhook_id",
]

WEBHOOK_SCRIPTS = ("webhook_record", "webhook_claim", "webhook_settle", "webhook_retry")
# The statuses whose arrival may mean an event (running never does).
WATCHED_STATUSES = ("completed", "failed", "cancelled", "paused")
WebhookState = Literal["pending", "in_flight", "delivered", "dead"]
WEBHOOK_STATES: tuple[WebhookState, ...] = ("pending", "in_flight", "delivered", "dead")
_ZSET_OF: dict[WebhookState, str] = {"pending": "pending", "in_flight": "leased",
                                     "delivered": "delivered", "dead": "dead"}
_ID = re.compile(r"msg_([0-9a-f-]{36})_([0-9]{1,20}-[0-9]{1,20})")
ID_FORM = "msg_<session id>_<event id>, as `durable webhooks list` shows it"


class WebhookNotFound(NotFound):
    code = "webhook_not_found"


def webhook_id(session_id: str, event_id: str) -> str:
    """The entry's `webhook-id`: one per session event, the same whoever records it."""
    return f"msg_{session_id}_{event_id}"


def check_webhook_id(value: str) -> tuple[str, str]:
    """(session id, event id) of a webhook id; InvalidId naming the form otherwise."""
    match = _ID.fullmatch(value) if isinstance(value, str) else None
    if match is None or not is_session_id(match.group(1)):
        raise InvalidId("webhook id", value, ID_FORM)
    return match.group(1), match.group(2)


@dataclass(frozen=True)
class WebhookEntry:
    """One event to deliver: what is sent (`body`, fixed when recorded) and how it went.
    `secret` '' signs with the fleet's secret at delivery; it is never shown."""

    id: str
    session_id: str
    event: str
    url: str
    body: str
    event_ms: int
    recorded_ms: int
    secret: str = field(default="", repr=False)
    attempts: int = 0
    budget_from_ms: int = 0  # the age budget runs from here (the event, or a retry)
    next_ms: int = 0
    last_status: int = 0  # the receiver's last HTTP status, 0 when none
    last_error: str = ""
    delivered_ms: int = 0
    namespace: str = "default"  # the session's tenant: who may list and retry it

    def to_json(self) -> str:
        return dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> WebhookEntry:
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class SessionWebhookView:
    """What the finder reads of a session: its subscription (JSON, '' for none), name,
    status and webhook cursor; `exists` False once it is deleted."""

    exists: bool
    subscription: str
    workflow_name: str
    status: str
    cursor: str
    namespace: str = "default"


@dataclass(frozen=True)
class RecordKeys:
    meta: str
    cursor: str
    outbox: str
    pending: str
    seen: str


@dataclass(frozen=True)
class RecordArgs:
    expected_cursor: str
    new_cursor: str  # '' leaves it
    seen_member: str  # '<status>:<sid>'
    seen_score: float
    now_ms: int
    entries: str  # JSON [[id, entry JSON], ...]


@dataclass(frozen=True)
class ClaimKeys:
    outbox: str
    pending: str
    leased: str


@dataclass(frozen=True)
class ClaimArgs:
    now_ms: int
    lease_until_ms: int
    limit: int


@dataclass(frozen=True)
class SettleKeys:
    outbox: str
    pending: str
    leased: str
    dead: str
    delivered: str


@dataclass(frozen=True)
class SettleArgs:
    entry_id: str
    lease_until_ms: int
    outcome: str  # delivered | retry | dead
    entry: str
    due_ms: int
    now_ms: int
    keep_delivered: int


@dataclass(frozen=True)
class RetryKeys:
    outbox: str
    pending: str
    leased: str
    dead: str
    delivered: str


@dataclass(frozen=True)
class RetryArgs:
    entry_id: str
    entry: str
    now_ms: int


class _Scripts:
    def __init__(self, redis: Redis) -> None:
        self._scripts = {n: redis.register_script(script_source(n)) for n in WEBHOOK_SCRIPTS}

    async def call(self, name: str, keys: Any, args: Any) -> Any:
        return await self._scripts[name](keys=flat(keys), args=flat(args))


class WebhookOps(StoreBase):
    _webhook_scripts: _Scripts | None = None

    @property
    def _wh(self) -> _Scripts:
        if self._webhook_scripts is None:
            self._webhook_scripts = _Scripts(self.redis)
        return self._webhook_scripts

    def _wk(self, shard: int, part: str) -> str:
        return self.keys.webhooks(shard, part)

    # -- finding --------------------------------------------------------------------
    async def webhook_marks(self, shard: int) -> dict[str, float]:
        raw = await self.redis.hgetall(self._wk(shard, "mark"))
        return {as_str(k): float(as_str(v)) for k, v in raw.items()}

    async def set_webhook_mark(self, shard: int, status: str, score: float) -> None:
        await self.redis.hset(self._wk(shard, "mark"), status, repr(score))

    async def status_changes(self, shard: int, status: str, since: float, offset: int,
                             limit: int) -> list[tuple[str, float]]:
        """Sessions of the status index with a score >= `since`, oldest first."""
        rows = await self.redis.zrangebyscore(self.keys.index_status(shard, status), since,
                                              "+inf", start=offset, num=limit,
                                              withscores=True)
        return [(as_str(sid), float(score)) for sid, score in rows]

    async def seen_scores(self, shard: int, members: list[str]) -> list[float | None]:
        if not members:
            return []
        scores = await self.redis.zmscore(self._wk(shard, "seen"), members)
        return [None if s is None else float(s) for s in scores]

    async def forget_seen(self, shard: int, below: float) -> int:
        """Drop the notes of scores the scan no longer reaches."""
        return int(await self.redis.zremrangebyscore(self._wk(shard, "seen"), "-inf",
                                                     f"({below}"))

    async def session_webhook_view(self, session_id: str) -> SessionWebhookView:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.keys.meta(session_id),
                       ["status", "webhook", "workflow_name", "namespace"])
            pipe.hget(self.keys.webhook_cursor(session_id), "cursor")
            (status, sub, name, namespace), cursor = await pipe.execute()
        return SessionWebhookView(status is not None, as_str(sub or ""), as_str(name or ""),
                                  as_str(status or ""), as_str(cursor or ""),
                                  as_str(namespace or "") or "default")

    async def events_after(self, session_id: str, cursor: str, count: int
                           ) -> list[tuple[str, dict[str, str]]]:
        """Up to `count` of the session's events after `cursor` ('' from the first)."""
        rows = await self.redis.xrange(self.keys.events(session_id),
                                       f"({cursor}" if cursor else "-", "+", count=count)
        return [(as_str(i), {as_str(k): as_str(v) for k, v in f.items()}) for i, f in rows]

    async def last_event_id(self, session_id: str) -> str:
        """The id of the session's newest event ('' for none)."""
        rows = await self.redis.xrevrange(self.keys.events(session_id), "+", "-", count=1)
        return as_str(rows[0][0]) if rows else ""

    async def record_webhooks(self, session_id: str, *, expected_cursor: str,
                              new_cursor: str, seen_member: str, seen_score: float,
                              now_ms: int, entries: list[WebhookEntry]) -> tuple[str, int]:
        """Record the entries and move the cursor, once: ('ok', added), ('moved', 0)
        when another recorder moved the cursor first, ('gone', 0) for a deleted session."""
        k, shard = self.keys, self.keys.shard(session_id)
        reply = await self._wh.call(
            "webhook_record",
            RecordKeys(meta=k.meta(session_id), cursor=k.webhook_cursor(session_id),
                       outbox=self._wk(shard, "outbox"), pending=self._wk(shard, "pending"),
                       seen=self._wk(shard, "seen")),
            RecordArgs(expected_cursor=expected_cursor, new_cursor=new_cursor,
                       seen_member=seen_member, seen_score=seen_score, now_ms=now_ms,
                       entries=dumps([[e.id, e.to_json()] for e in entries])))
        return as_str(reply[0]), int(reply[1])

    # -- delivering -------------------------------------------------------------------
    def _settle_keys(self, shard: int) -> SettleKeys:
        return SettleKeys(*(self._wk(shard, p) for p in
                            ("outbox", "pending", "leased", "dead", "delivered")))

    async def claim_webhooks(self, shard: int, now_ms: int, lease_until_ms: int,
                             limit: int) -> list[WebhookEntry]:
        reply = await self._wh.call(
            "webhook_claim", ClaimKeys(*(self._wk(shard, p) for p in
                                         ("outbox", "pending", "leased"))),
            ClaimArgs(now_ms=now_ms, lease_until_ms=lease_until_ms, limit=limit))
        return [WebhookEntry.from_json(reply[i + 1]) for i in range(0, len(reply), 2)]

    async def settle_webhook(self, entry: WebhookEntry, *, lease_until_ms: int,
                             outcome: Literal["delivered", "retry", "dead"], due_ms: int,
                             now_ms: int, keep_delivered: int) -> bool:
        shard = self.keys.shard(entry.session_id)
        return bool(await self._wh.call(
            "webhook_settle", self._settle_keys(shard),
            SettleArgs(entry_id=entry.id, lease_until_ms=lease_until_ms, outcome=outcome,
                       entry=entry.to_json(), due_ms=due_ms, now_ms=now_ms,
                       keep_delivered=keep_delivered)))

    # -- operators ----------------------------------------------------------------------
    async def webhook_entry(self, entry_id: str) -> tuple[WebhookEntry, WebhookState]:
        sid, _event = check_webhook_id(entry_id)
        shard = self.keys.shard(sid)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(self._wk(shard, "outbox"), entry_id)
            for state in WEBHOOK_STATES:
                pipe.zscore(self._wk(shard, _ZSET_OF[state]), entry_id)
            raw, *scores = await pipe.execute()
        if raw is None:
            raise WebhookNotFound(f"no webhook {entry_id} (delivered ones are kept for a "
                                  "while, then forgotten)")
        state = next((s for s, score in zip(WEBHOOK_STATES, scores, strict=True)
                      if score is not None), "pending")
        return WebhookEntry.from_json(raw), state

    async def retry_webhook(self, entry_id: str, now_ms: int) -> tuple[WebhookEntry, str]:
        """Make a dead (or pending) entry due now with a fresh age budget; returns it
        and the state it was in. NotFound, or Conflict while in flight or delivered."""
        entry, _state = await self.webhook_entry(entry_id)
        entry = replace(entry, budget_from_ms=now_ms, next_ms=now_ms)
        shard = self.keys.shard(entry.session_id)
        reply = await self._wh.call("webhook_retry", RetryKeys(**asdict(self._settle_keys(shard))),
                                    RetryArgs(entry_id=entry_id, entry=entry.to_json(),
                                              now_ms=now_ms))
        verdict = as_str(reply[0])
        if verdict == "missing":
            raise WebhookNotFound(f"no webhook {entry_id}")
        if verdict != "ok":
            raise Conflict(f"webhook {entry_id} is {verdict.replace('_', ' ')}; "
                           "only a pending or dead one is retried")
        return entry, as_str(reply[1])

    async def list_webhooks(self, state: WebhookState, limit: int
                            ) -> list[tuple[WebhookEntry, WebhookState]]:
        """The newest `limit` entries in `state` across the shards (by their score:
        when due, leased until, delivered or dead)."""
        found: list[tuple[float, WebhookEntry]] = []
        for shard in range(self.keys.shards):
            rows = await self.redis.zrevrange(self._wk(shard, _ZSET_OF[state]), 0, limit - 1,
                                              withscores=True)
            if not rows:
                continue
            texts = await self.redis.hmget(self._wk(shard, "outbox"), [r[0] for r in rows])
            found += [(float(score), WebhookEntry.from_json(text))
                      for (_id, score), text in zip(rows, texts, strict=True) if text]
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [(entry, state) for _score, entry in found[:limit]]

    async def webhook_depth(self) -> dict[str, int]:
        """Entries per state across the shards (the outbox depth: pending + in_flight)."""
        counts: dict[str, int] = dict.fromkeys(WEBHOOK_STATES, 0)
        for shard in range(self.keys.shards):
            async with self.redis.pipeline(transaction=False) as pipe:
                for state in WEBHOOK_STATES:
                    pipe.zcard(self._wk(shard, _ZSET_OF[state]))
                for state, n in zip(WEBHOOK_STATES, await pipe.execute(), strict=True):
                    counts[state] += int(n)
        return counts
