"""One delivered step's life: gate, execute (lease renewed), plan (lease renewed), commit.

Planning runs before the commit so its output is part of the same transaction; a
commit that lost a race with another commit of the same session is planned again
from the fresh state (the step is not run again). Planning renders the next steps'
templates, CPU work a spec controls: on the event loop while its renders stay within a
few milliseconds, else in a thread, bounded by DURABLE_RENDER_TIMEOUT_S per template,
while the loop renews the step's lease and serves other steps (planning/inline.py). A
render over a limit fails the session once, naming the step and the limit (no retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from strands_durable import metrics
from strands_durable.errors import Conflict
from strands_durable.models import (
    Event,
    EventType,
    SessionStatus,
    StepJob,
    StepKind,
    StepResult,
    now_iso,
    now_ms,
)
from strands_durable.planning.advance import Snapshot, plan_commit
from strands_durable.planning.inline import LOOP_BUDGET_S, may_plan_on_loop
from strands_durable.settings import DurableSettings
from strands_durable.spec.model import Spec, parse_spec
from strands_durable.spec.render_guard import LoopBudgetSpent, on_the_loop
from strands_durable.store.records import GateOutcome, TakenEntry
from strands_durable.store.store import CommitRequest, Store
from strands_durable.worker import retry_policy, step_commit
from strands_durable.worker.execute import StepExecutor, StepOutput, StepRun
from strands_durable.worker.faults import Breakpoints
from strands_durable.worker.journal import JournalLost
from strands_durable.worker.results_cache import ResultsCache, SessionCache, brought
from strands_durable.worker.rewind import history_intact
from strands_durable.worker.step_failure import step_problem
from strands_durable.worker.telemetry import TRACING, StepCollector, StepFacts, mark_failed

log = logging.getLogger("durable.worker")

MAX_REPLANS = 50
T = TypeVar("T")
# What a step's commit took for the worker to run next: None, it took nothing (it was
# not asked to, or did not commit); [], the stream had nothing new; else the entries.
Taken = list[TakenEntry] | None



class StepRunner:
    def __init__(self, settings: DurableSettings, store: Store, executor: StepExecutor,
                 consumer: str) -> None:
        self.settings = settings
        self.store = store
        self.executor = executor
        self.consumer = consumer
        self.cache = ResultsCache()
        self.running: dict[str, StepJob] = {}  # entry id -> job, for heartbeats
        self.specs: dict[str, Spec] = {}
        self.on_loop: dict[str, bool] = {}  # spec digest -> its plans try the loop first
        self.crash = executor.crash  # one count per process for every crash point
        self.breakpoints = (Breakpoints(settings.breakpoint_dir, consumer)
                            if settings.breakpoint_dir else None)
        # How many new entries a commit may take for this worker to run next (its
        # consumer says: 0 once stopping, or for a consumer that never reads the group).
        self.take_next: Callable[[int], int] = lambda shard: 0
        # Redis outages seen so far (the worker's RedisOutage counts them; none in-process).
        self.redis_outages: Callable[[], int] = lambda: 0
        # Entry id -> the detail of its step_reclaimed event (a failover names the dead
        # worker); the leased work of each running entry, and those found taken over.
        self.reclaim_notes: dict[str, str] = {}
        self._leased: dict[str, asyncio.Future[Any]] = {}
        self._lost: set[str] = set()

    async def process(self, shard: int, entry_id: str, fields: dict[str, str],
                      reclaimed: bool = False, gated: TakenEntry | None = None) -> Taken:
        """Run the entry's step; returns what its commit took (pending under us, to run)."""
        try:
            job = StepJob.from_json(fields["job"])
        except (KeyError, ValueError, TypeError) as exc:
            log.error("entry %s on shard %d is not a step job (%s); dead-lettering it",
                      entry_id, shard, exc)
            await self.store.dead_letter_raw(shard, entry_id, fields, f"not a step job: {exc}",
                                            self.consumer)
            metrics.dead_lettered()
            return None
        self.running[entry_id] = job
        try:
            return await self._process(shard, entry_id, job, reclaimed, gated)
        finally:
            self.running.pop(entry_id, None)

    async def _gate(self, entry_id: str, job: StepJob, reclaimed: bool, cache: SessionCache,
                    gated: TakenEntry | None) -> GateOutcome:
        """The step's gate: decided by take.lua already (`gated`; the results it did not
        bring are read here when this worker's cache lacks them), or by gate.lua now."""
        sid, known = job.session_id, cache.count
        if gated is not None and gated.gate is not None:
            missing = gated.order_len - known
            if gated.gate.verdict == "run" and missing > 0:
                self.cache.extend(cache, known, brought(gated.tail, missing) or await
                                  self.store.results(sid, known, gated.order_len - 1))
            return gated.gate
        kind = EventType.STEP_RECLAIMED if reclaimed else EventType.STEP_STARTED
        started = Event(kind, step=job.key, attempt=job.attempt, worker=self.consumer, at=now_iso(),
                        detail=self.reclaim_notes.pop(entry_id, ""))
        gate = await self.store.gate(job, entry_id, self.consumer, known, started)
        if gate.verdict == "run":
            self.cache.extend(cache, known, gate.new_results)
        return gate

    async def _process(self, shard: int, entry_id: str, job: StepJob, reclaimed: bool,
                       gated: TakenEntry | None = None) -> Taken:
        sid = job.session_id
        cache = self.cache.get(sid, self.redis_outages())
        gate = await self._gate(entry_id, job, reclaimed, cache, gated)
        if gate.verdict != "run":
            log.debug("session %s step %s: %s", sid, job.key, gate.verdict)
            return None
        fields = gate.fields
        spec = await self._spec(sid, fields["spec_digest"])
        if job.kind == StepKind.HITL_TIMEOUT:
            return await self._apply_hitl_default(shard, entry_id, spec, job, fields, cache)
        variables = json.loads(fields["variables"] or "{}")
        self.crash.reached("after_gate")
        run = StepRun(entry_id, self.consumer, fields["spec_digest"], gate.journal,
                      gated.lane if gated is not None else None, fields.get("namespace") or "")
        # The step's span (when its session is traced): Strands' spans nest under it.
        facts = StepFacts(self.consumer, reclaimed, len(gate.journal),
                          int(fields.get("steps") or 0))
        with TRACING.step_span(spec, job, facts, self.settings) as spans:
            return await self._run(shard, entry_id, spec, variables, job, reclaimed, run,
                                   fields, cache, spans)

    async def _run(self, shard: int, entry_id: str, spec: Spec, variables: dict[str, Any],
                   job: StepJob, reclaimed: bool, run: StepRun, fields: dict[str, str],
                   cache: SessionCache, spans: StepCollector | None = None) -> Taken:
        sid = job.session_id
        try:
            output = await self._execute_with_lease(shard, entry_id, spec, variables, job,
                                                    reclaimed, run)
        except (LeaseLost, JournalLost):
            log.warning("session %s step %s: lease lost to another worker; abandoning",
                        sid, job.key)
            metrics.step_lost(spec.pattern.type, job.agent)
            return None
        except asyncio.CancelledError:
            raise  # shutdown: the entry stays pending and another worker reclaims it
        except Exception as exc:
            await self._fail(shard, entry_id, spec, job, exc)
            return None

        result = StepResult(
            key=job.key, agent=job.agent, response=output.response,
            input_tokens=output.input_tokens, output_tokens=output.output_tokens,
            attempt=job.attempt, worker=self.consumer, committed_at=now_iso(),
            duration_ms=round(output.duration_ms, 3), meta=job.meta,
            # This run's spans, committed with the step (`{{ TRACE }}`), when kept.
            trace=spans.trace() if spans is not None else None,
        )
        return await self._plan_and_commit(shard, entry_id, spec, job, result, output, fields,
                                           cache)

    async def _spec(self, sid: str, digest: str) -> Spec:
        # Sessions of one spec share a digest: fetch and parse each spec once.
        spec = self.specs.get(digest)
        if spec is None:
            spec = self.specs[digest] = parse_spec(await self.store.spec_json(sid))
            self.on_loop[digest] = may_plan_on_loop(spec)
            while len(self.specs) > 256:
                oldest = next(iter(self.specs))
                del self.specs[oldest]
                self.on_loop.pop(oldest, None)
        return spec

    async def _execute_with_lease(self, shard: int, entry_id: str, spec: Spec,
                                  variables: dict[str, Any], job: StepJob,
                                  reclaimed: bool, run: StepRun) -> StepOutput:
        if self.settings.bench_noop:
            return await self.executor.run(spec, variables, job)
        return await self._with_lease(
            shard, entry_id, self._execute(entry_id, spec, variables, job, reclaimed, run))

    def _planned(self, spec: Spec, fields: dict[str, str], job: StepJob, result: StepResult,
                 output: StepOutput, entry_id: str, results: Mapping[str, StepResult]
                 ) -> CommitRequest:
        snapshot = Snapshot(spec=spec, fields=fields, results=results, session_id=job.session_id)
        return plan_commit(snapshot, job, result, entry_id=entry_id, consumer=self.consumer,
                           new_messages=output.new_messages, compaction=output.compaction)

    async def _plan(self, shard: int, entry_id: str, digest: str,
                    plan: Callable[[Mapping[str, StepResult]], CommitRequest],
                    cache: SessionCache) -> CommitRequest:
        """`plan` on the loop within LOOP_BUDGET_S when the spec may (planning/
        inline.py), else (or past that budget) in a thread, the lease renewed meanwhile
        (a step a human answered has no stream entry, hence no lease)."""
        if self.on_loop.get(digest, False):
            try:
                with on_the_loop(LOOP_BUDGET_S):
                    return plan(cache.results)
            except LoopBudgetSpent:
                self.on_loop[digest] = False  # this spec plans in the thread from now on
                log.info("spec %s: a plan ran past %g ms on the event loop; its plans run "
                         "in a thread from now on", digest[:12], LOOP_BUDGET_S * 1000)
        # A copy: the loop may extend the cache while the thread plans.
        planning = asyncio.to_thread(plan, dict(cache.results))
        if not entry_id:
            return await planning
        return await self._with_lease(shard, entry_id, planning)

    async def _with_lease(self, shard: int, entry_id: str, work: Awaitable[T]) -> T:
        """Await `work`, renewing the entry's lease; LeaseLost (and `work` cancelled)
        once another worker has taken the entry over."""
        task = asyncio.ensure_future(work)
        interval = self.settings.effective_lease_renew_ms / 1000
        self._leased[entry_id] = task
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=interval)
                if done:
                    if task.cancelled() and entry_id in self._lost:
                        raise LeaseLost(entry_id)  # drop_lost: taken over meanwhile
                    return task.result()
                if not await self.store.renew(shard, entry_id, self.consumer):
                    task.cancel()
                    raise LeaseLost(entry_id)
        finally:
            self._leased.pop(entry_id, None)
            self._lost.discard(entry_id)
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def drop_lost(self, shard: int, entry_ids: list[str]) -> int:
        """Stop now the leased work of those entries that are no longer ours (this worker
        was declared dead while it ran them: worker/failover.py) instead of at their next
        renewal; each ends as a lost lease does, writing nothing. Returns how many."""
        dropped = 0
        for entry_id in entry_ids:
            work = self._leased.get(entry_id)
            if work is not None and not await self.store.renew(shard, entry_id, self.consumer):
                self._lost.add(entry_id)
                work.cancel()
                dropped += 1
        return dropped

    async def _execute(self, entry_id: str, spec: Spec, variables: dict[str, Any],
                       job: StepJob, reclaimed: bool, run: StepRun) -> StepOutput:
        if self.breakpoints is not None:  # tests only; inside the lease, so it is renewed
            await self.breakpoints.reached(spec.name, job, entry_id, reclaimed)
        return await self.executor.run(spec, variables, job, run)

    async def _plan_and_commit(self, shard: int, entry_id: str, spec: Spec, job: StepJob,
                               result: StepResult, output: StepOutput,
                               fields: dict[str, str], cache: SessionCache) -> Taken:
        sid = job.session_id
        for _ in range(MAX_REPLANS):
            plan = functools.partial(self._planned, spec, fields, job, result, output, entry_id)
            try:
                request = await self._plan(shard, entry_id, fields.get("spec_digest", ""),
                                           plan, cache)
            except LeaseLost:
                log.warning("session %s step %s: lease lost while planning; abandoning",
                            sid, job.key)
                metrics.step_lost(spec.pattern.type, job.agent)
                return None
            self.crash.reached("before_commit")
            if not await self._history_survived(shard, entry_id, job, cache):
                return None
            take = self.take_next(shard) if entry_id else 0
            started = time.perf_counter()
            outcome = await self.store.commit(request, take)
            await step_commit.commit_answered(self.store, spec, outcome.verdict,
                                              outcome.bytes_written, result, fields, started)
            if outcome.verdict != "conflict":
                if outcome.verdict == "ok":
                    # Cached when it is the next in commit order after what the cache
                    # holds (as stored: read back from its JSON); else the next read
                    # of the commit-order list brings it, in its place among siblings.
                    if outcome.position == cache.count + 1:
                        stored = outcome.result_json or request.result.to_json()
                        self.cache.extend(cache, cache.count, [StepResult.from_json(stored)])
                    self.crash.reached("after_commit")
                    if outcome.status == SessionStatus.COMPLETED.value:
                        await self._trace_completion(spec, sid)
                    return list(outcome.taken) if take else None
                log.info("session %s step %s: commit %s", sid, job.key, outcome.verdict)
                return list(outcome.taken) if outcome.taken else None
            fields = await self._refresh(sid, cache)
        log.error("session %s step %s: gave up after %d conflicting commits", sid, job.key,
                  MAX_REPLANS)
        return None

    async def _history_survived(self, shard: int, entry_id: str, job: StepJob,
                                cache: SessionCache) -> bool:
        """After an outage began while this step ran, the results it ran and plans from
        must still be stored as they were read (rewind.py); else it runs again."""
        outages = self.redis_outages()
        if cache.outages == outages:
            return True
        if history_intact(cache.results, await self.store.results(job.session_id)):
            cache.outages = outages
            return True
        log.warning("session %s step %s: Redis lost commits this step was run from (a "
                    "failover or restart lost its last writes); it runs again from what "
                    "is stored", job.session_id, job.key)
        if entry_id:  # back to the group at once, for the next re-claim to run it again
            await self.store.release(shard, [entry_id], self.consumer,
                                     self.settings.claim_idle_ms * 10)
        return False

    async def _apply_hitl_default(self, shard: int, entry_id: str, spec: Spec, job: StepJob,
                                  fields: dict[str, str], cache: SessionCache) -> Taken:
        """A HITL step's timeout came due: commit its default as the human's answer."""
        waiting = {w["step"] for w in json.loads(fields.get("waiting") or "[]")}
        if job.key not in waiting:
            await self.store.ack(shard, entry_id)  # answered (or withdrawn) meanwhile
            return None
        default = str(job.meta.get("default") or "")
        result = StepResult(key=job.key, agent="hitl", response=default, worker=self.consumer,
                            committed_at=now_iso(), meta={**job.meta, "timed_out": True})
        log.info("session %s: HITL %s timed out; applying its default", job.session_id,
                 job.key)
        return await self._plan_and_commit(shard, entry_id, spec, job, result,
                                           StepOutput(response=default), fields, cache)

    async def _trace_completion(self, spec: Spec, sid: str) -> None:
        """The session span, from the worker that completed the session."""
        if TRACING.config_for(spec, self.settings) is None:
            return
        try:
            record = await self.store.get_session(sid)
        except Exception:  # telemetry never fails a committed step
            log.warning("session %s: no session span (its record is unreadable)", sid,
                        exc_info=True)
            return
        TRACING.session_completed(spec, record, self.settings)

    async def _refresh(self, sid: str, cache: SessionCache) -> dict[str, str]:
        fields = await self.store.plan_fields(sid)
        known = cache.count
        self.cache.extend(cache, known, await self.store.results(sid, known))
        return fields

    async def _fail(self, shard: int, entry_id: str, spec: Spec, job: StepJob,
                    exc: BaseException) -> None:
        shown = step_problem(exc, spec, job.agent)
        problem, retryable = shown.text, shown.retryable
        policy = spec.runtime.failure_policy
        decision = retry_policy.decide(
            retries=policy.retries, strategy=policy.backoff, wait_min=policy.wait_min,
            wait_max=policy.wait_max, attempt=job.attempt, retryable=retryable)
        at = now_iso()
        error = (f"step {job.key} (agent {job.agent}) failed on attempt {job.attempt}: "
                 f"{problem}")
        events = [Event(EventType.STEP_FAILED, step=job.key, attempt=job.attempt,
                        worker=self.consumer, at=at, detail=problem)]
        if decision.retry:
            events.append(Event(EventType.STEP_RETRIED, step=job.key, attempt=job.attempt + 1,
                                at=at, detail=f"in {decision.delay_s:.1f}s"))
            retry_at = now_ms() + int(decision.delay_s * 1000)
        else:
            events.append(Event(EventType.SESSION_FAILED, step=job.key, at=at, detail=error))
            retry_at = None
        log.warning("session %s: %s", job.session_id, error)
        mark_failed(error)
        metrics.step_failed(spec.pattern.type, job.agent, decision.retry)
        await self.store.fail_step(job, entry_id, self.consumer, retry_at_ms=retry_at,
                                   error=error, events=events, now_iso=at, now_ms=now_ms())


class LeaseLost(Conflict):
    """Another worker owns the step's entry now: this one writes nothing."""

    code = "lease_lost"

    def __init__(self, entry_id: str) -> None:
        super().__init__(f"lease on stream entry {entry_id} was lost")

