"""Every strands-cli spec in tests/fixtures/strands-cli/ (verbatim copies of
../shared/strands-cli/) runs to completion, unchanged, with
`durable run SPEC --provider scripted --script tests/fixtures/scripts/<stem>.yaml`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import FIXTURES
from helpers.cli import durable

SPECS = FIXTURES / "strands-cli"
SCRIPTS = FIXTURES / "scripts"
ALL_SPECS = sorted(SPECS.glob("*.yaml"))
runner = CliRunner()


def durable_run(stem: str, out_dir: Path) -> tuple[list[str], str]:
    """(committed step keys in commit order, the final response) of a completed run."""
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_REDIS_URL"}
    result = runner.invoke(
        durable(), ["run", str(SPECS / f"{stem}.yaml"), "--provider", "scripted",
              "--script", str(SCRIPTS / f"{stem}.yaml"), "--out", str(out_dir)],
        env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "completed in" in result.output
    keys = [line.split()[1] for line in result.output.splitlines() if line.startswith("✓ ")]
    assert len(keys) == len(set(keys)), keys  # each step committed once
    # What follows the "──── final response ────" rule line.
    final = " ".join(result.output.split("final response", 1)[1].split("\n", 1)[1].split())
    return keys, final


@pytest.fixture(autouse=True)
def _embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)


def test_every_shared_spec_has_rules_and_is_covered_below() -> None:
    stems = {p.stem for p in ALL_SPECS}
    assert stems == {p.stem for p in SCRIPTS.glob("*.yaml")}
    assert stems == set(EXPECTED_KEYS)


def test_fixtures_are_the_shared_copies_unchanged() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "strands-cli"
    if not shared.is_dir():
        pytest.skip(f"{shared} is not next to this checkout")
    for spec in ALL_SPECS:
        assert spec.read_bytes() == (shared / spec.name).read_bytes(), spec.name


EXPECTED_KEYS = {
    "chain-3-step-research": ["step:0", "step:1", "step:2"],
    "evaluator-optimizer-writing-openai": ["produce:1", "evaluate:1", "produce:2",
                                           "evaluate:2"],
    "graph-loop-with-break": ["node:process:1", "node:check:1", "node:process:2",
                              "node:check:2", "node:process:3", "node:check:3",
                              "node:finalize:1"],
    "parallel-with-reduce": ["branch:academic_perspective:0", "branch:industry_perspective:0",
                             "branch:regulatory_perspective:0", "reduce"],
    "workflow-parallel-research": ["task:overview", "task:technical", "task:applications",
                                   "task:synthesis"],
}
# Steps that run side by side commit in any order.
CONCURRENT = {"parallel-with-reduce": slice(0, 3), "workflow-parallel-research": slice(1, 3)}


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda p: p.stem)
def test_shared_spec_runs_to_completion(spec: Path, tmp_path: Path) -> None:
    keys, final = durable_run(spec.stem, tmp_path)
    expected = EXPECTED_KEYS[spec.stem]
    window = CONCURRENT.get(spec.stem, slice(0, 0))
    assert sorted(keys[window]) == sorted(expected[window])
    outside = (slice(None, window.start), slice(window.stop, None))
    assert [k for part in outside for k in keys[part]] == \
        [k for part in outside for k in expected[part]]
    assert final  # a scripted reply, never the unmatched-rule echo "<agent>: <input>"
    assert not final.startswith(tuple(f"{a}: " for a in ("researcher", "writer", "critic",
                                                          "finalizer", "synthesizer")))


def test_chain_artifact_has_every_step(tmp_path: Path) -> None:
    durable_run("chain-3-step-research", tmp_path)
    report = (tmp_path / "artificial_intelligence_safety-research.md").read_text()
    assert report.startswith("# Research Report: artificial intelligence safety")
    assert "## Initial Research\n1. Alignment" in report
    assert "## Analysis\nOversight matters most" in report
    assert "## Summary\nAI safety asks" in report


def test_evaluator_accepts_the_revision_after_rejecting_the_first_draft(
        tmp_path: Path) -> None:
    keys, final = durable_run("evaluator-optimizer-writing-openai", tmp_path)
    assert keys.count("produce:2") == 1 and "evaluate:3" not in keys  # accepted at 90
    refined = (tmp_path / "refined-content.md").read_text()
    assert refined.startswith("# AI in Production: What Changes After the Demo")
    assert final.startswith("# AI in Production")  # the accepted draft, not the verdict


def test_graph_takes_the_loop_three_times_then_breaks(tmp_path: Path) -> None:
    keys, final = durable_run("graph-loop-with-break", tmp_path)
    assert [k for k in keys if k.startswith("node:process:")] == [
        "node:process:1", "node:process:2", "node:process:3"]
    assert keys[-1] == "node:finalize:1"
    result = (tmp_path / "artifacts" / "graph-loop-result.md").read_text()
    assert result == "Final: 3 passes, 120 records cleaned each time."
    assert final == result


def test_parallel_reduce_sees_every_branch(tmp_path: Path) -> None:
    durable_run("parallel-with-reduce", tmp_path)
    synthesis = (tmp_path / "parallel-synthesis.md").read_text()
    assert synthesis.startswith("Synthesis: faster settlement is proven")


def test_workflow_artifact_reports_every_task(tmp_path: Path) -> None:
    durable_run("workflow-parallel-research", tmp_path)
    report = (tmp_path / "edge_computing-workflow.md").read_text()
    assert report.startswith("# Edge Computing Research Report")
    assert "## Technical Analysis\nStatus: success\n1. Local inference" in report
    assert "## Applications\nStatus: success\n1. Factory defect detection" in report
    assert "## Synthesis\nEdge computing pairs local inference" in report
