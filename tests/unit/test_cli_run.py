"""`durable run`, the embedded default: in-process store and worker, no server."""

from __future__ import annotations

import os
from pathlib import Path

from click.testing import CliRunner
from helpers import EXAMPLES
from helpers.cli import durable

runner = CliRunner()


def run(*args: str) -> object:
    env = {k: v for k, v in os.environ.items() if k != "DURABLE_REDIS_URL"}
    return runner.invoke(durable(), list(args), env=env, catch_exceptions=False)


def test_run_example_prints_progress_and_final_response(tmp_path: Path,
                                                        monkeypatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    result = run("run", str(EXAMPLES / "chain-research.yaml"), "--var", "topic=tidal power",
                 "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert sum("✓ step:" in line for line in lines) == 3
    assert "completed" in result.output
    assert "oversight is the lever" in result.output
    report = (tmp_path / "tidal-power-report.md").read_text()
    assert report.startswith("# Research report: tidal power")


def test_run_with_provider_override_and_script(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    script = tmp_path / "rules.yaml"
    script.write_text("rules:\n  - agent: writer\n    reply: SCRIPTED-FINAL\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text((EXAMPLES / "chain-research.yaml").read_text()
                    .replace("provider: scripted", "provider: ollama"))
    result = run("run", str(spec), "--provider", "scripted", "--script", str(script))
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith("SCRIPTED-FINAL")


def test_bad_spec_is_one_clear_message(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text((EXAMPLES / "chain-research.yaml").read_text()
                    .replace("{{ steps[1].response }}\n          Write",
                             "{{ stepz[1].response }}\n          Write"))
    result = run("run", str(spec))
    assert result.exit_code == 2
    assert "bad.yaml" in result.output and "pattern.config.steps[2].input" in result.output
    assert "stepz" in result.output and "Traceback" not in result.output


def test_missing_file_and_bad_var(tmp_path: Path) -> None:
    missing = run("run", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "nope.yaml" in missing.output
    bad_var = run("run", str(EXAMPLES / "chain-research.yaml"), "--var", "novalue")
    assert bad_var.exit_code == 2 and "novalue" in bad_var.output


def test_artifact_escaping_out_dir_is_refused_before_running(tmp_path: Path) -> None:
    spec = tmp_path / "escape.yaml"
    spec.write_text((EXAMPLES / "chain-research.yaml").read_text().replace(
        'path: "{{ topic | replace(\' \', \'-\') }}-report.md"', "path: ../../escape.md"))
    result = run("run", str(spec), "--out", str(tmp_path / "out"))
    assert result.exit_code != 0 and "escapes the output dir" in result.output
    assert not (tmp_path / "escape.md").exists()


def test_an_out_dir_that_is_a_file_is_refused_before_running(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    result = run("run", str(EXAMPLES / "chain-research.yaml"), "--var", "topic=x",
                 "--out", str(tmp_path / "file"))
    assert result.exit_code == 2 and "not a folder" in result.output
    assert "✓ step:" not in result.output  # refused before any step ran


def test_artifacts_see_the_run_itself(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    spec = tmp_path / "spec.yaml"
    spec.write_text("""
version: 0
name: about-the-run
runtime: {provider: scripted, script: {rules: [{reply: "four words of reply"}]}}
agents: {a: {prompt: "You are a."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "one two"}]}}
outputs:
  artifacts:
    - path: run.txt
      from: "{{ spec_name }}|{{ pattern_type }}|{{ status }}|{{ cumulative_tokens }}|{{ session_id | length }}|{{ duration_s >= 0 }}|{{ execution_time == duration_s }}"
""")  # noqa: E501
    result = run("run", str(spec), "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "run.txt").read_text() == "about-the-run|chain|completed|6|36|True|True"


SOME_ID = "3b241101-e2bb-4255-8caf-4136c566a962"  # a well-formed session id


def test_a_bad_setting_is_a_usage_error_naming_the_variable(tmp_path: Path) -> None:
    env = {**os.environ, "DURABLE_SHARDS": "0"}
    for args in (["status", SOME_ID], ["run", str(EXAMPLES / "chain-research.yaml")]):
        result = runner.invoke(durable(), args, env=env)
        assert result.exit_code == 2, result.output
        assert "DURABLE_SHARDS='0'" in result.output and "greater than or equal to 1" \
            in result.output
        assert "Traceback" not in result.output
    env = {**os.environ, "DURABLE_REDIS_URL": "garbage"}
    for args in (["status", SOME_ID], ["run", str(EXAMPLES / "chain-research.yaml")]):
        result = runner.invoke(durable(), args, env=env)
        assert result.exit_code == 2, result.output
        assert "DURABLE_REDIS_URL='garbage'" in result.output and "redis://" in result.output


def test_set_splits_budgets_from_variables_and_refuses_bad_budgets() -> None:
    import pytest

    from strands_durable.errors import DurableError
    from strands_durable.sessions.control import parse_sets

    assert parse_sets({"budgets.max_steps": "50", "max_tokens": "9", "topic": "x",
                       "inputs.values.tone": "warm"}) == (
        {"topic": "x", "tone": "warm"}, {"max_steps": 50, "max_tokens": 9})
    with pytest.raises(DurableError, match="at least 1"):
        parse_sets({"budgets.max_duration_s": "-5"})
    result = runner.invoke(durable(), ["resume", SOME_ID, "--from-checkpoint", "1",
                                 "--set", "novalue"])
    assert result.exit_code == 2 and "--set novalue: expected KEY=VALUE" in result.output


def test_a_missing_required_input_names_the_flag_that_sets_it(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    text = (EXAMPLES / "chain-research.yaml").read_text()
    assert "  values:\n    topic: AI safety\n" in text
    spec.write_text(text.replace("  values:\n    topic: AI safety\n", ""))
    result = run("run", str(spec))
    assert result.exit_code == 2, result.output
    # The loader's message names no interface; the CLI adds its own way to fix it.
    assert "required input 'topic' has no value" in result.output
    assert "--var topic=VALUE" in result.output


def test_the_workers_table_names_a_few_running_steps_and_counts_the_rest() -> None:
    from strands_durable.api.cli.views import running_text

    assert running_text([]) == ""
    assert running_text(["a/step:0", "b/step:1"]) == "a/step:0\nb/step:1"
    many = [f"s{i}/step:0" for i in range(1000)]
    lines = running_text(many).splitlines()
    assert lines[:5] == many[:5] and lines[5] == "... and 995 more" and len(lines) == 6


def test_a_json_command_leaves_the_next_command_in_text(tmp_path: Path) -> None:
    # One process, two commands (an embedding program, or these tests): `--json` holds
    # for its own command only.
    spec = str(EXAMPLES / "chain-research.yaml")
    assert run("validate", spec, "--json").output.lstrip().startswith("{")
    result = run("run", spec, "--var", "topic=tides", "--ephemeral", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert "completed in" in result.output and not result.output.lstrip().startswith("{")
