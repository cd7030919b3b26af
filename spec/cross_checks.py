"""Checks across the fields of a typed spec: every agent a pattern names exists, the
pattern's own references hold (ids, dependencies, edges), and every template names only
what is available where it renders. Each pattern says what it names and what its
templates are (patterns/definition.py); nothing here knows a pattern."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from strands_durable.errors import SpecError, TemplateError
from strands_durable.patterns import pattern_for
from strands_durable.spec.model import Inputs, Spec
from strands_durable.spec.problems import hint
from strands_durable.spec.templates import (
    KNOWN_GLOBALS,
    undeclared_condition_names,
    undeclared_names,
)

__all__ = ["ARTIFACT_NAMES", "check_references", "check_templates"]

# Artifacts (`outputs.artifacts[].path/from`) also see these: strands-cli's artifact
# writer adds TRACE; the executors' final execution_context adds the rest (from
# "history" on: evaluator_optimizer's and routing's).
ARTIFACT_NAMES: frozenset[str] = frozenset(
    [
        "TRACE",
        "name",
        "timestamp",
        "execution_time",
        "duration_s",
        "cumulative_tokens",
        "session_id",
        "spec_name",
        "pattern_type",
        "history",
        "final_score",
        "current_score",
        "termination_reason",
        "last_evaluation",
        "min_score",
        "max_iters",
        "early_termination",
        "status",
    ]
)


def check_references(spec: Spec, source: str) -> None:
    definition = pattern_for(spec.pattern.type)
    for path, agent_id in definition.agent_refs(spec.pattern.config):
        if agent_id not in spec.agents:
            defined = ", ".join(spec.agents)
            raise SpecError(source, path, f"unknown agent {agent_id!r}"
                            f"{hint(agent_id, spec.agents)}; defined agents: {defined}")
    definition.check(spec.pattern.config, source)


def check_templates(spec: Spec, variables: Mapping[str, Any], source: str) -> None:
    inputs = spec.inputs or Inputs()
    definition = pattern_for(spec.pattern.type)
    known = set(variables) | set(inputs.required) | set(inputs.optional)
    known |= definition.template_names
    fields = list(definition.template_fields(spec.pattern.config))
    # Agents' prompts are system prompts as written (strands-cli renders none), unless
    # the pattern renders one as an input (evaluator_optimizer's producer).
    for agent_id in definition.prompt_templates(spec.pattern.config):
        if agent_id in spec.agents:
            _check_template(spec.agents[agent_id].prompt, f"agents.{agent_id}.prompt", known,
                            False, source)
    for field in fields:
        _check_template(field.text, field.path, known | field.step_vars, field.condition,
                        source)
    artifacts = spec.outputs.artifacts if spec.outputs else []
    for i, artifact in enumerate(artifacts):
        for name, text in (("path", artifact.path), ("from", artifact.from_)):
            path = f"outputs.artifacts[{i}].{name}"
            _check_template(text, path, known | ARTIFACT_NAMES, False, source)


def _check_template(text: str, path: str, known: set[str], condition: bool, source: str) -> None:
    try:
        names = (
            undeclared_condition_names(text, path) if condition else undeclared_names(text, path)
        )
    except TemplateError as error:
        raise SpecError(source, path, error.problem) from error
    unknown = sorted(names - known - KNOWN_GLOBALS)
    if unknown:
        name = unknown[0]
        raise SpecError(source, path, f"undefined template variable {name!r}{hint(name, known)}")


