"""Resume latency: from `resume()` on a paused session with 1,000 committed steps to its
next step starting on a worker, in-process.

Chains of `committed + 10` steps run on one in-process StepConsumer (bench_noop). Just
before step `committed` of a session commits, the bench pauses the session (as an
operator would, `pause()`), so that commit lands on a paused session and holds its next
step back. Once every session is paused at exactly `committed` steps, each is resumed in
turn (`sessions.control.resume`, what `durable resume` and the API call):
the time runs from the call to the moment the worker's executor is called for the held
step, after its gate (step_started written). The sessions then run to the end and are
checked for exactly-once like every other run.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from bench.integrity import Footprint
from bench.latency import checked, create_sessions, percentile, step_number, wait_done
from bench.throughput import BenchError, fresh_prefix
from strands_durable.models import SessionStatus, StepJob
from strands_durable.sessions.control import pause, resume
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import CommitOutcome, CommitRequest, Store
from strands_durable.worker.consumer import StepConsumer

TAIL_STEPS = 10  # steps after the resumed one, so the resumed session runs on


@dataclass
class ResumeResult:
    sessions: int
    committed: int  # steps committed before the pause
    to_next_step_ms: list[float] = field(default_factory=list)  # resume call -> step starts
    call_ms: list[float] = field(default_factory=list)  # the resume() call alone
    footprint: Footprint | None = None  # what one finished session holds

    @property
    def p50_ms(self) -> float:
        return percentile(self.to_next_step_ms, 50)

    @property
    def max_ms(self) -> float:
        return max(self.to_next_step_ms, default=float("nan"))

    @property
    def call_p50_ms(self) -> float:
        return percentile(self.call_ms, 50)

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "committed": self.committed,
                "to_next_step_ms": [round(x, 3) for x in self.to_next_step_ms],
                "call_ms": [round(x, 3) for x in self.call_ms],
                "p50_ms": round(self.p50_ms, 3), "max_ms": round(self.max_ms, 3),
                "call_p50_ms": round(self.call_p50_ms, 3),
                "footprint": self.footprint.to_dict() if self.footprint else None}


async def _paused_at(store: Store, sids: list[str], committed: int) -> bool:
    for sid in sids:
        record = await store.get_session(sid)
        if record.status == SessionStatus.FAILED:
            raise BenchError(f"resume: session {sid} failed: {record.error}")
        if record.status != SessionStatus.PAUSED or record.steps_committed != committed:
            return False
    return True


async def _until_paused(store: Store, sids: list[str], committed: int,
                        timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await _paused_at(store, sids, committed):
        if time.monotonic() > deadline:
            raise BenchError(f"resume: sessions not paused at {committed} steps after "
                             f"{timeout_s:.0f}s")
        await asyncio.sleep(0.05)


async def _time_one(store: Store, sid: str, started: dict[str, asyncio.Future[float]],
                    result: ResumeResult, timeout_s: float) -> None:
    started[sid] = asyncio.get_running_loop().create_future()
    t0 = time.perf_counter()
    await resume(store, sid)
    result.call_ms.append((time.perf_counter() - t0) * 1000)
    try:
        at = await asyncio.wait_for(started[sid], timeout_s)
    except TimeoutError:
        raise BenchError(f"resume: session {sid}'s next step did not start") from None
    result.to_next_step_ms.append((at - t0) * 1000)
    # Its remaining steps run before the next resume, which would otherwise share this
    # process's event loop with them.
    deadline = time.monotonic() + timeout_s
    while (await store.get_session(sid)).status != SessionStatus.COMPLETED:
        if time.monotonic() > deadline:
            raise BenchError(f"resume: session {sid} did not complete after resuming")
        await asyncio.sleep(0.01)


async def run_resume(redis_url: str, *, sessions: int, committed: int,
                     timeout_s: float) -> ResumeResult:
    settings = DurableSettings(redis_url=redis_url, key_prefix=fresh_prefix("resume"),
                               bench_noop=True)
    store = open_store(settings)
    consumer = StepConsumer(settings, store)
    commit, executor = store.commit, consumer.runner.executor
    run_step = executor.run
    held_key = f"step:{committed}"  # the step the pause holds back (0-based key)
    started: dict[str, asyncio.Future[float]] = {}
    result = ResumeResult(sessions, committed)

    paused: set[str] = set()

    async def pausing_commit(req: CommitRequest, take_next: int = 0) -> CommitOutcome:
        # Once: the pause bumps the session's version, so this commit is re-planned and
        # comes back (then onto a paused session, which holds its next step).
        if step_number(req) == committed and req.job.session_id not in paused:
            paused.add(req.job.session_id)
            await pause(store, req.job.session_id, "bench: paused before its last commit")
        return await commit(req, take_next)

    async def noting_run(spec: Any, variables: Any, job: StepJob, *args: Any) -> Any:
        waiting = started.get(job.session_id)
        if job.key == held_key and waiting is not None and not waiting.done():
            waiting.set_result(time.perf_counter())
        return await run_step(spec, variables, job, *args)

    store.commit = pausing_commit  # type: ignore[method-assign]
    executor.run = noting_run  # type: ignore[method-assign,assignment]
    try:
        sids = await create_sessions(store, committed + TAIL_STEPS, sessions)
        await consumer.start()
        await _until_paused(store, sids, committed, timeout_s)
        store.commit = commit  # type: ignore[method-assign]
        for sid in sids:
            await _time_one(store, sid, started, result, timeout_s)
        await wait_done(store, sessions, timeout_s, "resume")
        await consumer.stop(grace_s=5)
        result.footprint = await checked(store, committed + TAIL_STEPS, "resume", sample=2)
    finally:
        await consumer.stop(grace_s=5)
        await store.redis.aclose()
    return result
