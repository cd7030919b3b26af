"""What the scheduler leader's webhook scan costs beside many sessions (issue 30: bounded
for a fleet of 100k sessions, not a scan of every session every round).

    python -m bench.webhook_scan                 # 100,000 ended sessions, 100 changes
    python -m bench.webhook_scan --sessions 20000 --changes 50

It starts a private redis-server, writes `--sessions` sessions into the completed status
index (a meta hash each, last updated an hour ago), then `--changes` sessions that
ended just now, each with a webhook subscription and its session_completed event. It
times the leader's rounds (scheduler/webhook_finder.py) and reads the server's own
counters: the round that records the changes, then rounds with nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.redis_server import start_redis
from bench.redis_stats import RedisSnapshot
from strands_durable.models import now_ms
from strands_durable.scheduler.webhook_finder import WebhookFinder
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.keys import new_session_id
from strands_durable.store.store import Store
from strands_durable.webhooks import WebhookSubscription

HOOK = WebhookSubscription(url="https://hooks.example.com/in").stored()


async def seed(store: Store, sessions: int, changes: int, now: int) -> None:
    index = store.keys.index_status(0, "completed")
    for start in range(0, sessions, 5_000):
        async with store.redis.pipeline(transaction=False) as pipe:
            for _ in range(min(5_000, sessions - start)):
                sid = new_session_id(0, 1)
                pipe.hset(store.keys.meta(sid), mapping={"status": "completed"})
                pipe.zadd(index, {sid: now - 3_600_000})
            await pipe.execute()
    async with store.redis.pipeline(transaction=False) as pipe:
        for n in range(changes):
            sid = new_session_id(0, 1)
            pipe.hset(store.keys.meta(sid), mapping={"status": "completed", "webhook": HOOK,
                                                     "workflow_name": "w"})
            pipe.xadd(store.keys.events(sid), {"type": "session_started"})
            pipe.xadd(store.keys.events(sid), {"type": "session_completed", "at": "t"})
            pipe.zadd(index, {sid: now - n})
        await pipe.execute()


async def measure(sessions: int, changes: int, rounds: int) -> None:
    redis = start_redis()
    settings = DurableSettings(redis_url=redis.url, key_prefix="scan")
    store = open_store(settings)
    try:
        await store.prepare()
        now = now_ms()
        await seed(store, sessions, changes, now)
        finder = WebhookFinder(store, settings, None)
        await store.set_webhook_mark(0, "completed", float(now - 5_000))
        print(f"{sessions:,} ended sessions an hour old, {changes} ended just now "
              f"(lookback {settings.webhook_lookback_ms} ms)")
        print("| round | recorded | visited | wall ms | Redis commands | Redis CPU ms |")
        print("|---|---|---|---|---|---|")
        for n in range(rounds):
            before = await RedisSnapshot.take(store.redis)
            started = time.perf_counter()
            done = await finder.round(now_ms())
            wall = (time.perf_counter() - started) * 1000
            after = await RedisSnapshot.take(store.redis)
            # the two INFO snapshots' own three commands are not the round's
            print(f"| {n + 1} | {done.recorded} | {done.visited} | {wall:.1f} | "
                  f"{after.commands - before.commands - 3} | "
                  f"{(after.cpu_s - before.cpu_s) * 1000:.1f} |")
    finally:
        await store.close()
        redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=4)
    a = parser.parse_args()
    asyncio.run(measure(a.sessions, a.changes, a.rounds))


if __name__ == "__main__":
    main()
