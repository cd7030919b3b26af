"""examples/python/: each script run as a user runs it (a subprocess, its URL and token
from the environment, or --redis) against a real `durable api` and a real `arq worker`
on a private redis-server; what it prints is what the session did."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import EXAMPLES
from helpers.api import api_process
from helpers.fleet import Fleet

# Starts `durable api` and `arq worker` processes.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPTS = EXAMPLES / "python"
TOKEN = "examples-token-5ecret"


@pytest.fixture
def served(fleet_factory: Callable[..., Fleet], tmp_path: Path
           ) -> Iterator[tuple[Fleet, dict[str, str]]]:
    """A fleet of one worker behind a real `durable api`; the env a user's shell has."""
    fleet = fleet_factory()
    fleet.start_worker()
    with api_process({**fleet.env, "DURABLE_API_TOKEN": TOKEN}, tmp_path / "api.log") as url:
        yield fleet, {**fleet.env, "DURABLE_API_URL": url, "DURABLE_API_TOKEN": TOKEN}


def run(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # From another directory: the scripts find their spec next to themselves.
    return subprocess.run([sys.executable, str(SCRIPTS / script), *args], env=env,
                          cwd=SCRIPTS.parent.parent / "docs", capture_output=True,
                          text=True, timeout=180, check=False)


def test_submit_and_wait(served: tuple[Fleet, dict[str, str]]) -> None:
    _, env = served
    done = run("submit_and_wait.py", env, "--var", "topic=tide pools")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"submitted [0-9a-f-]{36}", lines[0])
    assert lines[1] == "status: completed, 3 steps"
    assert re.fullmatch(r"artifact: tide-pools-report\.md \(\d+ bytes\)", lines[2])
    assert lines[3] == "final response:"
    assert "oversight is the lever" in done.stdout


def test_submit_and_wait_says_what_went_wrong(served: tuple[Fleet, dict[str, str]]) -> None:
    _, env = served
    done = run("submit_and_wait.py", {**env, "DURABLE_API_TOKEN": "not-it-7f3a"})
    assert done.returncode == 1
    assert done.stderr == "error: missing, wrong, expired or revoked bearer token " \
        "(Authorization: Bearer <token>)\n"  # and never the token itself
    assert done.stdout == ""


def test_submit_and_wait_on_redis_without_the_api(served: tuple[Fleet, dict[str, str]]
                                                  ) -> None:
    fleet, env = served
    plain = {k: v for k, v in env.items() if not k.startswith("DURABLE_API_")}
    done = run("submit_and_wait.py", plain, "--redis", fleet.env["DURABLE_REDIS_URL"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "status: completed, 3 steps" in done.stdout
    assert "artifact: AI-safety-report.md" in done.stdout


def test_follow_events(served: tuple[Fleet, dict[str, str]]) -> None:
    _, env = served
    done = run("follow_events.py", env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"session [0-9a-f-]{36}", lines[0])
    completed = [line.split()[1] for line in lines if line.startswith("step_completed ")]
    assert completed == ["step:0", "step:1", "step:2"]
    assert lines[-2].startswith("session_completed") and lines[-1] == "ended: completed"


def test_fork_and_compare(served: tuple[Fleet, dict[str, str]]) -> None:
    _, env = served
    done = run("fork_and_compare.py", env)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"original [0-9a-f-]{36}: completed", lines[0])
    assert lines[1] == "  The tides rise and fall twice daily."
    # Only the writer ran again: the research came from the checkpoint.
    assert re.fullmatch(r"fork [0-9a-f-]{36} from checkpoint 1: completed, "
                        r"ran again: \['step:1'\]", lines[2])
    assert lines[3] == "  Twice a day the sea pops in and wanders off again!"
    assert lines[4] == "the answers are different"


def test_fork_and_compare_prints_a_spec_durable_validate_accepts(tmp_path: Path) -> None:
    printed = run("fork_and_compare.py", {}, "--print-spec")
    assert printed.returncode == 0, printed.stderr
    path = tmp_path / "fork-and-compare.yaml"
    path.write_text(printed.stdout)
    checked = subprocess.run([sys.executable, "-m", "strands_durable.api.cli", "validate",
                              str(path), "--var", "tone=formal"],
                             capture_output=True, text=True, timeout=120, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
