"""`--script FILE` merged into the spec's runtime.script (api/cli/common.py)."""

from __future__ import annotations

from strands_durable.api.cli.common import merge_scripts
from strands_durable.spec.script import ScriptConfig


def script(**fields: object) -> ScriptConfig:
    return ScriptConfig.model_validate(fields)


def test_the_files_rules_come_first_and_the_specs_stay() -> None:
    own = script(delay_s=0.05, rules=[{"agent": "a", "reply": "spec"},
                                      {"agent": "b", "reply": "spec-b"}])
    merged = merge_scripts(own, script(rules=[{"agent": "a", "reply": "file"}]))
    assert [r.reply for r in merged.rules] == ["file", "spec", "spec-b"]
    assert merged.answer_for("a", "hi") == "file"
    assert merged.answer_for("b", "hi") == "spec-b"
    assert merged.delay_s == 0.05  # the file set no delay_s: the spec's stays


def test_a_delay_the_file_sets_replaces_even_zero() -> None:
    own = script(delay_s=0.5, rules=[{"reply": "x"}])
    assert merge_scripts(own, script(delay_s=0)).delay_s == 0
    assert merge_scripts(None, script(delay_s=0.2)).delay_s == 0.2
