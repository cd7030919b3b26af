"""What a run cost the redis-server, from its own counters (INFO stats, cpu, commandstats).

Round trips are `total_reads_processed`: one per read event on a client socket, so a
pipeline or a script call is one, and the commands a Lua script runs inside (which
`commandstats` and `total_commands_processed` count too) are none. The bench's own
polling reads are subtracted (the caller counts them). Redis CPU is
`used_cpu_user + used_cpu_sys` of the whole server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis


@dataclass(frozen=True)
class RedisSnapshot:
    reads: int
    commands: int
    cpu_s: float
    calls: dict[str, int]

    @classmethod
    async def take(cls, redis: Redis) -> RedisSnapshot:
        stats = await redis.info("stats")
        cpu = await redis.info("cpu")
        cmds = await redis.info("commandstats")
        calls = {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in cmds.items()}
        return cls(reads=int(stats["total_reads_processed"]),
                   commands=int(stats["total_commands_processed"]),
                   cpu_s=float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]),
                   calls=calls)


@dataclass
class RedisCost:
    """Per unit (step or job) of one run."""

    round_trips: float = 0.0
    commands: float = 0.0  # every command, script-inner ones included
    cpu_us: float = 0.0
    calls: dict[str, float] = field(default_factory=dict)  # per command, the busiest

    @classmethod
    def between(cls, before: RedisSnapshot, after: RedisSnapshot, units: int,
                own_reads: int = 0) -> RedisCost:
        n = max(units, 1)
        # The snapshot's own INFO calls are 3 reads (and 3 commands): not the run's.
        reads = after.reads - before.reads - own_reads - 3
        commands = after.commands - before.commands - 3
        calls = {k: (v - before.calls.get(k, 0)) / n for k, v in after.calls.items()
                 if k != "info" and v - before.calls.get(k, 0) > 0}
        busiest = dict(sorted(calls.items(), key=lambda kv: -kv[1])[:8])
        return cls(round_trips=max(reads, 0) / n, commands=max(commands, 0) / n,
                   cpu_us=(after.cpu_s - before.cpu_s) * 1e6 / n,
                   calls={k: round(v, 2) for k, v in busiest.items()})

    def to_dict(self) -> dict[str, Any]:
        return {"round_trips": round(self.round_trips, 3), "commands": round(self.commands, 2),
                "cpu_us": round(self.cpu_us, 1), "calls": self.calls}
