"""The scheduler role (`durable scheduler`): it owns time.

Any number of replicas may run; one leads, by a Redis lock (store/locks.py) renewed
every third of its TTL. A leader that cannot renew stops acting before its lease could
have passed to another replica, and a replica that stops releases the lock so a standby
takes over at once (or after the TTL, if the leader died). The leader:
- promotes due timers (retry backoff, HITL timeouts) onto the step streams. Workers do
  it too, so a fleet of workers alone still retries and times out; the promotion
  script is atomic, so several promoters never enqueue a timer twice;
- pauses running sessions past runtime.budgets.max_duration_s (scheduler/watchdog.py);
- flags running sessions that stopped making progress (`session_stuck` events and the
  durable_sessions_stuck gauge);
- declares dead the workers that stopped beating, as workers do (fast failover:
  scheduler/failover.py), so their steps run again within seconds;
- forgets the heartbeats of workers silent for DURABLE_WORKER_RETIRE_S and retires their
  consumers from the groups once nothing is pending under them, which keeps the fleet
  read (and `durable workers`) bounded;
- fires the cron schedules' ticks, each once (scheduler/schedule_clock.py);
- expires ended sessions: completed, failed and cancelled ones not updated for
  DURABLE_RETENTION_DAYS are deleted by the cleanup code (sessions/cleanup.py: the
  session's lock, a re-check, one atomic delete), a batch per round, in a task of its
  own so a slow round never holds up the timers.
Each of these is atomic and harmless twice, so two replicas that both believe they lead
for a moment (a process paused past its TTL) do no damage.

Every replica serves /metrics: its own, plus the fleet gauges read from Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import signal
import time

from strands_durable import metrics
from strands_durable.errors import ConfigError, LockLost, LockNotAcquired
from strands_durable.logs import configure_logging
from strands_durable.models import now_ms
from strands_durable.redis_targets import redact
from strands_durable.scheduler.failover import DeathWatch
from strands_durable.scheduler.schedule_clock import ScheduleClock
from strands_durable.scheduler.watchdog import DurationGuard, StuckWatch
from strands_durable.scheduler.webhook_delivery import TransportFactory, WebhookService
from strands_durable.sessions.cleanup import cleanup_sessions
from strands_durable.sessions.quotas import admit_queued
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.fleet import process_name
from strands_durable.store.outage import REDIS_DOWN_IN_LOOP, RedisOutage
from strands_durable.store.store import Store

log = logging.getLogger("durable.scheduler")

LOCK_NAME = "scheduler"
PROMOTE_BATCH = 100
EXPIRE_BATCH = 200  # sessions deleted per retention round at most


class SchedulerService:
    def __init__(self, settings: DurableSettings, store: Store, name: str | None = None,
                 webhook_transport: TransportFactory | None = None) -> None:
        self.settings = settings
        self.store = store
        self.name = name or process_name()
        self.lock = store.new_lock(LOCK_NAME, ttl_ms=settings.scheduler_lock_ttl_ms)
        self.durations = DurationGuard(store)
        self.stuck = StuckWatch(store, settings.stuck_after_s)
        self.deaths = DeathWatch(store, settings, self.name)  # fast failover, while leading
        try:  # webhooks (scheduler/webhook_delivery.py), while leading
            self.webhooks = WebhookService(store, settings, webhook_transport)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        self.schedules = ScheduleClock(store, settings.timer_poll_ms / 1000)  # cron schedules
        self._lease_until = 0.0  # monotonic time our lock may have lapsed by
        self._stopping = asyncio.Event()
        self._next_check = self._next_stuck_check = 0.0
        # Stuck sessions are rare and slow to matter; finding them may scan a stream.
        self.stuck_check_s = max(settings.scheduler_check_s, settings.stuck_after_s / 10)
        self.checks = 0  # session checks run while leading (tests wait on it)
        self.expiry_rounds = 0  # retention rounds run while leading (tests wait on it)
        # One line when Redis becomes unavailable and one when it is back, as a worker
        # logs them, however many rounds fail meanwhile; the scheduler never gives up.
        self.outage = RedisOutage(math.inf, redact(settings.redis_url),
                                  announce=self._announce)

    # -- leadership ---------------------------------------------------------------
    @property
    def leading(self) -> bool:
        return bool(self.lock.token) and time.monotonic() < self._lease_until

    async def _lead(self) -> None:
        """Take the lock when free, keep it while we run; let it go if we cannot."""
        ttl_s = self.settings.scheduler_lock_ttl_ms / 1000
        while not self._stopping.is_set():
            asked = time.monotonic()
            try:
                if self.lock.token:
                    await self.lock.extend()
                    self._lease_until = asked + ttl_s
                elif await self.lock.acquire():
                    self._lease_until = asked + ttl_s
                    log.info("scheduler %s leads (fence %d)", self.name, self.lock.fence)
                # A lock round is a write every replica makes: once it succeeds, Redis is
                # back (a read alone may answer while a primary still refuses writes).
                self.outage.recovered()
            except LockLost:
                self.lock.token = ""
                self._lease_until = 0.0
                self.outage.recovered()
                log.warning("scheduler %s lost the leader lock; standing by", self.name)
            except REDIS_DOWN_IN_LOOP as exc:
                self.outage.failed(exc)
            metrics.SCHEDULER_LEADER.set(1 if self.leading else 0)
            await self._pause(ttl_s / 3)

    # -- duties ------------------------------------------------------------------------
    async def promote_timers(self, now: int) -> int:
        promoted = 0
        for shard in range(self.store.keys.shards):
            while True:
                moved = await self.store.promote_timers(shard, now, PROMOTE_BATCH)
                promoted += moved
                if moved < PROMOTE_BATCH or not self.leading:
                    break
        if promoted:
            metrics.TIMERS_PROMOTED.inc(promoted)
        return promoted

    async def check_sessions(self, now: int) -> None:
        paused = await self.durations.check(now)
        metrics.DURATION_PAUSES.inc(len(paused))
        await admit_queued(self.store)  # sessions queued for their namespace's quota
        if time.monotonic() >= self._next_stuck_check:
            self._next_stuck_check = time.monotonic() + self.stuck_check_s
            stuck, flagged = await self.stuck.check(now)
            metrics.STUCK.set(stuck)
            metrics.STUCK_FLAGGED.inc(flagged)
        await self.forget_workers(now)
        self.checks += 1

    async def forget_workers(self, now: int) -> int:
        """Forget the heartbeats of workers silent for worker_retire_s; retire their
        consumers (and those of workers that never beat) once nothing is pending under
        them and they were idle as long. Returns the heartbeats forgotten."""
        retire_ms = int(self.settings.worker_retire_s * 1000)
        beats = await self.store.heartbeats()
        gone = {name for name, raw in beats.items() if _last_seen_ms(raw) < now - retire_ms}
        await self.store.forget_heartbeats(sorted(gone))
        # Crashed workers' consumers, once others re-claimed their entries.
        for shard in range(self.store.keys.shards):
            for name, (pending, idle) in (await self.store.group_consumers(shard)).items():
                if (name not in beats or name in gone) and pending == 0 and idle >= retire_ms:
                    # The script checks again, atomically, before it drops the consumer.
                    await self.store.retire_consumer(name, retire_ms, shards=(shard,))
        return len(gone)

    async def expire_sessions(self, now: int) -> list[str]:
        """Delete up to EXPIRE_BATCH ended sessions past retention_days, oldest first
        (none when it is 0, or while an operator's `sessions cleanup` runs)."""
        if self.settings.retention_days <= 0:
            return []
        try:
            expired = await cleanup_sessions(self.store, max_age_days=self.settings.retention_days,
                                             now=now, limit=EXPIRE_BATCH, wait_s=0)
        except LockNotAcquired:
            return []
        if expired:
            metrics.SESSIONS_EXPIRED.inc(len(expired))
            log.info("expired %d session(s) older than %g days", len(expired),
                     self.settings.retention_days)
        return expired

    async def _expire_loop(self) -> None:
        """While leading: a retention round every scheduler_check_s."""
        while not self._stopping.is_set():
            if self.leading:
                try:
                    await self.expire_sessions(now_ms())
                    self.expiry_rounds += 1
                except REDIS_DOWN_IN_LOOP as exc:
                    self.outage.failed(exc)
                except Exception:
                    log.exception("scheduler: retention round failed")
            await self._pause(self.settings.scheduler_check_s)


    async def tick(self) -> None:
        """One round of the leader's duties; the slower checks run every check_s."""
        now = now_ms()
        await self.promote_timers(now)
        if time.monotonic() >= self._next_check and self.leading:
            self._next_check = time.monotonic() + self.settings.scheduler_check_s
            await self.check_sessions(now)

    # -- lifecycle -----------------------------------------------------------------------
    async def run(self) -> None:
        """Until `stop()`: lead when we can, act while we lead."""
        await self.store.prepare()
        metrics.register_role("scheduler")
        leader = asyncio.create_task(self._lead(), name="scheduler-lock")
        expiry = asyncio.create_task(self._expire_loop(), name="scheduler-retention")
        deaths = asyncio.create_task(self.deaths.run(self._stopping, lambda: self.leading),
                                     name="scheduler-failover")
        schedules = asyncio.create_task(
            self.schedules.run(self._stopping, lambda: self.leading, self.outage.failed),
            name="scheduler-schedules")
        hooks = asyncio.create_task(
            self.webhooks.run(self._stopping, lambda: self.leading, self.outage.failed),
            name="scheduler-webhooks")
        log.info("scheduler %s started (%d shard(s))", self.name, self.store.keys.shards)
        interval = self.settings.timer_poll_ms / 1000
        try:
            while not self._stopping.is_set():
                if self.leading:
                    try:
                        await self.tick()
                    except REDIS_DOWN_IN_LOOP as exc:
                        self.outage.failed(exc)
                    except Exception:
                        log.exception("scheduler: round failed")
                else:
                    metrics.STUCK.set(0)  # only the leader knows
                await self._pause(interval)
        finally:
            self._stopping.set()
            leader.cancel()
            expiry.cancel()
            deaths.cancel()
            schedules.cancel()
            hooks.cancel()
            await asyncio.gather(leader, expiry, deaths, schedules, hooks,
                                 return_exceptions=True)
            with contextlib.suppress(*REDIS_DOWN_IN_LOOP):
                await self.lock.release()  # a standby takes over without waiting the TTL
            self._lease_until = 0.0
            metrics.SCHEDULER_LEADER.set(0)
            log.info("scheduler %s stopped", self.name)

    def stop(self) -> None:
        self._stopping.set()

    def _announce(self, level: int, message: str) -> None:
        log.log(level, "scheduler %s: %s", self.name, message)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=seconds)


def _last_seen_ms(raw: str | bytes) -> int:
    try:
        return int(json.loads(raw).get("last_seen_ms", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


async def run_scheduler(settings: DurableSettings, metrics_port: int | None = None,
                        webhook_transport: TransportFactory | None = None) -> None:
    """`durable scheduler`: serve metrics, lead or stand by until SIGTERM/SIGINT;
    webhooks go through `webhook_transport` (the network guard the CLI gives)."""
    configure_logging()
    port = settings.metrics_port if metrics_port is None else metrics_port
    store = open_store(settings)
    service = SchedulerService(settings, store, webhook_transport=webhook_transport)
    try:
        server = (metrics.start_fleet_metrics(port, settings.redis_url, store.keys,
                                              settings.heartbeat_s, settings.metrics_host,
                                              settings.redis_timeouts)
                  if port else None)
    except OSError as exc:
        await store.close()
        raise ConfigError(f"metrics port {port} on {settings.metrics_host}: "
                          f"{exc.strerror or exc}; "
                          f"set DURABLE_METRICS_PORT (or --metrics-port) to a free port, or 0, "
                          f"and DURABLE_METRICS_HOST to an address of this host") from None
    if server is not None:
        log.info("metrics on http://%s:%d/metrics", settings.metrics_host, server.port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.stop)
    try:
        await service.run()
    finally:
        if server is not None:
            server.close()
        await store.close()
