"""The machinery of the script library (store/scripts.py): loading the Lua sources,
the shared index keys, and turning a typed KEYS/ARGV contract into Redis's lists."""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio import Redis

from strands_durable.store.keys import Keys
from strands_durable.store.pipelined import PipelinedConnection

NAMES = (
    "create", "gate", "commit", "fail_step", "dead_letter", "renew",
    "promote_timers", "delete", "lock_release", "lock_extend", "control",
    "release", "requeue", "fork", "retire_consumer", "claim_session", "flag_stuck",
    "park_entry", "journal", "take", "ack", "lane_page", "beat", "declare_dead",
    "claim_orphans", "capacity_acquire", "capacity_release", "capacity_throttled",
)


@cache
def script_source(name: str) -> str:
    lua = resources.files("strands_durable.store") / "lua"
    return (lua / "_lib.lua").read_text() + "\n" + (lua / f"{name}.lua").read_text()


@dataclass(frozen=True)
class IndexKeys:
    """The shard's status indexes, the LAST six KEYS of every script that changes a
    session's status (the convention of _lib.lua)."""

    all: str
    running: str
    paused: str
    completed: str
    failed: str
    cancelled: str

    @classmethod
    def of(cls, keys: Keys, shard: int) -> IndexKeys:
        return cls(keys.index_all(shard), *keys.index_statuses(shard))


def flatten(contract: Any) -> list[Any]:
    """A contract's values in field order: nested contracts and tuples spread out."""
    out: list[Any] = []
    for f in fields(contract):
        value = getattr(contract, f.name)
        if is_dataclass(value):
            out += flatten(value)
        elif isinstance(value, list | tuple):
            out += value
        else:
            out.append(value)
    return out


class ScriptLibrary:
    """Registers every script once per client; subclasses add the typed calls. Scripts
    run through the client's pipelined connection where it has one (store/pipelined.py)."""

    def __init__(self, redis: Redis) -> None:
        self._scripts = {name: redis.register_script(script_source(name)) for name in NAMES}
        self._wire = PipelinedConnection.of(redis)

    async def _run(self, name: str, keys: list[Any], args: list[Any]) -> Any:
        script = self._scripts[name]
        if self._wire is not None:
            return await self._wire.run_script(script, keys, args)
        return await script(keys=keys, args=args)

    async def _call(self, name: str, keys: Any, args: Any) -> Any:
        return await self._run(name, flatten(keys), flatten(args))
