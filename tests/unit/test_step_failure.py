"""What a failed step says (worker/step_failure.py): bounded, no credential the worker
holds, a permanent provider error naming its provider and model."""

from __future__ import annotations

from strands_durable.errors import StepFailed
from strands_durable.spec.loader import load_spec_text
from strands_durable.worker.step_failure import MAX_PROBLEM_CHARS, step_problem

SPEC = load_spec_text("""
version: 0
name: failing
runtime: {provider: openai, model_id: gpt-4o}
agents:
  a: {prompt: "A."}
  b: {prompt: "B.", provider: anthropic, model_id: claude-x}
pattern: {type: chain, config: {steps: [{agent: a, input: "x"}, {agent: b, input: "y"}]}}
""", "s.yaml").spec
ENV = {"OPENAI_API_KEY": "sk-live-0123456789abcdef", "ANTHROPIC_API_KEY": "x",
       "AWS_SECRET_ACCESS_KEY": "aws/secret/0123456789"}


class _Status(Exception):
    status_code = 401


def test_the_workers_credentials_are_masked_and_short_values_left_alone() -> None:
    exc = RuntimeError("bad key sk-live-0123456789abcdef for x; aws/secret/0123456789")
    shown = step_problem(exc, SPEC, "a", ENV)
    assert "sk-live" not in shown.text and "aws/secret" not in shown.text
    # "x" (a local server's any-value key) is no secret worth hiding every x for
    assert shown.text == "RuntimeError: bad key *** for x; ***" and shown.retryable


def test_a_permanent_provider_error_names_its_provider_and_model() -> None:
    shown = step_problem(_Status("invalid api key"), SPEC, "b", ENV)
    assert shown.text.startswith("anthropic model claude-x: permanent provider error, HTTP 401")
    assert not shown.retryable
    assert step_problem(_Status("no"), SPEC, "a", ENV).text.startswith("openai model gpt-4o:")


def test_the_problem_is_bounded() -> None:
    shown = step_problem(StepFailed("s", "k", "y" * 100_000), SPEC, "a", ENV)
    assert len(shown.text) < MAX_PROBLEM_CHARS + 50
    assert shown.text.endswith("(98,000 more characters)")
