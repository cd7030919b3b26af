"""The suite's zygote (tests/helpers/zygote.py) answers as a new interpreter would: the
same exit status, standard output and error, program name, standard input, environment
and working directory; its commands are the caller's children (wait, signals, kill -9,
a timeout); calls it does not model run as they always did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, wait_for
from helpers.fleet import durable_bin
from helpers.zygote import _POPEN, ZYGOTE

pytestmark = pytest.mark.integration


def both(args: list[str], **kwargs: object) -> tuple[subprocess.CompletedProcess[str],
                                                      subprocess.CompletedProcess[str]]:
    """The command through the zygote and in a new interpreter."""
    forked = subprocess.run([*durable_bin(), *args], capture_output=True, text=True,
                            **kwargs)  # type: ignore[call-overload]
    fresh = _POPEN([*durable_bin(), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.PIPE if "input" in kwargs else None,
                             env=kwargs.get("env"), cwd=kwargs.get("cwd"))  # type: ignore[arg-type]
    out, err = fresh.communicate(kwargs.get("input"), timeout=120)  # type: ignore[arg-type]
    return forked, subprocess.CompletedProcess(fresh.args, fresh.returncode, out, err)


@pytest.mark.parametrize("args", [["--version"], ["--bogus"], ["validate", "/nowhere.yaml"],
                                  ["validate", "examples/chain-research.yaml", "--json"]])
def test_a_command_answers_as_in_a_new_interpreter(args: list[str]) -> None:
    forked, fresh = both(args, cwd=REPO)
    assert (forked.returncode, forked.stdout, forked.stderr) == \
        (fresh.returncode, fresh.stdout, fresh.stderr)


def test_standard_input_environment_and_directory_are_the_callers(tmp_path: Path) -> None:
    spec = (REPO / "examples" / "chain-research.yaml").read_text()
    forked, fresh = both(["validate", "/dev/stdin", "--json"], input=spec, cwd=tmp_path)
    assert forked.returncode == fresh.returncode == 0, forked.stderr
    assert forked.stdout == fresh.stdout
    env = {**os.environ, "DURABLE_REDIS_URL": "redis://127.0.0.1:1/0"}
    forked, fresh = both(["sessions", "list", "--json"], env=env, cwd=tmp_path)
    assert forked.returncode == fresh.returncode == 1
    assert "redis://127.0.0.1:1/0" in forked.stdout
    assert forked.stdout == fresh.stdout


SLOW = """
version: 0
name: slow
runtime: {provider: scripted, script: {delay_s: 600}}
agents: {a: {prompt: "You wait."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "wait"}]}}
"""


def forked_from_the_zygote(pid: int) -> bool:
    """The process runs the zygote's program (forked, never exec'd) as our child."""
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    ppid = int(Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
    return b"zygote.py" in cmdline and ppid == os.getpid()


def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    spec = tmp_path / "slow.yaml"
    spec.write_text(SLOW)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([*durable_bin(), "run", str(spec)], capture_output=True, text=True,
                       timeout=3, cwd=tmp_path)


def test_a_started_command_is_our_child_to_stop_and_kill(tmp_path: Path) -> None:
    spec = tmp_path / "slow.yaml"
    spec.write_text(SLOW)
    proc = subprocess.Popen([*durable_bin(), "run", str(spec)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert forked_from_the_zygote(proc.pid)
        proc.send_signal(signal.SIGSTOP)
        assert proc.poll() is None
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_calls_it_does_not_model_run_in_a_new_interpreter() -> None:
    forked = subprocess.run([sys.executable, "-c", "import os; print(os.getppid())"],
                            capture_output=True, text=True)
    assert int(forked.stdout) == os.getpid()  # our own child, exec'd
    changed = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.Popen([*durable_bin(), "--version"], env=changed,
                            stdout=subprocess.PIPE)
    assert b"zygote.py" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert proc.communicate(timeout=120)[0].startswith(b"durable")
    assert ZYGOTE.proc is not None  # the commands above did go through it


async def test_a_worker_reads_the_callers_environment(fleet_factory: Any, store: Any) -> None:
    """The worker module reads its Redis and prefix when imported: the zygote imported it
    under the suite's environment, and each worker must still use its own."""
    fleet = fleet_factory()
    worker = fleet.start_worker()
    assert forked_from_the_zygote(worker.pid)

    async def beating() -> bool:
        return bool(await store.heartbeats())

    await wait_for(beating, timeout_s=120, what="the worker's heartbeat on its own Redis")
