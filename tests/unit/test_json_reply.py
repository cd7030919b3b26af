"""Tolerant JSON extraction from LLM replies."""

from __future__ import annotations

from typing import Any

import pytest

from strands_durable.patterns.json_reply import extract_json


@pytest.mark.parametrize(("reply", "expected"), [
    ('{"route": "faq"}', {"route": "faq"}),
    ('  [1, 2]\n', [1, 2]),
    ('"complete"', "complete"),
    ('```json\n{"score": 90, "issues": []}\n```', {"score": 90, "issues": []}),
    ('```JSON\n[{"task": "a"}]\n```', [{"task": "a"}]),
    ('Sure:\n```\n{"route": "x"}\n```\nDone.', {"route": "x"}),
    ('```python\nprint(1)\n```\n```json\n{"a": 1}\n```', {"a": 1}),
    ('I choose {"route": "billing"} because it fits.', {"route": "billing"}),
    ('Tasks: [{"task": "a {b}"}, {"task": "c]"}] - go', [{"task": "a {b}"}, {"task": "c]"}]),
    ('Nested {"a": {"b": [1, {"c": 2}]}} tail }', {"a": {"b": [1, {"c": 2}]}}),
    ('broken { not json } then {"ok": true}', {"ok": True}),
    ('{"a": 1} and {"b": 2}', {"a": 1}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_extracts(reply: str, expected: Any) -> None:
    assert extract_json(reply) == expected


@pytest.mark.parametrize(("reply", "kind", "expected"), [
    ('See [1]. Answer: {"route": "a"}', dict, {"route": "a"}),
    ('{"note": 1} then [{"task": "t"}]', list, [{"task": "t"}]),
    ('[1] and {"tasks": []}', (dict,), {"tasks": []}),
])
def test_kind_skips_other_values(reply: str, kind: Any, expected: Any) -> None:
    assert extract_json(reply, kind=kind) == expected


@pytest.mark.parametrize(("reply", "kind", "reason"), [
    ("", None, "empty"),
    ("   \n", None, "empty"),
    ("I think the billing route.", None, "no JSON found"),
    ("{route: billing}", None, "no JSON found"),
    ('{"unterminated": "x"', None, "no JSON found"),
    ("[1, 2]", dict, "no JSON object found"),
    ('{"a": 1}', list, "no JSON array found"),
])
def test_raises_value_error_with_reason(reply: str, kind: Any, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        extract_json(reply, kind=kind)
