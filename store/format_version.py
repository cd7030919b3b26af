"""The data format recorded in Redis (`<prefix>:config`, field `format`) and the
migrations between formats.

Every role checks it in Store.prepare(), in the same round trip that reads the shard
count. The decision is pure (`decide`): an empty keyspace is stamped with this release's
format; data written before formats were recorded (sessions or a shard count, no format)
is format 1; older data is upgraded in place when every pending step may run while other
processes read (`Migration.online`), else the role refuses naming the command to run;
newer data than this release knows is refused with one line naming both formats.

Migrations run in order under one lock; each step is idempotent (a crash between its
work and its record runs it again) and records its target format when done, so an
upgrade interrupted anywhere resumes where it stopped.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from strands_durable.errors import ConfigError
from strands_durable.store.codec import as_str
from strands_durable.store.keys import FORMAT_FIELD, Keys
from strands_durable.store.locks import locked
from strands_durable.store.scripts import Scripts
from strands_durable.version import DATA_FORMAT, __version__

UPGRADE_LOCK = "format-upgrade"
UPGRADE_COMMAND = "durable data-format --upgrade"
# Data with sessions but no recorded format was written by 0.1.0.
UNRECORDED = 1


class DataFormatTooNew(ConfigError):
    """The keyspace was written by a newer release than this one."""


class DataFormatUpgradeNeeded(ConfigError):
    """The keyspace is older and its upgrade must be run by an operator."""


@dataclass(frozen=True)
class Migration:
    """One step from `source` to `source + 1`. `apply` must be idempotent and leave the
    data readable by both formats' code while it runs (it runs beside live roles when
    `online`); an offline step makes roles refuse until an operator runs it."""

    source: int
    summary: str
    apply: Callable[[Redis, Keys], Awaitable[None]]
    online: bool = True

    @property
    def target(self) -> int:
        return self.source + 1


async def _record_only(redis: Redis, keys: Keys) -> None:
    """0.1.0's keys are 0.2.0's: nothing to change, the format is recorded after it."""


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "record the data format (0.1.0's keys need no change)", _record_only),
)


class Action(enum.Enum):
    CURRENT = "current"
    STAMP = "stamp"  # an empty keyspace: record this release's format
    UPGRADE = "upgrade"  # older: run the pending steps now
    REFUSE_OLD = "refuse_old"  # older, and a pending step is offline
    REFUSE_NEW = "refuse_new"


@dataclass(frozen=True)
class FormatState:
    recorded: int | None  # None: nothing recorded
    has_data: bool  # sessions (or a recorded shard count) exist


def pending(recorded: int, current: int, migrations: Sequence[Migration]) -> list[Migration]:
    """The steps from `recorded` up to `current`, in order; ConfigError if one is missing."""
    by_source = {m.source: m for m in migrations}
    steps = []
    for version in range(recorded, current):
        if version not in by_source:
            raise ConfigError(f"no migration from data format {version} to {version + 1}")
        steps.append(by_source[version])
    return steps


def decide(state: FormatState, current: int = DATA_FORMAT,
           migrations: Sequence[Migration] = MIGRATIONS) -> Action:
    """What a starting role does with the format it found (pure)."""
    if state.recorded is None and not state.has_data:
        return Action.STAMP
    recorded = UNRECORDED if state.recorded is None else state.recorded
    if recorded == current:
        return Action.CURRENT
    if recorded > current:
        return Action.REFUSE_NEW
    steps = pending(recorded, current, migrations)
    return Action.UPGRADE if all(m.online for m in steps) else Action.REFUSE_OLD


def parse_recorded(raw: object) -> int | None:
    text = as_str(raw) if raw is not None else None
    if text is None:
        return None
    if not text.isdigit():
        raise ConfigError(f"the data format recorded in Redis is not a number: {text[:40]!r}")
    return int(text)


def too_new(keys: Keys, recorded: int, current: int = DATA_FORMAT) -> DataFormatTooNew:
    return DataFormatTooNew(
        f"data format {recorded} under prefix {keys.prefix!r} is newer than this release "
        f"reads (strands-durable {__version__}, data format {current}): run a release "
        f"that reads format {recorded}")


def upgrade_needed(keys: Keys, recorded: int, current: int = DATA_FORMAT
                   ) -> DataFormatUpgradeNeeded:
    return DataFormatUpgradeNeeded(
        f"data format {recorded} under prefix {keys.prefix!r} is older than this release's "
        f"(strands-durable {__version__}, data format {current}): run `{UPGRADE_COMMAND}` "
        "once, with this release, then start the roles")


# -- I/O ----------------------------------------------------------------------------------
async def has_sessions(redis: Redis, keys: Keys) -> bool:
    """Any shard's index of sessions exists (only asked when no format is recorded)."""
    for shard in range(keys.shards):
        if await redis.exists(keys.index_all(shard)):
            return True
    return False


async def has_data(redis: Redis, keys: Keys) -> bool:
    """Anything of 0.1.0's here: its recorded shard count, or sessions."""
    return bool(await redis.hexists(keys.config(), "shards")) or await has_sessions(redis,
                                                                                    keys)


async def read_recorded(redis: Redis, keys: Keys) -> int | None:
    return parse_recorded(await redis.hget(keys.config(), FORMAT_FIELD))


async def upgrade(redis: Redis, scripts: Scripts, keys: Keys, *, current: int = DATA_FORMAT,
                  migrations: Sequence[Migration] = MIGRATIONS, wait_s: float = 60.0
                  ) -> list[Migration]:
    """Run the pending steps under the upgrade lock; the steps run, in order. Another
    process upgrading at the same time makes this one wait, then find nothing to do."""
    async with locked(redis, scripts, keys.lock(UPGRADE_LOCK), ttl_ms=600_000,
                      wait_s=wait_s):
        recorded = await read_recorded(redis, keys)
        if recorded is None:
            recorded = UNRECORDED if await has_data(redis, keys) else current
        if recorded > current:
            raise too_new(keys, recorded, current)
        done = []
        for step in pending(recorded, current, migrations):
            await step.apply(redis, keys)
            await redis.hset(keys.config(), FORMAT_FIELD, str(step.target))
            done.append(step)
        if not done:
            await redis.hsetnx(keys.config(), FORMAT_FIELD, str(current))
        return done


async def check(redis: Redis, scripts: Scripts, keys: Keys, raw: object, *, fresh: bool,
                current: int = DATA_FORMAT, migrations: Sequence[Migration] = MIGRATIONS
                ) -> None:
    """The start-up check of every role, on the `format` field prepare() already read
    (`fresh`: prepare found no shard count either, so nothing of 0.1.0 is here)."""
    recorded = parse_recorded(raw)
    if recorded == current:
        return  # the usual start: no round trip beyond prepare's
    has_data = recorded is not None or not fresh or await has_sessions(redis, keys)
    action = decide(FormatState(recorded, has_data), current, migrations)
    if action is Action.STAMP:
        await redis.hsetnx(keys.config(), FORMAT_FIELD, str(current))
        if (stamped := await read_recorded(redis, keys)) not in (None, current):
            # Another release stamped it first: judge what it wrote.
            await check(redis, scripts, keys, str(stamped), fresh=False, current=current,
                        migrations=migrations)
    elif action is Action.REFUSE_NEW:
        raise too_new(keys, recorded or UNRECORDED, current)
    elif action is Action.REFUSE_OLD:
        raise upgrade_needed(keys, recorded or UNRECORDED, current)
    elif action is Action.UPGRADE:
        await upgrade(redis, scripts, keys, current=current, migrations=migrations)
