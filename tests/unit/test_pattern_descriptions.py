"""Each registered pattern says how `durable validate` counts its parts: the CLI asks
the registry, so a new pattern declares its own (or None) instead of editing the CLI."""

from __future__ import annotations

import pytest

from strands_durable.patterns import PATTERNS


@pytest.mark.parametrize("pattern_type", sorted(PATTERNS))
def test_parts_field_names_a_config_list_or_none(pattern_type: str) -> None:
    definition = PATTERNS[pattern_type]
    field = definition.parts_field
    if field is not None:
        assert field in definition.config_model.model_fields


def test_parts_fields_are_those_validate_has_always_printed() -> None:
    fields = {t: d.parts_field for t, d in PATTERNS.items()}
    assert fields == {"chain": "steps", "workflow": "tasks", "parallel": "branches",
                      "routing": "routes", "graph": "nodes", "evaluator_optimizer": None,
                      "orchestrator_workers": None}


def test_notes_name_tools_except_for_the_orchestrator() -> None:
    silent = {t for t, d in PATTERNS.items() if not d.notes_name_tools}
    assert silent == {"orchestrator_workers"}
