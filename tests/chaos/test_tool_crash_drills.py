"""Crash drills inside an agent loop: a real `arq worker` process dies right after the
k-th tool result of a step is journaled (DURABLE_CRASH_AT=after_tool:k, exit 137, no
cleanup), for every k; a fresh worker finishes the step. The re-run makes no provider
call and no tool call for the journaled part: the fake provider counts requests and
the tool writes a line per real execution. Tokens and the final result equal an
uninterrupted run's. A zombie that lost its lease journals nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import RedisServer, poll_until, random_prefix
from helpers.fleet import Fleet
from recovery import FAST, ended, settings_for
from tool_llm import COMPLETION_TOKENS, PROMPT_TOKENS, ToolLLM, serve, stop

from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.connect import open_store
from strands_durable.worker.faults import CRASH_EXIT_CODE

pytestmark = pytest.mark.chaos

CALLS = 3  # tool calls the model asks for, one per turn: CALLS + 1 model turns
TOOL = "tests.tool_fixtures.counting_tools.bump"


def spec(llm: ToolLLM) -> dict[str, Any]:
    return {
        "version": 0, "name": "tool-drill",
        "runtime": {"provider": "openai", "model_id": "gpt-4o", "host": llm.url("/v1"),
                    "failure_policy": {"retries": 0}},
        "tools": {"python": [TOOL]},
        "agents": {"clerk": {"prompt": "Count with the tool.", "tools": [TOOL]}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": "clerk", "input": "Bump three times."}]}},
    }


@pytest.fixture
def llm(allow_provider_host: Callable[[str, str], None]) -> Iterator[ToolLLM]:
    state = ToolLLM(calls=CALLS)
    server, thread = serve(state)
    allow_provider_host("openai", state.url("/v1"))  # before any worker starts
    yield state
    stop(server, thread, state)


def tool_calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def run(server: RedisServer, llm: ToolLLM, logdir: Path, crash_at: str = "",
              tool_log: Path | None = None) -> tuple[dict[str, Any], int]:
    """The step on one worker that crashes at `crash_at` (if set), then a healthy one."""
    prefix = random_prefix()
    store = open_store(settings_for(server, prefix))
    await store.prepare()
    logdir.mkdir(parents=True, exist_ok=True)
    fleet = Fleet.create(server.url, prefix, logdir, **FAST)
    crashes = 0
    try:
        sid, _ = await start_session(store, load_spec_data(spec(llm)))
        if crash_at:
            fleet.env["DURABLE_CRASH_AT"] = crash_at
            crashing = fleet.start_worker()
            assert await poll_until(lambda: _gone(crashing), timeout_s=60), fleet.logs()
            assert crashing.returncode == CRASH_EXIT_CODE, fleet.logs()
            crashes += 1
            k = int(crash_at.split(":")[1])
            # It died right after journaling tool result k: k model calls, k tool calls.
            assert len(llm.requests) == k, fleet.logs()
            assert tool_log is not None and len(tool_calls(tool_log)) == k
            del fleet.env["DURABLE_CRASH_AT"]
        fleet.start_worker()
        assert await poll_until(lambda: ended(store, sid), timeout_s=90), fleet.logs()
        detail = await store.get_session(sid)
        results = await store.results(sid, 0)
        journals = await store.redis.smembers(store.keys.journals(sid))
        usage = detail.token_usage
        return {"status": detail.status.value,
                "tokens": (usage.total_input_tokens, usage.total_output_tokens),
                "response": results[0].response, "journals": journals}, crashes
    finally:
        fleet.stop_all()
        await store.redis.aclose()


async def _gone(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is not None


@pytest.fixture
async def server(redis_server: RedisServer) -> AsyncIterator[RedisServer]:
    yield redis_server


async def test_an_uninterrupted_run_is_the_reference(server: RedisServer, llm: ToolLLM,
                                                     tool_log: Path, tmp_path: Path) -> None:
    outcome, _ = await run(server, llm, tmp_path / "ref")
    assert outcome["status"] == "completed" and outcome["response"] == "bumped 3 times"
    turns = CALLS + 1
    assert outcome["tokens"] == (turns * PROMPT_TOKENS, turns * COMPLETION_TOKENS)
    assert len(llm.requests) == turns
    calls = tool_calls(tool_log)
    assert [c["n"] for c in calls] == [1, 2, 3]
    assert len({c["key"] for c in calls}) == CALLS  # a distinct idempotency key per call
    assert outcome["journals"] == set()  # the journal went with the commit


@pytest.mark.parametrize("k", range(1, CALLS + 1))
async def test_a_crash_after_tool_call_k_repeats_no_journaled_call(
        k: int, server: RedisServer, llm: ToolLLM, tool_log: Path, tmp_path: Path) -> None:
    outcome, crashes = await run(server, llm, tmp_path / f"k{k}", crash_at=f"after_tool:{k}",
                                 tool_log=tool_log)
    assert crashes == 1
    turns = CALLS + 1
    assert outcome["status"] == "completed" and outcome["response"] == "bumped 3 times"
    # Tokens count each model turn once, replayed or not.
    assert outcome["tokens"] == (turns * PROMPT_TOKENS, turns * COMPLETION_TOKENS)
    # Provider: k turns before the crash, the rest after; none again.
    assert len(llm.requests) == turns, [len(r["messages"]) for r in llm.requests]
    calls = tool_calls(tool_log)
    assert [c["n"] for c in calls] == [1, 2, 3], calls  # no tool call ran twice
    assert len({c["key"] for c in calls}) == CALLS
    assert outcome["journals"] == set()


async def test_a_zombie_that_lost_its_lease_journals_and_calls_nothing(
        server: RedisServer, llm: ToolLLM, tool_log: Path, tmp_path: Path) -> None:
    """Worker A runs tool call 1, then freezes (SIGSTOP) inside model turn 2; worker B
    takes the step over, replays turn 1 and tool call 1, and finishes it. A wakes up
    (SIGCONT) with its turn-2 answer: its journal write is refused, so it calls no tool
    and commits nothing."""
    llm.hold = 2  # A's second model call waits at the fake provider
    prefix = random_prefix()
    store = open_store(settings_for(server, prefix))
    await store.prepare()
    fleet = Fleet.create(server.url, prefix, tmp_path, **FAST)
    try:
        sid, _ = await start_session(store, load_spec_data(spec(llm)))
        zombie = fleet.start_worker()
        assert await asyncio.to_thread(llm.held.wait, 60), fleet.logs()
        os.kill(zombie.pid, signal.SIGSTOP)
        fleet.start_worker()
        assert await poll_until(lambda: ended(store, sid), timeout_s=90), fleet.logs()
        assert [c["n"] for c in tool_calls(tool_log)] == [1, 2, 3]

        llm.release.set()  # the zombie's held answer arrives...
        os.kill(zombie.pid, signal.SIGCONT)  # ...as it wakes up
        log = tmp_path / "worker-1.log"
        assert await poll_until(lambda: _says(log, "lease lost"), timeout_s=60), fleet.logs()
        record = await store.get_session(sid)
        assert record.status.value == "completed" and record.steps_committed == 1
        assert [c["n"] for c in tool_calls(tool_log)] == [1, 2, 3]  # none by the zombie
        events = [f for _, f in await store.events(sid)]
        assert sum(f["type"] == "step_completed" for f in events) == 1
        assert sum(f["type"] == "tool_call_completed" for f in events) == CALLS
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(zombie.pid, signal.SIGCONT)
        fleet.stop_all()
        await store.redis.aclose()


async def _says(log: Path, text: str) -> bool:
    return text in log.read_text()
