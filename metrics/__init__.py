"""Prometheus metrics: what each process measures, and the fleet read from Redis.

Two kinds of metric live here:
- process metrics (`process.py`: counters and histograms in the default registry),
  observed where the work happens: steps and their outcome, step duration, checkpoint
  commit latency and size, reclaims, dead letters, tokens, resume latency, worker and
  scheduler state;
- fleet gauges (`fleet.py`: stream lag and pending, timers due, sessions by status, live
  workers) that no single process owns: they are read from Redis when /metrics is
  scraped, by `FleetCollector` (the scheduler) and `render_api_metrics` (the API).
  Workers do not export them, so they are not repeated once per worker; dashboards take
  `max by (shard)` / `max by (status)` to merge the API's and the scheduler replicas'
  copies. `serving.py` runs the /metrics servers.

`tools.py` counts tool calls and the turns a re-run step replayed from its journal.

Labels are bounded: pattern (seven values), agent (the specs' agent ids, capped), tool
(capped likewise), outcome,
direction, status, shard. Never a session id.
"""

from strands_durable.metrics.capacity import (
    CAPACITY_IN_FLIGHT_LIMIT,
    CAPACITY_RPM,
    CAPACITY_THROTTLED,
    CAPACITY_WAIT_SECONDS,
    CAPACITY_WAITING,
    capacity_in_flight,
    capacity_state,
    capacity_throttled,
    capacity_waited,
    capacity_waiting,
)
from strands_durable.metrics.failover import (
    DECLARED_DEAD,
    FAILOVER_SECONDS,
    FOUND_DEAD,
    declared_dead,
    failover_rerun,
    found_declared_dead,
)
from strands_durable.metrics.fleet import (
    FleetCollector,
    FleetReader,
    FleetSnapshot,
    ShardSnapshot,
    combined_registry,
    fleet_families,
    parse_fleet,
)
from strands_durable.metrics.process import (
    CHECKPOINT_BYTES,
    COMMIT_SECONDS,
    CONTENT_TYPE,
    DEAD_LETTERS,
    DURATION_PAUSES,
    RECLAIMED,
    RESUME_SECONDS,
    SCHEDULER_LEADER,
    SESSIONS_EXPIRED,
    STEP_SECONDS,
    STEPS,
    STUCK,
    STUCK_FLAGGED,
    TIMERS_PROMOTED,
    TOKENS,
    WORKER_HEARTBEAT,
    WORKER_LOOP_BUSY,
    WORKER_RUNNING,
    WORKER_SLOTS,
    WORKER_STEP_SLOTS,
    WORKER_UP,
    agent_label,
    commit_timed,
    dead_lettered,
    heartbeat,
    register_role,
    step_committed,
    step_failed,
    step_lost,
    step_reclaimed,
    timed_resume,
    worker_paced,
)
from strands_durable.metrics.serving import (
    DEFAULT_METRICS_HOST,
    MetricsServer,
    RedisOutageCollector,
    render_api_metrics,
    serve,
    start_fleet_metrics,
    start_worker_metrics,
    stop_worker_metrics,
    watch_redis_outages,
)
from strands_durable.metrics.tools import (
    TOOL_CALLS,
    TOOL_SECONDS,
    TURNS_REPLAYED,
    tool_called,
    turn_replayed,
)

__all__ = [
    "CAPACITY_IN_FLIGHT_LIMIT",
    "CAPACITY_RPM",
    "CAPACITY_THROTTLED",
    "CAPACITY_WAITING",
    "CAPACITY_WAIT_SECONDS",
    "CHECKPOINT_BYTES",
    "COMMIT_SECONDS",
    "CONTENT_TYPE",
    "DEAD_LETTERS",
    "DECLARED_DEAD",
    "DEFAULT_METRICS_HOST",
    "DURATION_PAUSES",
    "FAILOVER_SECONDS",
    "FOUND_DEAD",
    "RECLAIMED",
    "RESUME_SECONDS",
    "SCHEDULER_LEADER",
    "SESSIONS_EXPIRED",
    "STEPS",
    "STEP_SECONDS",
    "STUCK",
    "STUCK_FLAGGED",
    "TIMERS_PROMOTED",
    "TOKENS",
    "TOOL_CALLS",
    "TOOL_SECONDS",
    "TURNS_REPLAYED",
    "WORKER_HEARTBEAT",
    "WORKER_LOOP_BUSY",
    "WORKER_RUNNING",
    "WORKER_SLOTS",
    "WORKER_STEP_SLOTS",
    "WORKER_UP",
    "FleetCollector",
    "FleetReader",
    "FleetSnapshot",
    "MetricsServer",
    "RedisOutageCollector",
    "ShardSnapshot",
    "agent_label",
    "capacity_in_flight",
    "capacity_state",
    "capacity_throttled",
    "capacity_waited",
    "capacity_waiting",
    "combined_registry",
    "commit_timed",
    "dead_lettered",
    "declared_dead",
    "failover_rerun",
    "fleet_families",
    "found_declared_dead",
    "heartbeat",
    "parse_fleet",
    "register_role",
    "render_api_metrics",
    "serve",
    "start_fleet_metrics",
    "start_worker_metrics",
    "step_committed",
    "step_failed",
    "step_lost",
    "step_reclaimed",
    "stop_worker_metrics",
    "timed_resume",
    "tool_called",
    "turn_replayed",
    "watch_redis_outages",
    "worker_paced",
]
