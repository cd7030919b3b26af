"""Agent references (`$ref`), resolved as strands-cli resolves them: strands-cli's own
atomic-agent demo loads and runs; a spec sent as text never reads the server's disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers.cli import durable

from strands_durable.errors import SpecError
from strands_durable.spec.loader import load_spec_file, load_spec_text

REFS = Path(__file__).resolve().parents[1] / "fixtures" / "strands-cli-refs"
DEMO = REFS / "examples" / "atomic-ref-demo-openai.yaml"
VARS = {"subject": "Outage", "body": "The server is down."}


def test_strands_clis_atomic_demo_resolves_its_references() -> None:
    loaded = load_spec_file(DEMO, VARS)
    summarizer = loaded.spec.agents["summarizer"]
    assert summarizer.prompt.startswith("You are an expert customer support summarizer.")
    assert summarizer.input_schema == str(
        REFS / "agents/atomic/summarize_customer_email/schemas/input.json")
    classifier = loaded.spec.agents["classifier"]
    assert classifier.model_id == "gpt-4o"  # the override beside $ref wins


def test_the_demo_runs_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    result = CliRunner().invoke(durable(), ["run", str(DEMO), "--provider", "scripted",
                                      "--var", "subject=Outage", "--var", "body=Down",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "completed in" in result.output and "2 steps" in result.output


def test_a_spec_sent_as_text_may_not_reference_files() -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text(DEMO.read_text(), "<request>", VARS)
    assert info.value.path == "agents.summarizer"
    assert "relative to the spec's file" in info.value.problem


def copy_demo(tmp_path: Path) -> Path:
    shutil.copytree(REFS, tmp_path / "refs")
    return tmp_path / "refs" / "examples" / "atomic-ref-demo-openai.yaml"


def edit(path: Path, change: dict[str, object]) -> None:
    data = yaml.safe_load(path.read_text())
    data.update(change)
    path.write_text(yaml.safe_dump(data))


def test_a_changed_atomic_agent_changes_the_specs_hash(tmp_path: Path) -> None:
    demo = copy_demo(tmp_path)
    before = load_spec_file(demo, VARS).spec_hash
    atomic = demo.parents[1] / "agents/atomic/classify_from_summary/classify_from_summary.yaml"
    data = yaml.safe_load(atomic.read_text())
    next(iter(data["agents"].values()))["prompt"] = "Classify, tersely."
    atomic.write_text(yaml.safe_dump(data))
    assert load_spec_file(demo, VARS).spec_hash != before


@pytest.mark.parametrize(("change", "problem"), [
    ({"agents": {}}, "exactly one agent"),
    ({"agents": {"a": {"prompt": "A."}, "b": {"prompt": "B."}}}, "found 2"),
    ({"agents": {"a": {"$ref": "./other.yaml"}}}, "references another agent"),
])
def test_a_reference_must_be_one_self_contained_agent(tmp_path: Path, change: dict[str, object],
                                                      problem: str) -> None:
    demo = copy_demo(tmp_path)
    edit(demo.parents[1] / "agents/atomic/classify_from_summary/classify_from_summary.yaml",
         change)
    with pytest.raises(SpecError) as info:
        load_spec_file(demo, VARS)
    assert info.value.path == "agents.classifier.$ref" and problem in info.value.problem


def test_a_missing_reference_names_the_agent_and_the_path(tmp_path: Path) -> None:
    demo = copy_demo(tmp_path)
    shutil.rmtree(demo.parents[1] / "agents/atomic/summarize_customer_email")
    with pytest.raises(SpecError) as info:
        load_spec_file(demo, VARS)
    assert info.value.path == "agents.summarizer.$ref"
    assert "summarize_customer_email.yaml" in info.value.problem
