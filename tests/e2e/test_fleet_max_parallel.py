"""runtime.max_parallel holds across the fleet: two real `arq worker` processes, each
able to run eight steps at once, never run more than max_parallel steps of one session
at the same time. Counted from the session's own event stream, whose order is the order
Redis recorded them in: +1 at step_started, -1 at step_completed."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fleet import Fleet

pytestmark = pytest.mark.e2e

SPEC = """
version: 0
name: wide-{pattern}
runtime:
  provider: scripted
  max_parallel: 2
  script: {{delay_s: 0.2}}
agents:
  a: {{prompt: "You answer briefly."}}
pattern:
  type: {pattern}
  config:
{config}
"""

PARALLEL = "\n".join(["    branches:"] + [
    f"      - id: b{i}\n        steps:\n          - agent: a\n            input: \"branch {i}\""
    for i in range(6)] + ["    reduce:\n      agent: a\n      input: \"merge\""])
WORKFLOW = "\n".join(["    tasks:"] + [
    f"      - id: t{i}\n        agent: a\n        input: \"task {i}\"" for i in range(6)])


def most_steps_at_once(history: list[dict[str, object]]) -> int:
    running: set[object] = set()
    most = 0
    for event in history:
        if event["type"] == "step_started":
            running.add(event["step"])
        elif event["type"] in ("step_completed", "step_failed"):
            running.discard(event["step"])
        most = max(most, len(running))
    return most


@pytest.mark.parametrize(("pattern", "config"), [("parallel", PARALLEL),
                                                  ("workflow", WORKFLOW)])
def test_max_parallel_bounds_one_session_across_two_workers(
        fleet_factory, tmp_path: Path, pattern: str, config: str) -> None:
    fleet: Fleet = fleet_factory(worker_concurrency=8)
    fleet.start_worker()
    fleet.start_worker()
    spec = tmp_path / f"{pattern}.yaml"
    spec.write_text(SPEC.format(pattern=pattern, config=config))
    sid = fleet.cli("submit", str(spec)).stdout.strip()
    assert fleet.cli("wait", sid, "--timeout", "120").returncode == 0
    history = fleet.cli_json("history", sid)
    started = [e["step"] for e in history if e["type"] == "step_started"]
    assert len(set(started)) == (7 if pattern == "parallel" else 6)
    # Without the bound all six would start at once (each worker takes eight).
    assert most_steps_at_once(history) <= 2
