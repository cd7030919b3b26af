"""Recovery drills of `durable run` on the local store (no DURABLE_REDIS_URL): the run is
killed (exit 137, no cleanup: DURABLE_CRASH_AT, or a real SIGKILL while a step waits at
a breakpoint) at every step boundary and in the middle of every step of a 5-step chain
and of a graph loop; `durable run --resume ID` continues it. The resumed session must
end as an uninterrupted run does (results, tokens, artifacts, conversation, what the
run prints), no step committed before the crash runs again, each step commits once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, StepBreakpoints, status_doc
from local_store import LocalHome, private_home

from strands_durable.worker.faults import CRASH_EXIT_CODE, breakpoint_name

pytestmark = pytest.mark.chaos

CHAIN5 = """
version: 0
name: chain-five
runtime:
  provider: scripted
  script:
    rules:
      - {agent: drafter, contains: "Revise", reply: "Draft two: tides are predictable."}
      - {agent: drafter, contains: "Finalise", reply: "Final: tides are predictable power."}
      - {agent: drafter, reply: "Draft one: tides."}
      - {agent: critic, contains: "Draft one", reply: "Say why tides matter."}
      - {agent: critic, reply: "Good; tighten it."}
agents:
  drafter: {prompt: "You draft short texts about {{ topic }}."}
  critic: {prompt: "You criticise drafts."}
pattern:
  type: chain
  config:
    steps:
      - {agent: drafter, input: "Draft a line on {{ topic }}."}
      - {agent: critic, input: "Criticise: {{ steps[0].response }}"}
      - {agent: drafter, input: "Revise with: {{ steps[1].response }}"}
      - {agent: critic, input: "Criticise: {{ steps[2].response }}"}
      - {agent: drafter, input: "Finalise with: {{ steps[3].response }}"}
inputs:
  values: {topic: tidal power}
outputs:
  artifacts:
    - path: chain-five.md
      from: "{% for s in steps %}{{ s.response }}\\n{% endfor %}"
"""

GRAPH = EXAMPLES / "graph-code-review-loop.yaml"
CHAIN_STEPS, GRAPH_STEPS = 5, 7


@dataclass(frozen=True)
class Case:
    name: str
    steps: int

    def spec(self, tmp: Path) -> Path:
        if self.name == "graph":
            return GRAPH
        path = tmp / "chain-five.yaml"
        path.write_text(CHAIN5)
        return path


CASES = {"chain": Case("chain", CHAIN_STEPS), "graph": Case("graph", GRAPH_STEPS)}
# Boundaries: right after commit n (n = the last one too). Mid-step: the agent call of
# step n returned, its commit not made; and step n claimed, its agent call not made.
DRILLS = [(case, f"{point}:{n}") for case, c in CASES.items()
          for point in ("after_commit", "before_commit") for n in range(1, c.steps + 1)]
DRILLS += [("chain", "after_gate:1"), ("chain", "after_gate:3"), ("graph", "after_gate:4")]


def final_lines(stdout: str) -> list[str]:
    """What a run prints at its end, its elapsed time left out."""
    tail = stdout[stdout.index("completed in"):]
    return [re.sub(r"completed in [0-9.]+s", "completed", tail, count=1)]


async def snapshot(home: LocalHome, sid: str) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """How the session ended (what must not differ from an uninterrupted run), and its
    events."""
    store = home.store()
    try:
        doc = await status_doc(store, sid)
        redis: Any = store.redis  # redis-py's stubs type replies as sync-or-async
        lanes = sorted(await redis.smembers(store.keys.conversations(sid)))
        conversation = {lane: [json.loads(m) for m in await redis.lrange(
            store.keys.conversation(sid, lane), 0, -1)] for lane in lanes}
        results = [(r.key, r.agent, r.response, r.input_tokens, r.output_tokens)
                   for r in await store.results(sid)]
        ended = {"status": doc["status"], "tokens": doc["token_usage"],
                 "steps": doc["steps_committed"], "state": doc["pattern_state"],
                 "results": results, "artifacts": await store.artifacts(sid),
                 "conversation": conversation}
        return ended, [f for _, f in await store.events(sid)]
    finally:
        await store.close()


@pytest.fixture
def local_home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Each case run once, uninterrupted, in a home of its own."""
    home = LocalHome(tmp_path_factory.mktemp("reference") / "home")
    try:
        refs: dict[str, Any] = {}
        for name, case in CASES.items():
            run = home.durable("run", case.spec(home.home.parent), check_rc=0)
            (sid,) = [s["session_id"] for s in home.sessions()
                      if s["workflow_name"] != "chain-five" or name == "chain"
                      if s["session_id"] not in {r["sid"] for r in refs.values()}]
            refs[name] = {"sid": sid, "stdout": run.stdout,
                          "ended": asyncio.run(snapshot(home, sid))[0]}
        yield refs
    finally:
        home.stop()


def check_resumed(home: LocalHome, case: Case, reference: dict[str, Any], sid: str,
                  committed_before: int, resumed_stdout: str) -> list[dict[str, str]]:
    ended, events = asyncio.run(snapshot(home, sid))
    assert ended == reference["ended"]
    assert final_lines(resumed_stdout) == final_lines(reference["stdout"])
    assert resumed_stdout.count("(committed before)") == committed_before
    completed = Counter(e["step"] for e in events if e["type"] == "step_completed")
    assert set(completed.values()) == {1} and len(completed) == case.steps
    return events


@pytest.mark.parametrize(("case_name", "crash_at"), DRILLS,
                         ids=[f"{c}-{p}" for c, p in DRILLS])
def test_killed_run_resumes_as_if_never_interrupted(
        local_home: LocalHome, reference: dict[str, Any], case_name: str,
        crash_at: str) -> None:
    case = CASES[case_name]
    crashed = local_home.durable("run", case.spec(local_home.home.parent),
                                 DURABLE_CRASH_AT=crash_at)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    (session,) = local_home.sessions()
    sid, before = session["session_id"], session["steps_committed"]
    point, n = crash_at.split(":")
    assert before == (int(n) if point == "after_commit" else int(n) - 1)
    assert session["status"] == ("completed" if before == case.steps else "running")

    resumed = local_home.durable("run", "--resume", sid, check_rc=0)
    assert f"resuming session {sid}" in resumed.stdout
    events = check_resumed(local_home, case, reference[case_name], sid, before,
                           resumed.stdout)
    # A step committed before the crash never started again.
    started = Counter(e["step"] for e in events if e["type"] in ("step_started",
                                                                 "step_reclaimed"))
    keys = [r[0] for r in reference[case_name]["ended"]["results"]]
    assert all(started[k] == 1 for k in keys[:before])


@pytest.mark.parametrize(("case_name", "step"), [("chain", "step:2"),
                                                 ("graph", "node:review:2")])
def test_sigkill_mid_step_then_resume(local_home: LocalHome, reference: dict[str, Any],
                                      tmp_path: Path, case_name: str, step: str) -> None:
    """A real kill -9 while the step is in flight (held at a breakpoint)."""
    case = CASES[case_name]
    workflow = "chain-five" if case_name == "chain" else "graph-code-review-loop"
    points = StepBreakpoints(tmp_path / "bp")
    points.set(workflow, step)
    proc = local_home.start("run", case.spec(tmp_path),
                            DURABLE_BREAKPOINT_DIR=str(points.directory))
    try:
        (hit,) = points.wait_sync(workflow, step)
        assert hit.pid == proc.pid
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    points.clear(workflow, step)
    keys = [r[0] for r in reference[case_name]["ended"]["results"]]
    before = keys.index(step)

    resumed = local_home.durable("run", "--resume", hit.session, check_rc=0)
    events = check_resumed(local_home, case, reference[case_name], hit.session, before,
                           resumed.stdout)
    assert [e["type"] for e in events if e["step"] == step].count("step_reclaimed") == 1
    assert (points.directory / (breakpoint_name(workflow, step) + ".hits")).exists()


TOOLS = EXAMPLES / "chain-calculator-tools.yaml"


@pytest.mark.parametrize("crash_at", ["after_tool:1", "after_tool:2"])
def test_killed_between_tool_calls_resumes_without_calling_a_tool_twice(
        local_home: LocalHome, crash_at: str) -> None:
    """Killed after a tool call's result was journaled, before the model saw it: the
    resumed step replays the journal, so each tool runs once. (Its `current_time`
    answer differs from any other run's, so the reference here is the reply text.)"""
    crashed = local_home.durable("run", TOOLS, DURABLE_CRASH_AT=crash_at)
    assert crashed.returncode == CRASH_EXIT_CODE, crashed.stderr
    (session,) = local_home.sessions()
    sid = session["session_id"]
    resumed = local_home.durable("run", "--resume", sid, check_rc=0)
    assert "the team plan, billed yearly, is 499.80" in resumed.stdout
    _, events = asyncio.run(snapshot(local_home, sid))
    calls = Counter((e["step"], e["tool"]) for e in events if e["type"] == "tool_call_started")
    assert calls == {("step:0", "calculator"): 1, ("step:0", "current_time"): 1}
    completed = Counter(e["step"] for e in events if e["type"] == "step_completed")
    assert completed == {"step:0": 1, "step:1": 1, "step:2": 1}
