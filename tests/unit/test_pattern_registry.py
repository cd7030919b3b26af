"""The pattern registry: every pattern type the shipped schema names has one module that
owns its config model, its checks and its planner, and the spec model asks it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strands_durable.patterns import PATTERNS, pattern_for, planner_for
from strands_durable.spec.model import Pattern

SCHEMA = (Path(__file__).resolve().parents[2] / "spec" / "schema"
          / "strands-workflow.schema.json")


def test_the_registry_covers_the_schema_pattern_types() -> None:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    assert set(PATTERNS) == set(schema["$defs"]["pattern"]["properties"]["type"]["enum"])
    for pattern_type, definition in PATTERNS.items():
        assert definition.pattern_type == pattern_type
        assert definition.schema_def in schema["$defs"]
        assert planner_for(pattern_type) is definition.planner
        assert {"last_response", "hitl_response"} <= definition.template_names


def test_the_declared_type_picks_the_config_model() -> None:
    pattern = Pattern.model_validate(
        {"type": "chain", "config": {"steps": [{"agent": "a"}]}})
    assert isinstance(pattern.config, PATTERNS["chain"].config_model)
    # The dump holds the config's own fields, not the base class's (none).
    assert pattern.model_dump()["config"]["steps"][0]["agent"] == "a"


def test_an_unknown_pattern_type_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown pattern type 'star'"):
        Pattern.model_validate({"type": "star", "config": {}})
    with pytest.raises(NotImplementedError, match="pattern 'star' is not supported yet"):
        pattern_for("star")
