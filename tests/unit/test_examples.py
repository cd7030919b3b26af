"""Every example in examples/ runs through `durable run` (embedded: in-process store and
worker) and does what its comments promise: the branching really happens.

What ran is read from the CLI's progress lines (one per committed step, in commit
order, with its step key), what it produced from the artifacts and the final response.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import EXAMPLES
from helpers.cli import durable

runner = CliRunner()
ALL_EXAMPLES = sorted(EXAMPLES.glob("*.yaml"))


@dataclass
class Run:
    exit_code: int
    output: str
    keys: list[str]  # committed step keys, in commit order
    out_dir: Path

    @property
    def flat(self) -> str:
        """The output on one line (rich wraps long lines at the terminal width)."""
        return " ".join(self.output.split())

    def artifact(self, name: str) -> str:
        return (self.out_dir / name).read_text()


def durable_run(spec: Path, out_dir: Path, *args: str) -> Run:
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_REDIS_URL"}
    result = runner.invoke(durable(), ["run", str(spec), "--out", str(out_dir), *args], env=env,
                           catch_exceptions=False)
    keys = [line.split()[1] for line in result.output.splitlines() if line.startswith("✓ ")]
    return Run(result.exit_code, result.output, keys, out_dir)


def example(name: str, tmp_path: Path, *args: str) -> Run:
    run = durable_run(EXAMPLES / name, tmp_path / "out", *args)
    assert run.exit_code == 0, run.output
    return run


def script_without(name: str, tmp_path: Path, agent: str, **extra_rules: str) -> Path:
    """The example's own rules minus those of `agent` (its calls then echo their input:
    "<agent>: <first 200 characters>"), as a --script file, after `extra_rules` (to
    pass with --script-replace: merged, the spec's own rules would still answer)."""
    spec = yaml.safe_load((EXAMPLES / name).read_text())
    rules = [r for r in spec["runtime"]["script"]["rules"] if r.get("agent") != agent]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [*extra_rules.values(), *rules]}))
    return path


@pytest.fixture(autouse=True)
def _embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)


# --- every example ---------------------------------------------------------------------


def test_every_pattern_has_an_example() -> None:
    patterns = {yaml.safe_load(p.read_text())["pattern"]["type"] for p in ALL_EXAMPLES}
    assert patterns == {"chain", "workflow", "parallel", "routing", "evaluator_optimizer",
                        "orchestrator_workers", "graph"}


@pytest.mark.parametrize("spec", ALL_EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_offline_and_writes_every_artifact(spec: Path, tmp_path: Path) -> None:
    data = yaml.safe_load(spec.read_text())
    assert data["runtime"]["provider"] == "scripted" and data["runtime"]["script"]["rules"]
    run = durable_run(spec, tmp_path / "out")
    assert run.exit_code == 0, run.output
    assert "completed in" in run.output and "final response" in run.output
    assert len(run.keys) == len(set(run.keys)) >= 3  # each step committed once
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(written) == len(data["outputs"]["artifacts"]) >= 1
    assert all(p.read_text().strip() for p in written)
    # Every call its results show matched a rule: an unmatched one echoes
    # "<agent>: <input>" (a line starting with an agent id and a colon).
    shown = [run.output.split("final response")[1], *(p.read_text() for p in written)]
    lines = [line.strip() for text in shown for line in text.splitlines()]
    assert not [line for line in lines for agent in data["agents"]
                if line.startswith(f"{agent}: ")]


# --- workflow: fan out after `changes`, fan in at `notes` -------------------------------

WORKFLOW = "workflow-release-notes.yaml"


def test_workflow_fans_out_and_in(tmp_path: Path) -> None:
    run = example(WORKFLOW, tmp_path)
    assert run.keys[0] == "task:changes" and run.keys[-1] == "task:notes"
    assert sorted(run.keys[1:3]) == ["task:features", "task:fixes"]
    notes = run.artifact("release-notes-2.4.0.md")
    assert notes.startswith("# Acme Cloud 2.4.0\n")
    assert "## Features (success)\nStreaming uploads" in notes
    assert "## Fixes (success)\nSessions now time out" in notes
    assert "Tasks run: changes, features, fixes, notes" in notes


def test_workflow_last_task_reads_both_branches(tmp_path: Path) -> None:
    # Without the writer's rule, the writer echoes its rendered input: both
    # parallel tasks' results reached it.
    script = script_without(WORKFLOW, tmp_path, "writer")
    run = example(WORKFLOW, tmp_path, "--script", str(script), "--script-replace",
                  "--var", "version=2.5.0")
    final = run.output.split("final response")[1]
    assert "writer: Write two short paragraphs of release notes for Acme Cloud 2.5.0." in final
    assert "Features: Streaming uploads" in " ".join(final.split())
    assert (run.out_dir / "release-notes-2.5.0.md").exists()


# --- parallel: three branches, then reduce -----------------------------------------------


def test_parallel_branches_then_reduce(tmp_path: Path) -> None:
    run = example("parallel-market-scan.yaml", tmp_path)
    assert set(run.keys) == {"branch:customers:0", "branch:customers:1",
                             "branch:competitors:0", "branch:pricing:0", "reduce"}
    assert run.keys.index("branch:customers:0") < run.keys.index("branch:customers:1")
    assert run.keys[-1] == "reduce"
    scan = run.artifact("market-scan.md")
    assert "## Customers (success, 2 step(s))\nPain points:" in scan
    assert "## Competitors (success, 1 step(s))\nTwo incumbents" in scan
    assert "## Pricing (success, 1 step(s))\nFlat team plans" in scan
    assert "Position TeamMail as the flat-priced shared inbox" in scan


# --- routing: the router picks a route, only its steps run --------------------------------

ROUTING = "routing-support-triage.yaml"


def test_router_picks_billing_not_the_first_route(tmp_path: Path) -> None:
    run = example(ROUTING, tmp_path)
    assert run.keys == ["router", "route:billing:0", "route:billing:1"]
    reply = run.artifact("ticket-reply.md")
    assert "Routed to: **billing** (router agent: router)" in reply
    assert "## Internal notes\nI can see two charges" in reply
    assert "## Reply\nHi Sam, sorry about the double charge!" in reply


@pytest.mark.parametrize(("ticket", "route"), [
    ("The app crashes when I upload a photo", "technical"),
    ("How do I add a teammate?", "faq"),
])
def test_the_ticket_decides_the_route(tmp_path: Path, ticket: str, route: str) -> None:
    run = example(ROUTING, tmp_path, "--var", f"ticket={ticket}")
    assert run.keys == ["router", f"route:{route}:0", f"route:{route}:1"]
    assert f"Routed to: **{route}**" in run.artifact("ticket-reply.md")


def test_router_retries_malformed_and_unknown_replies(tmp_path: Path) -> None:
    script = script_without(
        ROUTING, tmp_path, "router",
        a={"agent": "router", "contains": "unknown route", "reply": '{"route": "billing"}'},
        b={"agent": "router", "contains": "malformed", "reply": '{"route": "refunds"}'},
        c={"agent": "router", "reply": "Hmm, money trouble."})
    run = example(ROUTING, tmp_path, "--script", str(script), "--script-replace")
    assert run.keys == ["router", "router:retry:1", "router:retry:2", "route:billing:0",
                        "route:billing:1"]
    assert "Routed to: **billing**" in run.artifact("ticket-reply.md")


def test_router_fails_after_max_retries_naming_the_reply(tmp_path: Path) -> None:
    script = script_without(ROUTING, tmp_path, "router",
                            a={"agent": "router", "reply": 'Maybe {"route": "refunds"}?'})
    run = durable_run(EXAMPLES / ROUTING, tmp_path / "out", "--script", str(script),
                      "--script-replace")
    assert run.exit_code == 1
    assert run.keys == ["router", "router:retry:1", "router:retry:2"]
    assert "invalid route 'refunds' selected by router after 3 attempts" in run.flat
    valid = run.flat.split("Valid routes: ")[1].split(";")[0]
    assert sorted(valid.split(", ")) == ["'billing'", "'faq'", "'technical'"]
    assert """last reply: 'Maybe {"route": "refunds"}?'""" in run.flat
    assert not (tmp_path / "out").exists()


# --- evaluator_optimizer: the first draft is rejected, the revision accepted --------------

EVALUATOR = "evaluator-optimizer-product-copy.yaml"


def test_evaluator_rejects_then_accepts_the_revision(tmp_path: Path) -> None:
    run = example(EVALUATOR, tmp_path)
    assert run.keys == ["produce:1", "evaluate:1", "produce:2", "evaluate:2"]
    copy = run.artifact("product-copy.md")
    assert "Accepted with 91/100 (needed 85) after 2 draft(s)." in copy
    assert "| 1 | 62 | no concrete numbers; 'ready for anything' is vague |" in copy
    assert "| 2 | 91 | - |" in copy
    # The final response is the accepted draft, not the evaluator's verdict.
    final = run.output.split("final response")[1]
    assert "an 18-hour battery" in final and "score" not in final


def test_evaluator_that_never_accepts_fails_after_max_iters(tmp_path: Path) -> None:
    script = script_without(EVALUATOR, tmp_path, "editor",
                            a={"agent": "editor", "reply": '{"score": 70, "issues": ["meh"]}'})
    run = durable_run(EXAMPLES / EVALUATOR, tmp_path / "out", "--script", str(script),
                      "--script-replace")
    assert run.exit_code == 1
    assert run.keys == ["produce:1", "evaluate:1", "produce:2", "evaluate:2", "produce:3",
                        "evaluate:3"]
    assert ("Max iterations (3) exhausted without reaching min_score (85). Final score: 70"
            in run.flat)


# --- orchestrator_workers: two rounds of workers, then "complete" ---------------------------


def test_orchestrator_plans_two_rounds_then_completes(tmp_path: Path) -> None:
    run = example("orchestrator-workers-vendor-review.yaml", tmp_path)
    assert run.keys[0] == "orchestrate:1"
    assert sorted(run.keys[1:3]) == ["worker:1:0", "worker:1:1"]
    assert run.keys[3:] == ["orchestrate:2", "worker:2:0", "orchestrate:3", "reduce",
                            "writeup"]
    review = run.artifact("vendor-review.md")
    assert "## Checks (3 workers)" in review
    assert "- round 1: Check the security certifications of Northwind Analytics -> SOC 2" \
        in review
    assert "- round 1: Check the uptime record of Northwind Analytics -> 99.95%" in review
    assert "- round 2: Find out whether the audit finding on key rotation is fixed -> Fixed" \
        in review
    assert "Summary: Northwind is certified" in review
    assert review.split("\n\n")[1].startswith("Recommendation: approve Northwind Analytics.")


# --- graph: write -> review loops twice, then breaks out to release ----------------------

GRAPH = "graph-code-review-loop.yaml"


def test_graph_loops_twice_then_breaks_out(tmp_path: Path) -> None:
    run = example(GRAPH, tmp_path)
    assert run.keys == ["node:write:1", "node:review:1", "node:write:2", "node:review:2",
                        "node:write:3", "node:review:3", "node:release:1"]
    report = run.artifact("code-review.md")
    assert report.startswith("# graph-code-review-loop\n")
    assert "Finished at `release` after 7 steps (20" in report
    assert "Visits: write x3, review x3, release x1" in report
    assert "## Final code (version 3)" in report and "def test_dedupe_keeps_order" in report
    assert "Review: APPROVED" in report
    assert "Changelog: Added dedupe()" in report


def test_graph_step_budget_pauses_the_run(tmp_path: Path) -> None:
    spec = tmp_path / "budget.yaml"
    spec.write_text((EXAMPLES / GRAPH).read_text().replace("max_steps: 20", "max_steps: 5"))
    run = durable_run(spec, tmp_path / "out")
    assert run.exit_code == 3  # paused, resumable with --set budgets.max_steps=N
    assert len(run.keys) == 5 and run.keys[-1] == "node:write:3"
    assert "paused: budget max_steps reached: 5 steps used, limit 5" in run.flat
    assert "--set budgets.max_steps=N" in run.flat


def test_graph_node_over_max_iterations_fails_naming_it(tmp_path: Path) -> None:
    spec = tmp_path / "iterations.yaml"
    spec.write_text((EXAMPLES / GRAPH).read_text().replace("max_iterations: 4",
                                                           "max_iterations: 2"))
    run = durable_run(spec, tmp_path / "out")
    assert run.exit_code == 1
    assert run.keys == ["node:write:1", "node:review:1", "node:write:2", "node:review:2"]
    assert "graph node 'write' exceeded its max_iterations limit (2)" in run.flat
