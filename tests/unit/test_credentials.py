"""`durable run` runs the steps in its own process: a provider whose key is absent from
that environment is refused before anything starts (exit 2, naming agent and variable)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.cli import durable

from strands_durable.errors import SpecError
from strands_durable.spec.loader import load_spec_data
from strands_durable.worker.providers.credentials import check_credentials

SPEC = """
version: 0
name: keyless
runtime: {provider: openai, model_id: gpt-4o}
agents:
  writer: {prompt: "You write."}
  local: {prompt: "You run locally.", provider: ollama, model_id: llama3}
pattern: {type: chain, config: {steps: [{agent: writer, input: "hi"}]}}
"""


def test_durable_run_refuses_a_provider_without_its_key(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    spec = tmp_path / "keyless.yaml"
    spec.write_text(SPEC)
    result = CliRunner().invoke(durable(), ["run", str(spec)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "runtime.provider" in flat and "agent 'writer'" in flat
    assert "OPENAI_API_KEY" in flat and "Traceback" not in flat


def test_each_agent_is_judged_by_its_own_provider() -> None:
    loaded = load_spec_data({
        "version": 0, "name": "k", "runtime": {"provider": "ollama", "model_id": "m"},
        "agents": {"a": {"prompt": "A."}, "b": {"prompt": "B.", "provider": "anthropic",
                                               "model_id": "claude"}},
        "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "x"}]}}})
    check_credentials(loaded.spec, "s", {"ANTHROPIC_API_KEY": "k"})
    with pytest.raises(SpecError) as info:
        check_credentials(loaded.spec, "s", {})
    assert info.value.path == "agents.b.provider" and "ANTHROPIC_API_KEY" in str(info.value)
