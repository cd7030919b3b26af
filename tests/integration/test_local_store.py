"""The local store (no DURABLE_REDIS_URL): a private redis-server in DURABLE_HOME, started
on demand by real `durable` commands, shared, durable across its own death, stopped
when idle; resume, the runner lock, Ctrl-C, --auto-resume and retention on it."""

from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, StepBreakpoints, free_port, wait_for_sync
from local_store import LocalHome, private_home, zombie

from strands_durable.models import SessionStatus, now_ms
from strands_durable.store.local_server import local_processes, pid_alive, socket_path
from strands_durable.worker.faults import CRASH_EXIT_CODE

CHAIN = EXAMPLES / "chain-research.yaml"
WORKFLOW = "chain-research"
EXIT_INTERRUPTED = 130
DAY_MS = 86_400_000


@pytest.fixture
def local_home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


def session(home: LocalHome, sid: str) -> dict[str, Any]:
    return dict(json.loads(home.durable("status", sid, "--json", check_rc=0).stdout))


def record_status(home: LocalHome, sid: str) -> str:
    async def read() -> str:
        store = home.store()
        try:
            return (await store.get_session(sid)).status.value
        finally:
            await store.close()

    return asyncio.run(read())


def events(home: LocalHome, sid: str) -> list[dict[str, Any]]:
    return list(json.loads(home.durable("history", sid, "--json", check_rc=0).stdout))


def redis_servers(home: LocalHome) -> list[int]:
    """Live redis-server processes serving this home's socket."""
    sock = str(socket_path(home.home))
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if proc.name.isdigit() and "redis-server" in cmdline and sock in cmdline:
            pids.append(int(proc.name))
    return pids


def wait_paused(home: LocalHome, sid: str, proc: subprocess.Popen[str]) -> None:
    """Wait until the session is paused; if it never is, fail with the run's output."""
    try:
        wait_for_sync(lambda: record_status(home, sid) == "paused", timeout_s=60,
                      what="the session to pause")
    except AssertionError as exc:
        proc.kill()
        out, err = proc.communicate(timeout=30)
        raise AssertionError(f"{exc}\nstdout:\n{out}\nstderr:\n{err}") from None


def read_stderr_until(proc: subprocess.Popen[str], text: str, timeout_s: float = 60) -> str:
    """What the process wrote to stderr up to and including `text` (a condition: fail
    after `timeout_s` if it never comes)."""
    assert proc.stderr is not None
    fd, got = proc.stderr.fileno(), b""
    deadline = time.monotonic() + timeout_s
    while text.encode() not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"no {text!r} on stderr within {timeout_s}s: {got!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 4096)
            assert chunk, f"stderr closed before {text!r}: {got!r}"
            got += chunk
    return got.decode()


def held_run(home: LocalHome, points: StepBreakpoints, step: str,
             *args: str) -> tuple[subprocess.Popen[str], str]:
    """`durable run CHAIN` stopped with `step` in flight; the process and the session."""
    points.set(WORKFLOW, step)
    proc = home.start("run", CHAIN, *args, DURABLE_BREAKPOINT_DIR=str(points.directory))
    (hit,) = points.wait_sync(WORKFLOW, step)
    assert hit.pid == proc.pid
    return proc, hit.session


# -- the server -------------------------------------------------------------------------
def test_commands_started_together_share_one_private_server(local_home: LocalHome) -> None:
    procs = [local_home.start("sessions", "list", "--json") for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out) == []
    assert redis_servers(local_home) == [local_home.server_pid()]
    home_mode = stat.S_IMODE(local_home.home.stat().st_mode)
    sock_mode = stat.S_IMODE(socket_path(local_home.home).stat().st_mode)
    assert home_mode == 0o700 and sock_mode & 0o077 == 0

    async def config() -> dict[str, str]:
        store = local_home.store()
        try:
            got: dict[str, str] = {}
            for name in ("appendonly", "appendfsync", "port"):
                got.update(await store.redis.config_get(name))
            return got
        finally:
            await store.close()

    assert asyncio.run(config()) == {"appendonly": "yes", "appendfsync": "always", "port": "0"}


def test_sessions_outlive_the_server_itself(local_home: LocalHome) -> None:
    """kill -9 of the redis-server loses no committed step: the AOF is fsynced per write,
    and the next command starts the server again on it."""
    local_home.durable("run", CHAIN, check_rc=0)
    ((sid, before),) = [(s["session_id"], s) for s in local_home.sessions()]
    old = local_home.server_pid()
    local_home.stop()
    after = session(local_home, sid)
    assert local_home.server_pid() != old
    assert after["status"] == "completed" and after["steps_committed"] == 3
    assert after["token_usage"] == before["token_usage"]


def test_idle_server_is_stopped_and_started_again(local_home: LocalHome) -> None:
    # Watched while the command runs: with a 1 s idle limit, the server may already have
    # stopped by the time a loaded machine lets the test look after the command.
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(local_processes(local_home.home))
            done.wait(0.01)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        local_home.durable("sessions", "list", check_rc=0, DURABLE_LOCAL_IDLE_S="1")
        wait_for_sync(lambda: len(seen) >= 2, timeout_s=10,  # the server and its reaper
                      what="the server and its reaper to be seen")
    finally:
        done.set()
        watcher.join()
    wait_for_sync(lambda: not local_processes(local_home.home) and not redis_servers(
        local_home), timeout_s=60, what="the idle server and its reaper to stop")
    local_home.durable("run", CHAIN, check_rc=0)
    assert len(local_home.sessions()) == 1


def test_a_deleted_home_leaves_no_server_behind(local_home: LocalHome) -> None:
    local_home.durable("sessions", "list", check_rc=0)
    pids = local_processes(local_home.home)
    assert len(pids) == 2
    try:
        shutil.rmtree(local_home.home)
        wait_for_sync(lambda: not any(pid_alive(p) and not zombie(p) for p in pids),
                      timeout_s=60, what="the reaper to stop the orphaned server")
    finally:
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_missing_redis_server_is_one_clear_line(local_home: LocalHome) -> None:
    result = local_home.durable("sessions", "list", PATH="/nonexistent")
    assert result.returncode == 1
    assert "needs redis-server" in result.stderr and "apt-get install redis-server" in \
        result.stderr and "--ephemeral" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 3


def test_ephemeral_run_starts_no_server(local_home: LocalHome) -> None:
    result = local_home.durable("run", CHAIN, "--ephemeral", check_rc=0)
    assert "completed in" in result.stdout
    assert not (local_home.home / "redis.pid").exists()
    # --ephemeral wins over DURABLE_REDIS_URL too: nothing is reached (nothing listens).
    closed = local_home.durable("run", CHAIN, "--ephemeral", check_rc=0,
                                DURABLE_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0")
    assert "completed in" in closed.stdout


# -- resume, the runner lock, operator commands ----------------------------------------
def test_session_commands_work_on_the_local_store(local_home: LocalHome) -> None:
    crashed = local_home.durable("run", CHAIN, DURABLE_CRASH_AT="after_commit:1")
    assert crashed.returncode == CRASH_EXIT_CODE
    ((sid, status),) = [(s["session_id"], s["status"]) for s in local_home.sessions()]
    assert status == "running"
    assert local_home.durable("pause", sid, check_rc=0).stdout.split() == [sid, "paused"]
    checkpoints = json.loads(local_home.durable("checkpoints", sid, "--json",
                                                check_rc=0).stdout)
    assert len(checkpoints) == 1
    resumed = local_home.durable("resume", sid, check_rc=0)  # no fleet: runs it here
    assert f"resuming session {sid}" in resumed.stdout and "completed in" in resumed.stdout
    assert resumed.stdout.count("(committed before)") == 1
    types = Counter(e["type"] for e in events(local_home, sid))
    assert types["step_completed"] == 3 and types["session_completed"] == 1
    local_home.durable("watch", sid, "--timeout", "10", check_rc=0)
    cancel = local_home.durable("cancel", sid)
    assert cancel.returncode == 1 and "completed" in cancel.stderr
    local_home.durable("sessions", "delete", sid, "--yes", check_rc=0)
    assert local_home.sessions() == []


def test_resume_of_no_such_session_is_a_clear_refusal(local_home: LocalHome) -> None:
    unknown = "0b159fac-0487-470b-baf4-40d28dd52a70"
    missing = local_home.durable("run", "--resume", unknown)
    assert missing.returncode == 1 and f"session '{unknown}' not found" in missing.stderr

    async def keys() -> list[str]:
        store = local_home.store()
        try:
            return [k for k in await store.redis.keys("*") if unknown in k]
        finally:
            await store.close()

    assert asyncio.run(keys()) == []  # not even a lock's counter
    bad = local_home.durable("run", "--resume", "x:results")
    assert bad.returncode == 2 and "x:results" in bad.stderr and "Traceback" not in bad.stderr
    both = local_home.durable("run", CHAIN, "--resume", unknown)
    assert both.returncode == 2 and "takes no SPEC" in both.stderr
    neither = local_home.durable("run")
    assert neither.returncode == 2 and "--resume ID" in neither.stderr


def test_a_second_runner_is_refused_naming_the_first(local_home: LocalHome,
                                                     tmp_path: Path) -> None:
    points = StepBreakpoints(tmp_path / "bp")
    proc, sid = held_run(local_home, points, "step:1")
    try:
        for command in (("run", "--resume", sid), ("resume", sid)):
            second = local_home.durable(*command)
            assert second.returncode == 1, second.stderr
            assert (f"session {sid} is already being run by pid {proc.pid} on "
                    f"{socket.gethostname()}") in second.stderr
    finally:
        points.clear(WORKFLOW, "step:1")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.count("✓ step:") == 3  # the first runner was not disturbed


def test_auto_resume_takes_over_a_dead_runners_session(local_home: LocalHome) -> None:
    crashed = local_home.durable("run", CHAIN, DURABLE_CRASH_AT="before_commit:2")
    assert crashed.returncode == CRASH_EXIT_CODE
    ((sid, status),) = [(s["session_id"], s["status"]) for s in local_home.sessions()]
    assert status == "running"  # its runner is dead: not failed, not paused
    again = local_home.durable("run", CHAIN, "--auto-resume", check_rc=0)
    assert f"resuming session {sid}" in again.stdout
    assert again.stdout.count("(committed before)") == 1
    assert [s["status"] for s in local_home.sessions()] == ["completed"]  # no second one
    fresh = local_home.durable("run", CHAIN, "--auto-resume", check_rc=0)
    assert "no failed or paused session of this spec" in fresh.stderr
    assert len(local_home.sessions()) == 2


def test_auto_resume_never_starts_a_second_session_beside_a_live_runner(
        local_home: LocalHome, tmp_path: Path) -> None:
    points = StepBreakpoints(tmp_path / "bp")
    proc, sid = held_run(local_home, points, "step:1")
    try:
        beside = local_home.durable("run", CHAIN, "--auto-resume")
        assert beside.returncode == 1, beside.stderr
        assert f"session {sid} is already being run by pid {proc.pid}" in beside.stderr
        assert len(local_home.sessions()) == 1
    finally:
        points.clear(WORKFLOW, "step:1")
        proc.communicate(timeout=60)
    assert proc.returncode == 0


# -- Ctrl-C ------------------------------------------------------------------------------
def test_ctrl_c_stops_at_the_next_step_boundary(local_home: LocalHome,
                                                tmp_path: Path) -> None:
    points = StepBreakpoints(tmp_path / "bp")
    proc, sid = held_run(local_home, points, "step:1")
    try:
        proc.send_signal(signal.SIGINT)
        wait_paused(local_home, sid, proc)
    finally:
        points.clear(WORKFLOW, "step:1")  # the running step goes on and commits
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "stopping at the next step boundary" in err
    assert f"continue it: durable run --resume {sid}" in err
    assert "✓ step:1" in out and "step:2" not in out
    doc = session(local_home, sid)
    assert (doc["status"], doc["steps_committed"]) == ("paused", 2)
    assert doc["paused_reason"] == "interrupted (Ctrl-C)"

    resumed = local_home.durable("run", "--resume", sid, check_rc=0)
    assert resumed.stdout.count("(committed before)") == 2 and "✓ step:2" in resumed.stdout
    started = Counter(e["step"] for e in events(local_home, sid)
                      if e["type"] in ("step_started", "step_reclaimed"))
    assert started == {"step:0": 1, "step:1": 1, "step:2": 1}


def test_second_ctrl_c_stops_at_once(local_home: LocalHome, tmp_path: Path) -> None:
    points = StepBreakpoints(tmp_path / "bp")
    proc, sid = held_run(local_home, points, "step:1")
    try:
        proc.send_signal(signal.SIGINT)
        wait_paused(local_home, sid, proc)
        proc.send_signal(signal.SIGINT)  # the step is still held at its breakpoint
        out, err = proc.communicate(timeout=60)
    finally:
        points.clear(WORKFLOW, "step:1")
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert f"runs again on resume: durable run --resume {sid}" in err
    assert "✓ step:1" not in out
    assert session(local_home, sid)["steps_committed"] == 1

    resumed = local_home.durable("run", "--resume", sid, check_rc=0)
    assert resumed.stdout.count("(committed before)") == 1 and "completed in" in resumed.stdout
    history = events(local_home, sid)
    assert Counter(e["step"] for e in history if e["type"] == "step_completed") == {
        "step:0": 1, "step:1": 1, "step:2": 1}
    assert [e["type"] for e in history if e["step"] == "step:1"].count("step_reclaimed") == 1


def test_ctrl_c_twice_at_once_still_stops_and_resumes(local_home: LocalHome,
                                                     tmp_path: Path) -> None:
    """A double tap: the second Ctrl-C lands as soon as the first is seen, while the
    first is still pausing. (Not both at once: the kernel merges two SIGINTs that
    arrive before the first is delivered, as no two key presses are.)"""
    points = StepBreakpoints(tmp_path / "bp")
    proc, sid = held_run(local_home, points, "step:1")
    try:
        proc.send_signal(signal.SIGINT)
        seen = read_stderr_until(proc, "stopping at the next step boundary")
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
        err = seen + rest
    finally:
        points.clear(WORKFLOW, "step:1")
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert f"durable run --resume {sid}" in err and "Traceback" not in err
    resumed = local_home.durable("run", "--resume", sid, check_rc=0)
    assert resumed.stdout.count("(committed before)") == 1 and "completed in" in resumed.stdout


# -- retention ---------------------------------------------------------------------------
def age(home: LocalHome, sid: str, days: float) -> None:
    """Make a completed session look last updated `days` ago (its status index score,
    which cleanup reads)."""
    async def shift() -> None:
        store = home.store()
        try:
            key = store.keys.index_status(store.keys.shard(sid), SessionStatus.COMPLETED)
            await store.redis.zadd(key, {sid: now_ms() - int(days * DAY_MS)})
        finally:
            await store.close()

    asyncio.run(shift())


def test_old_completed_local_sessions_are_removed_by_the_next_run(
        local_home: LocalHome) -> None:
    local_home.durable("run", CHAIN, check_rc=0)
    ((old, _),) = [(s["session_id"], s) for s in local_home.sessions()]
    age(local_home, old, 8)  # past the local default of 7 days
    local_home.durable("run", CHAIN, "--keep-completed", check_rc=0)
    assert old in {s["session_id"] for s in local_home.sessions()}
    local_home.durable("run", CHAIN, check_rc=0, DURABLE_RETENTION_DAYS="10")
    assert old in {s["session_id"] for s in local_home.sessions()}
    local_home.durable("run", CHAIN, check_rc=0)
    ids = {s["session_id"] for s in local_home.sessions()}
    assert old not in ids and len(ids) == 3
    dry = local_home.durable("sessions", "cleanup", "--max-age-days", "0", "--dry-run",
                             "--json", check_rc=0)
    assert set(json.loads(dry.stdout)["would_delete"]) == ids
    assert os.environ.get("DURABLE_EPHEMERAL") == "1"  # this test's own env dropped it


def test_a_stale_pid_file_is_not_taken_for_the_new_server_dying(local_home: LocalHome,
                                                                tmp_path: Path) -> None:
    """A server killed -9 leaves its pid file; the next start must not read that dead pid
    as the new server's while the new one (slow to start on a loaded machine) has not
    written its own yet. A wrapper holds redis-server back 2 s to make that window sure."""
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs
    (local_home.home).mkdir(parents=True, exist_ok=True)
    (local_home.home / "redis.pid").write_text(f"{gone.pid}\n")
    slow = tmp_path / "slow-redis-server"
    slow.write_text(f"#!/bin/sh\nsleep 2\nexec {shutil.which('redis-server')} \"$@\"\n")
    slow.chmod(0o755)
    listed = local_home.durable("sessions", "list", "--json", check_rc=0,
                                DURABLE_REDIS_SERVER=str(slow))
    assert json.loads(listed.stdout) == []
    assert local_home.server_pid() != gone.pid and pid_alive(local_home.server_pid())
