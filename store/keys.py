"""The Redis key schema: the only place key names are spelled.

Every key of a session carries its shard's hash tag, so a session's keys, its
shard's step stream, timers, indexes and dead letters share one Redis Cluster
slot and a commit is one single-slot script.
"""

from __future__ import annotations

import re
import uuid
import zlib
from dataclasses import dataclass, field

from strands_durable.errors import InvalidId
from strands_durable.models import SessionStatus

CONSUMER_GROUP = "workers"
# The field of `<prefix>:config` holding the keyspace's data format (store/format_version.py).
FORMAT_FIELD = "format"
SPELLED_SESSIONS = 16_384  # session key prefixes a Keys remembers

# What may reach a key name. A session id is exactly what new_session_id makes (a
# lowercase UUID): anything else, `<sid>:results` say, would name another key of a
# real session. The Keys methods below refuse what does not match, so no caller can
# build a key from an unchecked id.
SESSION_ID_FORM = "a session id (a UUID such as 3b241101-e2bb-4255-8caf-4136c566a962)"
_SESSION_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Step keys and conversation lanes (made of agent, branch, task and node ids): text
# without control characters, bounded, and valid Unicode (a lone surrogate, which a JSON
# escape or an undecodable argv byte can carry, cannot be written out as UTF-8).
MAX_NAME_CHARS = 512
NAME_FORM = f"1 to {MAX_NAME_CHARS} characters, no control characters"
_NAME = re.compile(rf"[^\x00-\x1f\x7f\ud800-\udfff]{{1,{MAX_NAME_CHARS}}}")
# Idempotency keys (and consumer names): 1-255 printable ASCII characters, no spaces,
# as Stripe takes its keys.
MAX_TOKEN_CHARS = 255
TOKEN_FORM = f"1 to {MAX_TOKEN_CHARS} printable ASCII characters without spaces"
_TOKEN = re.compile(rf"[\x21-\x7e]{{1,{MAX_TOKEN_CHARS}}}")


def is_session_id(value: object) -> bool:
    return isinstance(value, str) and _SESSION_ID.fullmatch(value) is not None


def check_session_id(value: str) -> str:
    """`value` when it is a session id; InvalidId naming it otherwise."""
    if not is_session_id(value):
        raise InvalidId("session id", value, SESSION_ID_FORM)
    return value


def check_name(kind: str, value: str) -> str:
    """A step key or conversation lane: bounded text without control characters."""
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise InvalidId(kind, value, NAME_FORM)
    return value


def check_token(kind: str, value: str) -> str:
    """An idempotency key or consumer name: bounded printable ASCII, no spaces."""
    if not isinstance(value, str) or _TOKEN.fullmatch(value) is None:
        raise InvalidId(kind, value, TOKEN_FORM)
    return value


# Schedule names (issue 30): they spell keys and idempotency keys, so a short plain word.
MAX_SCHEDULE_NAME_CHARS = 64
SCHEDULE_NAME_FORM = (f"1 to {MAX_SCHEDULE_NAME_CHARS} letters, digits, '.', '_' or '-', "
                      "starting with a letter or digit")
_SCHEDULE_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_SCHEDULE_NAME_CHARS - 1}}}")


def check_schedule_name(value: str) -> str:
    """A schedule's name; InvalidId naming it otherwise."""
    if not isinstance(value, str) or _SCHEDULE_NAME.fullmatch(value) is None:
        raise InvalidId("schedule name", value, SCHEDULE_NAME_FORM)
    return value


def shard_of(session_id: str, shards: int) -> int:
    return zlib.crc32(session_id.encode()) % shards


def new_session_id(shard: int, shards: int) -> str:
    """A UUID4 whose shard is `shard` (rejection sampling keeps ids plain UUIDs)."""
    while True:
        candidate = str(uuid.uuid4())
        if shard_of(candidate, shards) == shard:
            return candidate


def shard_for_key(key: str, shards: int) -> int:
    return zlib.crc32(key.encode()) % shards


@dataclass(frozen=True)
class Keys:
    prefix: str
    shards: int = 1
    # Session id -> the key its session's keys start with (checked, sharded, spelled
    # once: a step spells about twenty keys of its session). Bounded, cleared when full.
    _session_keys: dict[str, str] = field(default_factory=dict, init=False, repr=False,
                                          compare=False)

    def tag(self, shard: int) -> str:
        return f"{self.prefix}:{{s{shard}}}"

    # -- per shard -----------------------------------------------------------
    def stream(self, shard: int) -> str:
        return f"{self.tag(shard)}:steps"

    def dead(self, shard: int) -> str:
        return f"{self.tag(shard)}:dead"

    def timers(self, shard: int) -> str:
        return f"{self.tag(shard)}:timers"

    def index_all(self, shard: int) -> str:
        return f"{self.tag(shard)}:idx:all"

    def index_status(self, shard: int, status: SessionStatus | str) -> str:
        return f"{self.tag(shard)}:idx:{SessionStatus(status).value}"

    def index_statuses(self, shard: int) -> list[str]:
        return [self.index_status(shard, s) for s in SessionStatus]

    def idempotency(self, shard: int, key: str) -> str:
        return self.stored_idempotency(shard, check_token("idempotency key", key))

    def stored_idempotency(self, shard: int, key: str) -> str:
        """The key of an idempotency key read back from a session's own record: earlier
        versions took any text, and its key is still deleted with the session (under
        `idem:`, no text names another kind of key)."""
        return f"{self.tag(shard)}:idem:{key}"

    def index_spec(self, shard: int, spec_hash: str) -> str:
        """Sessions of one spec (by hash), for `run --auto-resume`: intersected with the
        failed and paused indexes, it finds the latest resumable one in O(small)."""
        return f"{self.tag(shard)}:idx:spec:{spec_hash}"

    def took(self, shard: int, entry_id: str) -> str:
        """What the commit of `entry_id` took next (commit.lua), kept 15 minutes."""
        return f"{self.stream(shard)}:took:{entry_id}"

    def unwritten(self, shard: int) -> str:
        """A key of the shard's slot that is never written. take.lua and commit.lua declare
        it because they read keys of other sessions that they cannot declare: while a
        resharding has the slot half-moved, Redis answers a script that declares a key it
        does not hold with TRYAGAIN (so it waits the move out), where the keys it did not
        declare would read as missing on the node importing them (a committed step as not
        committed, a conversation as empty)."""
        return f"{self.tag(shard)}:unwritten"

    def fair(self, shard: int) -> str:
        """The shard's fair dispatch between namespaces (_lib.lua's fair take): a hash
        (virtual time, each namespace's tag) and, after it, `:on` (zset: namespaces
        other than default seen lately), `:ready` (zset: namespaces with deferred steps),
        `:q:<namespace>` (list: its deferred jobs, oldest first), `:run:<namespace>`
        (set: its running entries, with a quota of steps in flight) and `:waiting`."""
        return f"{self.tag(shard)}:fair"

    def fair_queue(self, shard: int, namespace: str) -> str:
        return f"{self.fair(shard)}:q:{namespace}"

    def fair_waiting(self, shard: int) -> str:
        """One item per deferred step of the shard, whatever its namespace: the list
        KEDA's `redis` trigger counts (helm/: the deferred steps are off the stream)."""
        return f"{self.fair(shard)}:waiting"

    def beats(self, shard: int) -> str:
        """Liveness beats of the consumers reading the shard: consumer -> beat number
        (store/liveness.py), written by each one's beat thread, in the shard's slot so
        that one script declares a silent one dead and takes its entries."""
        return f"{self.tag(shard)}:beats"

    def deaths(self, shard: int) -> str:
        """Consumers declared dead on the shard: consumer -> the declaration (JSON)."""
        return f"{self.tag(shard)}:deaths"

    def orphans(self, shard: int) -> str:
        """Entries taken from a consumer declared dead and not yet re-run: id -> it."""
        return f"{self.tag(shard)}:orphans"

    def webhooks(self, shard: int, part: str) -> str:
        """The shard's webhook outbox (store/webhooks.py), in its slot so one script
        records a session's events with its cursor: `outbox` (hash: id -> entry JSON),
        `pending` (zset: id -> when due), `leased` (zset: id -> lease expiry), `dead`
        and `delivered` (zsets: id -> when), `seen` (zset: '<status>:<sid>' -> the
        status index score looked at) and `mark` (hash: status -> newest score seen)."""
        return f"{self.tag(shard)}:wh:{part}"

    def streams(self) -> list[str]:
        return [self.stream(k) for k in range(self.shards)]

    # -- per session ---------------------------------------------------------
    def shard(self, session_id: str) -> int:
        return shard_of(check_session_id(session_id), self.shards)

    def _s(self, session_id: str) -> str:
        spelled = self._session_keys.get(session_id)
        if spelled is None:
            spelled = f"{self.session_prefix(self.shard(session_id))}{session_id}"
            if len(self._session_keys) >= SPELLED_SESSIONS:
                self._session_keys.clear()
            self._session_keys[session_id] = spelled
        return spelled

    def session_prefix(self, shard: int) -> str:
        """What the keys of a session on `shard` start with, before its id."""
        return f"{self.tag(shard)}:s:"

    def session_suffixes(self) -> dict[str, str]:
        """What follows `session_prefix + id` in each key take.lua spells from a stream
        entry's session id (results, order, events, held, the journals' and the
        conversations' prefixes)."""
        sid = "00000000-0000-4000-8000-000000000000"  # any id: only the spelling counts
        base = self.meta(sid)
        keys = {"results": self.results(sid), "order": self.order(sid),
                "events": self.events(sid), "held": self.held(sid),
                "journal_prefix": self.journal_prefix(sid),
                "conversation_prefix": self.conversation_prefix(sid)}
        return {name: key[len(base):] for name, key in keys.items()}

    def meta(self, session_id: str) -> str:
        return self._s(session_id)

    def results(self, session_id: str) -> str:
        return f"{self._s(session_id)}:results"

    def order(self, session_id: str) -> str:
        """Step keys in commit order: lets readers fetch only what they miss."""
        return f"{self._s(session_id)}:order"

    def events(self, session_id: str) -> str:
        return f"{self._s(session_id)}:events"

    def conversation(self, session_id: str, lane: str) -> str:
        return f"{self.conversation_prefix(session_id)}{check_name('conversation lane', lane)}"

    def conversation_prefix(self, session_id: str) -> str:
        """What every lane's key starts with (delete.lua appends each lane of the set)."""
        return f"{self._s(session_id)}:conv:"

    def conversations(self, session_id: str) -> str:
        """Set of conversation lanes, so delete finds them all."""
        return f"{self._s(session_id)}:convs"

    def artifacts(self, session_id: str) -> str:
        return f"{self._s(session_id)}:artifacts"

    def live(self, session_id: str) -> str:
        """The session's live stream (store/live.py): what its models write as they
        write it, for clients that follow a step before it commits. Capped, and it
        expires once nothing is written to it for a while."""
        return f"{self._s(session_id)}:live"

    def journal(self, session_id: str, step: str) -> str:
        """A running step's journal: its model turns and tool results so far (a hash,
        fields m1.. and t1..), replayed when the step runs again, dropped at commit."""
        return f"{self.journal_prefix(session_id)}{step}"

    def journal_prefix(self, session_id: str) -> str:
        """What every step journal's key starts with (delete.lua appends each step)."""
        return f"{self._s(session_id)}:journal:"

    def journals(self, session_id: str) -> str:
        """Set of the steps that have a journal, so delete finds them all."""
        return f"{self._s(session_id)}:journals"

    def checkpoints(self, session_id: str) -> str:
        return f"{self._s(session_id)}:checkpoints"

    def failed_jobs(self, session_id: str) -> str:
        return f"{self._s(session_id)}:failed"

    def held(self, session_id: str) -> str:
        """Jobs held back while the session is paused."""
        return f"{self._s(session_id)}:held"

    def webhook_cursor(self, session_id: str) -> str:
        """The last event of the session its webhooks were recorded up to (a hash)."""
        return f"{self._s(session_id)}:webhook"

    def session_keys(self, session_id: str) -> list[str]:
        return [
            self.meta(session_id),
            self.results(session_id),
            self.order(session_id),
            self.events(session_id),
            self.conversations(session_id),
            self.journals(session_id),
            self.artifacts(session_id),
            self.checkpoints(session_id),
            self.failed_jobs(session_id),
            self.held(session_id),
            self.live(session_id),
            self.webhook_cursor(session_id),
        ]

    # -- global (never part of a commit) ---------------------------------------
    def workers(self) -> str:
        return f"{self.prefix}:workers"

    def config(self) -> str:
        """The keyspace's settings: `shards` and the data format (FORMAT_FIELD)."""
        return f"{self.prefix}:config"

    def tokens(self) -> str:
        """Scoped API tokens: token id -> its record (JSON; the token's digest, never
        the token itself)."""
        return f"{self.prefix}:tokens"

    def quotas(self) -> str:
        """Namespaces' quotas: namespace -> NamespaceQuota JSON."""
        return f"{self.prefix}:quotas"

    def quota_part(self, namespace: str, part: str) -> str:
        """A namespace's quota bookkeeping: `active` (zset: its sessions not yet ended,
        and reservations `r:<id>` of submits under way -> when added) and `queued` (zset:
        sessions waiting paused for a place -> when submitted)."""
        return f"{self.prefix}:quota:{namespace}:{part}"

    def audit(self, namespace: str) -> str:
        """A namespace's audit trail: a capped stream of control actions and token
        changes."""
        return f"{self.prefix}:audit:{namespace}"

    def capacity(self, digest: str) -> str:
        """A provider key's shared capacity (store/capacity.py): limits declared and
        learned, buckets, backoff. Hash-tagged with its leases: one slot per key."""
        return f"{self.prefix}:cap:{{{digest}}}"

    def capacity_leases(self, digest: str) -> str:
        """The key's requests in flight: lease id -> expiry ms."""
        return f"{self.capacity(digest)}:leases"

    def capacity_part(self, digest: str, part: str) -> str:
        """Another of a provider key's structures, in its slot: `waiting` (process ->
        requests waiting there), `queue` and `queue_expiry` (the sessions waiting: their
        pass, when they lapse), `passes` (sessions' passes between their waits),
        `scope:<id>` and `scope:<id>:leases` (a spec's own lower limits)."""
        return f"{self.capacity(digest)}:{part}"

    def capacity_keys(self) -> str:
        """Every provider key the fleet has used: digest -> its description (JSON)."""
        return f"{self.prefix}:caps"

    def lock(self, name: str, shard: int | None = None) -> str:
        base = self.tag(shard) if shard is not None else self.prefix
        return f"{base}:lock:{name}"

    def lock_fence(self, name: str, shard: int | None = None) -> str:
        return f"{self.lock(name, shard)}:fence"

    # -- schedules (global; store/schedules.py) -------------------------------------
    def schedules(self) -> str:
        """Schedules: name -> its definition (JSON: the spec as submitted, cron, ...)."""
        return f"{self.prefix}:schedules"

    def schedule_cursors(self) -> str:
        """Schedules' last tick handled: name -> tick (epoch ms), only ever raised."""
        return f"{self.prefix}:schedules:cursor"

    def schedule_buffered(self) -> str:
        """Schedules' one tick waiting for the previous run to end (overlap buffer_one):
        name -> tick (epoch ms)."""
        return f"{self.prefix}:schedules:buffered"

    def schedule_runs(self, name: str) -> str:
        """A schedule's recent runs: tick field -> the run (JSON), capped."""
        return f"{self.prefix}:schedule:{check_schedule_name(name)}:runs"
