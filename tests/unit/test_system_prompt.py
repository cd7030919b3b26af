"""An agent's system prompt is composed as strands-cli composes it: the prompt as
written, the HTTP executors' reference, the runtime banner."""

from __future__ import annotations

from strands_durable.spec.loader import load_spec_data
from strands_durable.worker.system_prompt import system_prompt

SPEC = {
    "version": 0, "name": "triage", "description": "Sort tickets", "tags": ["support", "ops"],
    "runtime": {"provider": "scripted", "budgets": {"max_steps": 5}},
    "agents": {"a": {"prompt": "You sort {{ tickets }}."}},
    "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "go"}]}},
}


def test_the_prompt_then_the_runtime_banner_with_only_the_budgets_set() -> None:
    spec = load_spec_data(SPEC).spec
    assert system_prompt(spec, "a", "You sort {{ tickets }}.") == (
        "You sort {{ tickets }}.\n\n\n# Runtime Context\n\n- **Workflow:** triage\n"
        "- **Description:** Sort tickets\n- **Tags:** support, ops\n- **Agent ID:** a\n"
        "- **Budgets:**\n  - max_steps: 5")


def test_http_executors_are_described_to_the_model() -> None:
    data = {**SPEC, "tools": {"http_executors": [{
        "id": "github", "base_url": "https://api.github.com", "description": "GitHub REST",
        "common_endpoints": [{"path": "/repos/{owner}/{repo}", "description": "a repo"}],
        "authentication_info": "token in a header"}]}}
    text = system_prompt(load_spec_data(data).spec, "a", "P.")
    assert "# HTTP Tools Reference" in text and "## Tool: `github`" in text
    assert "**Base URL**: `https://api.github.com`" in text
    assert "- `/repos/{owner}/{repo}` - a repo" in text
    assert text.index("HTTP Tools Reference") < text.index("# Runtime Context")
