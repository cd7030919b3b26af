"""Lua scripts beside their caller: loaded once, prefixed with the shared helpers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

_NAMES = (
    "create", "gate", "commit", "fail_step", "dead_letter", "renew",
    "promote_timers", "delete", "lock_release", "lock_extend", "control",
    "release", "requeue", "fork", "retire_consumer", "claim_session",
)


@cache
def script_source(name: str) -> str:
    lua = resources.files("strands_durable.store") / "lua"
    return (lua / "_lib.lua").read_text() + "\n" + (lua / f"{name}.lua").read_text()


@dataclass(frozen=True)
class Scripts:
    create: AsyncScript
    gate: AsyncScript
    commit: AsyncScript
    fail_step: AsyncScript
    dead_letter: AsyncScript
    renew: AsyncScript
    promote_timers: AsyncScript
    delete: AsyncScript
    lock_release: AsyncScript
    lock_extend: AsyncScript
    control: AsyncScript
    release: AsyncScript
    requeue: AsyncScript
    fork: AsyncScript
    retire_consumer: AsyncScript
    claim_session: AsyncScript

    @classmethod
    def register(cls, redis: Redis) -> Scripts:
        loaded: dict[str, Any] = {n: redis.register_script(script_source(n)) for n in _NAMES}
        return cls(**loaded)
