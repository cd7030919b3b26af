"""core/models.compact_json: the C encoder made once writes exactly what
json.dumps(value, separators=(",", ":")) writes, and refuses what it refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strands_durable.models import SessionStatus, compact_json

VALUES: list[Any] = [
    {"a": 1, "b": [1, 2.5, None, True, False], "ü": "ünï ✓ \n\t\"\\", "n": {"x": {}}},
    "plain", "", 3, -7, 2**70, 1e300, 0.1, -0.0, float("nan"), float("inf"), float("-inf"),
    [], {}, (1, "two"), {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
    SessionStatus.RUNNING, {"status": SessionStatus.PAUSED, "tags": [SessionStatus.FAILED]},
    {"emoji": "\U0001f600", "control": "\x00\x1f", "surrogate": "\ud800"},
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_writes_what_json_dumps_writes(value: Any) -> None:
    assert compact_json(value) == json.dumps(value, separators=(",", ":"))


@pytest.mark.parametrize("value", [object(), {1, 2}, b"bytes", {"nested": [object()]},
                                   {("tuple", "key"): 1}])
def test_refuses_what_json_dumps_refuses(value: Any) -> None:
    with pytest.raises(TypeError) as expected:
        json.dumps(value, separators=(",", ":"))
    with pytest.raises(TypeError) as caught:
        compact_json(value)
    assert str(caught.value) == str(expected.value)


def test_still_usable_after_a_refusal() -> None:
    with pytest.raises(TypeError):
        compact_json({"a": [1, {"b": object()}]})
    shared = {"k": 1}
    assert compact_json([shared, shared]) == '[{"k":1},{"k":1}]'
