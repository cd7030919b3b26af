"""The suite's zygote (tests/helpers/zygote.py) answers as a new interpreter would: the
same exit status, standard output and error, program name, standard input, environment
and working directory; a timeout kills the command; calls it does not model run as they
always did."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO
from helpers.fleet import durable_bin
from helpers.zygote import ZYGOTE, run

pytestmark = pytest.mark.integration


def both(args: list[str], **kwargs: object) -> tuple[subprocess.CompletedProcess[str],
                                                      subprocess.CompletedProcess[str]]:
    """The command through the zygote and in a new interpreter."""
    forked = run([*durable_bin(), *args], capture_output=True, text=True, **kwargs)
    fresh = subprocess.Popen([*durable_bin(), *args], stdout=subprocess.PIPE,
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


def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    spec = tmp_path / "slow.yaml"
    spec.write_text(SLOW)
    with pytest.raises(subprocess.TimeoutExpired):
        run([*durable_bin(), "run", str(spec)], capture_output=True, text=True, timeout=3,
            cwd=tmp_path)


def test_calls_it_does_not_model_run_in_a_new_interpreter() -> None:
    forked = run([sys.executable, "-c", "import os; print(os.getppid())"],
                 capture_output=True, text=True)
    assert int(forked.stdout) == os.getpid()  # our own child, not the zygote's
    assert ZYGOTE.proc is None or int(forked.stdout) != ZYGOTE.proc.pid
