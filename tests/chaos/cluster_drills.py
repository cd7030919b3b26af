"""Shared by the Redis Cluster drills (failover, resharding): a fleet of real `arq worker`
processes and a `durable scheduler` on a local 3+3 cluster (tests/redis_cluster.py),
chains spread over shards on every primary, and the checks that nothing was lost and
nothing committed twice."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from helpers import REPO, poll_until, status_doc, wait_for
from helpers.fleet import Fleet, durable_bin
from recovery import FAST
from redis.exceptions import RedisError
from redis_cluster import LocalCluster

from strands_durable.models import SessionStatus
from strands_durable.scheduler.service import LOCK_NAME as SCHEDULER_LOCK
from strands_durable.sessions.control import pause, resume
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.keys import shard_of
from strands_durable.store.store import Store

# 8 shards land 2, 2 and 4 on the three primaries of `redis-cli --cluster create`.
SHARDS = 8
DRILL = {**FAST, "shards": SHARDS, "claim_idle_ms": 1000}


def chain_spec(steps: int, delay_s: float) -> str:
    body = "".join(f"""      - agent: a
        input: "step {i} of {{{{ n }}}} after {{{{ last_response | truncate(30) }}}}"
""" for i in range(steps))
    return f"""
version: 0
name: cluster-drill
runtime:
  provider: scripted
  script: {{delay_s: {delay_s}}}
agents:
  a: {{prompt: "You are agent a."}}
pattern:
  type: chain
  config:
    steps:
{body}"""


def cluster_settings(cluster: LocalCluster, prefix: str) -> DurableSettings:
    return DurableSettings(redis_url=cluster.url, key_prefix=prefix, **DRILL)


async def open_cluster_store(cluster: LocalCluster, prefix: str) -> Store:
    store = open_store(cluster_settings(cluster, prefix))
    await store.prepare()
    return store


@dataclass
class Drill:
    """The fleet, the scheduler and the sessions of one drill."""

    cluster: LocalCluster
    store: Store
    fleet: Fleet
    steps: int
    sids: list[str] = field(default_factory=list)
    scheduler: subprocess.Popen[bytes] | None = None

    async def start_scheduler(self) -> None:
        """A `durable scheduler`, returned once it holds the leader lock (running, not
        starting)."""
        log = (self.fleet.logdir / "scheduler.log").open("wb")
        self.scheduler = subprocess.Popen([*durable_bin(), "scheduler"], cwd=REPO,
                                          env=self.fleet.env, stdout=log,
                                          stderr=subprocess.STDOUT)
        self.fleet.workers.append(self.scheduler)  # stop_all kills it too
        lock = self.store.keys.lock(SCHEDULER_LOCK)

        async def leading() -> bool:
            return bool(await self.store.redis.exists(lock))

        await wait_for(leading, timeout_s=60, what="the scheduler to take its lock")

    async def submit(self, sessions: int, delay_s: float) -> None:
        """Start `sessions` chains, each paused at once: workers boot one after another,
        and on a loaded machine the first up could finish most chains before the last is
        consuming. `release` resumes them all once the whole fleet heartbeats."""
        assert not any(p.poll() is None for p in self.fleet.workers
                       if p is not self.scheduler), "submit before the workers start"
        text = chain_spec(self.steps, delay_s)
        for n in range(sessions):
            loaded = load_spec_text(text, "drill.yaml", {"n": str(n)})
            sid = (await start_session(self.store, loaded))[0]
            await pause(self.store, sid, "held until the drill's fleet is up")
            self.sids.append(sid)

    async def release(self) -> None:
        """Resume every session `submit` held (their parked first steps are queued again)."""
        for sid in self.sids:
            await resume(self.store, sid)

    def shard_slot(self, sid: str) -> int:
        return self.cluster.slot_of(self.store.keys.tag(shard_of(sid, SHARDS)))

    def on_port(self, port: int) -> list[str]:
        """The sessions whose shard the primary on `port` serves."""
        return [s for s in self.sids if self.cluster.owner_of_slot(self.shard_slot(s)).port
                == port]

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Every worker and the scheduler stopped (SIGSTOP) inside: nothing commits while
        figures that must not move are read; they go on (SIGCONT) after."""
        live = [p for p in self.fleet.workers if p.poll() is None]
        for proc in live:
            os.kill(proc.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for proc in live:
                os.kill(proc.pid, signal.SIGCONT)

    async def committed(self, sids: list[str]) -> int:
        total = 0
        for sid in sids:
            total += (await self.store.get_session(sid)).steps_committed
        return total

    async def committing(self, sids: list[str], at_least: int) -> int | None:
        """Steps committed over `sids` once it reaches `at_least` while most of them are
        still running (so the drill lands mid-run); None before. Workers start one after
        another: on a loaded machine the first may finish a few chains alone before the
        others are up, which changes nothing the drill checks while most still run."""
        records = [await self.store.get_session(s) for s in sids]
        running = sum(r.status == SessionStatus.RUNNING for r in records)
        assert 2 * running >= len(records), \
            f"{len(records) - running} of {len(records)} sessions ended before the drill " \
            "began: make the chains longer"
        total = sum(r.steps_committed for r in records)
        return total if total >= at_least else None

    async def wait_committing(self, sids: list[str], at_least: int) -> int:
        """Wait until `sids` have `at_least` commits, all of them still running."""
        return await wait_for(lambda: self.committing(sids, at_least), timeout_s=60,
                              what=f"{at_least} commits on the drill's sessions")

    async def wait_any_commit(self, held: list[str], timeout_s: float = 60) -> None:
        """Wait until the fleet commits one more step, of any session, or until every
        session still running is one of `held` (those the caller holds up, e.g. on a
        half-moved slot): then nothing can commit until the caller acts, and waiting
        would only time out. Read errors while the cluster changes count as neither."""
        first = await self.committed_readable(self.sids)
        others = [sid for sid in self.sids if sid not in set(held)]

        async def moved_or_only_held_left() -> bool:
            try:
                if await self.committed(self.sids) > first:
                    return True
                for sid in others:
                    if (await self.store.get_session(sid)).status == SessionStatus.RUNNING:
                        return False
                return True
            except RedisError:
                return False

        await wait_for(moved_or_only_held_left, timeout_s=timeout_s,
                       what="a commit, or every session but the held ones to end")

    async def committed_readable(self, sids: list[str], timeout_s: float = 30) -> int:
        """Steps committed over `sids`, once the cluster answers (it may still be
        settling after a failover)."""
        async def read() -> int | None:
            try:
                return await self.committed(sids) + 1  # 0 commits is an answer too
            except RedisError:
                return None

        return await wait_for(read, timeout_s=timeout_s, what="the cluster to answer") - 1

    async def committed_at_least(self, sids: list[str], n: int) -> int | None:
        total = await self.committed(sids)
        return total if total >= n else None

    async def wait_progress(self, sids: list[str], beyond: int, timeout_s: float = 120
                            ) -> float:
        """Seconds until `sids` have more than `beyond` commits (read errors while the
        cluster changes count as no progress yet)."""
        t0 = time.monotonic()

        async def moved() -> bool:
            try:
                return await self.committed(sids) > beyond
            except RedisError:
                return False

        await wait_for(moved, timeout_s=timeout_s, what="commits on the affected shards")
        return time.monotonic() - t0

    async def wait_all_ended(self, timeout_s: float = 240) -> None:
        async def ended() -> bool:
            try:
                for sid in self.sids:
                    if (await self.store.get_session(sid)).status == SessionStatus.RUNNING:
                        return False
            except RedisError:
                return False
            return True

        if not await poll_until(ended, timeout_s, interval_s=0.1):
            raise AssertionError(f"sessions still running after {timeout_s}s\n"
                                 + self.fleet.logs()[-4000:])

    def exited(self) -> list[str]:
        return [f"pid {p.pid} exited {p.returncode}" for p in self.fleet.workers
                if p.poll() is not None]


async def assert_each_step_once(drill: Drill) -> int:
    """Every session completed, each step with one result, one place in the commit order
    and one step_completed event, its response the chain's; the steps checked."""
    store, steps = drill.store, drill.steps
    for n, sid in enumerate(drill.sids):
        status = await status_doc(store, sid)
        assert status["status"] == "completed", (sid, status["error"], drill.fleet.logs()[-3000:])
        events = [f for _, f in await store.events(sid)]
        completed = Counter(f["step"] for f in events if f["type"] == "step_completed")
        assert completed == {f"step:{i}": 1 for i in range(steps)}, (sid, completed)
        order = await store.redis.lrange(store.keys.order(sid), 0, -1)
        order = [o.decode() if isinstance(o, bytes) else o for o in order]
        assert sorted(order) == sorted(f"step:{i}" for i in range(steps)), (sid, order)
        assert int(await store.redis.hlen(store.keys.results(sid))) == steps
        history = status["pattern_state"]["step_history"]
        assert [h["index"] for h in history] == list(range(steps)), sid
        for i, h in enumerate(history):
            assert h["response"].startswith(f"a: step {i} of {n} after"), (sid, h)
        record = await store.get_session(sid)
        assert record.steps_committed == steps
    return len(drill.sids) * steps

