"""What the attack tests share (tests/attack): a canary provider key, the environment of
a `durable` process holding it, and a snapshot of everything a prefix holds in Redis."""

from __future__ import annotations

import os
from collections.abc import Callable

from strands_durable.store.store import Store

CANARY = "sk-canary-7f3a9c"


def moves_by_itself(store: Store) -> Callable[[str], bool]:
    """Whether a key of the store's prefix changes with nobody asking: heartbeats and beats
    of a live consumer, the tokens of the day its committed steps used (written once a
    second, worker/token_tally.py) and the sessions' live streams (flushed after their
    steps, worker/live.py; no route writes them: a session's delete shows on its other
    keys). What "nothing was written" snapshots leave out."""
    beating = {store.keys.workers(), *(store.keys.beats(k) for k in range(store.keys.shards))}
    any_id = "00000000-0000-4000-8000-000000000000"
    live_suffix = store.keys.live(any_id).removeprefix(store.keys.meta(any_id))  # ':live'

    def moves(key: str) -> bool:
        return (key in beating or (":quota:" in key and ":tokens:" in key)
                or key.endswith(live_suffix))

    return moves


async def snapshot(store: Store) -> dict[str, bytes]:
    """Every key under the store's prefix with its serialized value (DUMP), so that two
    snapshots are equal only when nothing was written, deleted or expired."""
    found: dict[str, bytes] = {}
    moves = moves_by_itself(store)
    async for key in store.redis.scan_iter(f"{store.keys.prefix}:*"):
        if not moves(key):
            found[key] = await store.redis.dump(key)
    return found


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a `durable` process: no Redis unless given (an in-memory one
    for `durable run`, never a local store in the real home), the canary set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_")}
    env.update({"OPENAI_API_KEY": CANARY, "PYTHONUNBUFFERED": "1", "DURABLE_EPHEMERAL": "1"})
    env.update(extra)
    return env
