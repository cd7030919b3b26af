"""`durable run --out DIR` as a real process on a private local store: an artifact path
that leaves DIR is refused before any step runs when it reads only variables (a --var),
and told once, with the session completed, when it reads the run's results."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import EXAMPLES
from local_store import LocalHome, private_home

pytestmark = pytest.mark.integration

CHAIN = EXAMPLES / "chain-research.yaml"  # path: "{{ topic | replace(' ', '-') }}-report.md"

FROM_RESULTS = """
version: 0
name: from-results
runtime:
  provider: scripted
  script: {rules: [{reply: "../../escaped"}]}
agents: {a: {prompt: "You are a."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "name a file"}]}}
outputs:
  artifacts:
    - path: "kept.md"
      from: "kept"
    - path: "{{ last_response }}.md"
      from: "{{ last_response }}"
"""


@pytest.fixture
def home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


def test_a_var_that_takes_an_artifact_outside_out_is_refused_before_any_step(
        home: LocalHome, tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "out"
    result = home.durable("run", CHAIN, "--out", out, "--var", "topic=../../../x")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""  # no session, no step, no "completed"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "outputs.artifacts[0].path" in lines[0], lines
    assert "escapes the output dir" in lines[0] and "Traceback" not in result.stderr
    assert not list(tmp_path.rglob("x-report.md")) and not out.exists()


def test_a_safe_var_still_writes_the_artifact(home: LocalHome, tmp_path: Path) -> None:
    out = tmp_path / "out"
    home.durable("run", CHAIN, "--out", out, "--var", "topic=tidal power", check_rc=0)
    assert (out / "tidal-power-report.md").read_text().startswith("# Research report")


def test_a_path_from_the_results_is_refused_once_with_the_session_completed(
        home: LocalHome, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(FROM_RESULTS)
    out = tmp_path / "a" / "b" / "out"
    result = home.durable("run", spec, "--out", out)
    assert result.returncode == 2, (result.stdout, result.stderr)
    (session,) = home.sessions()
    assert session["status"] == "completed"
    assert "completed in" in result.stdout and "final response" not in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert f"session {session['session_id']} completed, but no artifact was written" in line
    assert "'../../escaped.md' escapes the output dir" in line
    assert not list(tmp_path.rglob("escaped.md")) and not list(tmp_path.rglob("kept.md"))

    as_json = home.durable("run", spec, "--out", out, "--json")
    assert as_json.returncode == 2, (as_json.stdout, as_json.stderr)
    doc = json.loads(as_json.stdout)
    assert doc["status"] == "completed" and doc["artifacts"] == []
    assert "'../../escaped.md' escapes the output dir" in doc["artifact_error"]
