"""Tool-call metrics: calls by tool and outcome, their duration, and the turns a re-run
step replayed from its journal instead of calling the provider or the tool again."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from strands_durable.metrics.process import CappedLabels

MAX_TOOL_LABELS = 200  # distinct tool names per process before the rest become "other"
TOOL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

TOOL_CALLS = Counter("durable_tool_calls", "Tool calls run by this worker (replays not "
                     "counted), by tool and outcome: ok, error (the tool failed or "
                     "refused), timeout", ["tool", "outcome"])
TOOL_SECONDS = Histogram("durable_tool_duration_seconds", "Time of a tool call", ["tool"],
                         buckets=TOOL_BUCKETS)
TURNS_REPLAYED = Counter("durable_turns_replayed", "Journaled turns a re-run step replayed "
                         "instead of running them again: model (a provider call saved) "
                         "or tool (a tool call saved)", ["kind"])

# Both series exist from the start (at 0): a dashboard shows "none replayed", not "no data".
for _kind in ("model", "tool"):
    TURNS_REPLAYED.labels(_kind)

# Tool names come from specs and MCP servers: capped, like agent ids.
tool_label = CappedLabels(MAX_TOOL_LABELS)


def tool_called(tool: str, outcome: str, seconds: float) -> None:
    label = tool_label(tool)
    TOOL_CALLS.labels(label, outcome).inc()
    TOOL_SECONDS.labels(label).observe(seconds)


def turn_replayed(kind: str) -> None:
    TURNS_REPLAYED.labels(kind).inc()
