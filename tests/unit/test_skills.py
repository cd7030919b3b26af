"""Skills: read at load time from the spec's file (bounded, never out of a skill's
directory), carried in the spec, served by the `Skill` tool with strands-cli's texts."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import SpecError
from strands_durable.sessions.start import spec_json
from strands_durable.spec import skills as skills_mod
from strands_durable.spec.loader import load_spec_data, load_spec_file, load_spec_text
from strands_durable.spec.model import parse_spec
from strands_durable.spec.skills import read_skill_dir, skill_library
from strands_durable.worker.tools.skill import SKILL_TOOL, answer, skill_tool

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "skills"
SPEC = FIXTURE / "skills-notes.yaml"


def spec_with_skills(skills: list[dict[str, Any]]) -> str:
    lines = ["version: 0", "name: s", "runtime: {provider: scripted}",
             "agents: {a: {prompt: A.}}",
             "pattern: {type: chain, config: {steps: [{agent: a, input: x}]}}", "skills:"]
    for skill in skills:
        lines.append(f"  - {json.dumps(skill)}")
    return "\n".join(lines) + "\n"


def load_dir(tmp_path: Path, skill_path: str) -> Any:
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_with_skills([{"id": "s", "path": skill_path}]))
    return load_spec_file(spec)


def call(spec: Any, skill_id: Any, messages: list[dict[str, Any]] | None = None
         ) -> tuple[str, str]:
    skills = {skill.id: skill for skill in spec.skills}
    result = answer({"toolUseId": "t9", "name": SKILL_TOOL, "input": {"skill_id": skill_id}},
                    skills, skill_library(spec).skills, messages or [])
    return result["status"], result["content"][0]["text"]


# -- reading ----------------------------------------------------------------------

def test_the_loader_carries_every_markdown_file_of_each_skill() -> None:
    loaded = load_spec_file(SPEC)
    library = skill_library(loaded.spec).skills
    assert sorted(library["style-guide"].files) == ["SKILL.md", "headlines.md"]
    assert sorted(library["glossary"].files) == ["README.md"]
    assert library["style-guide"].files["SKILL.md"].startswith("# Style guide")
    # What workers rebuild from the stored spec still has them.
    assert skill_library(parse_spec(spec_json(loaded))) == skill_library(loaded.spec)


def test_a_skill_file_is_part_of_the_spec_hash(tmp_path: Path) -> None:
    copy = tmp_path / "case"
    shutil.copytree(FIXTURE, copy)
    before = load_spec_file(copy / SPEC.name).spec_hash
    assert load_spec_file(copy / SPEC.name).spec_hash == before
    (copy / "skills" / "style-guide" / "headlines.md").write_text("# Headlines\n\nShort.\n")
    assert load_spec_file(copy / SPEC.name).spec_hash != before


def test_a_spec_sent_as_text_with_skills_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        load_spec_text(SPEC.read_text(), "api")
    assert err.value.path == "skills"
    assert "relative to the spec's file" in err.value.problem
    with pytest.raises(SpecError):
        load_spec_data({"skills": [{"id": "x", "path": "."}],
                        **load_spec_text(spec_with_skills([])).spec.model_dump(
                            by_alias=True, exclude_none=True, exclude={"skills"})})


def test_a_spec_cannot_smuggle_a_skill_library_of_its_own(tmp_path: Path) -> None:
    text = spec_with_skills([]).replace("skills:\n", "skill_library: {skills: {}}\n")
    with pytest.raises(SpecError, match="skill_library"):
        load_spec_text(text)


def test_a_missing_skill_directory_loads_and_the_tool_says_so(tmp_path: Path) -> None:
    # strands-cli loads such a spec (tests/fixtures/valid/with-skills.yaml) and fails
    # only when the agent asks for the skill.
    spec = load_dir(tmp_path, "./skills/python.md").spec
    assert skill_library(spec).skills["s"].found is False
    assert call(spec, "s") == ("error", "Error: Skill 's' has no SKILL.md or README.md file "
                                        "at path: ./skills/python.md")


def test_an_absolute_skill_path_is_read_as_strands_cli_reads_it(tmp_path: Path) -> None:
    spec = load_dir(tmp_path, str(FIXTURE / "skills" / "glossary")).spec
    assert sorted(skill_library(spec).skills["s"].files) == ["README.md"]


def test_a_symlink_out_of_the_skill_directory_is_refused(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("ok")
    (tmp_path / "secret.md").write_text("the fleet's secret")
    os.symlink(tmp_path / "secret.md", skill / "notes.md")
    with pytest.raises(SpecError) as err:
        load_dir(tmp_path, "./skill")
    assert err.value.path == "skills[0].path"
    assert "'notes.md' is a symlink that leads out of the skill directory" in err.value.problem
    (skill / "notes.md").unlink()
    os.symlink(tmp_path, skill / "up")  # a linked directory leading out
    with pytest.raises(SpecError, match="'up' is a symlink"):
        load_dir(tmp_path, "./skill")


def test_a_symlink_inside_the_skill_directory_is_read(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_text("ok")
    os.symlink(skill / "SKILL.md", skill / "alias.md")
    files = read_skill_dir(skill, "spec", "skills[0].path").files
    assert files == {"SKILL.md": "ok", "alias.md": "ok"}


def test_hidden_entries_deep_directories_and_other_files_are_skipped(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    deep = skill / "a" / "b" / "c" / "d" / "e"
    deep.mkdir(parents=True)
    (skill / ".git").mkdir()
    (skill / ".git" / "x.md").write_text("hidden")
    (skill / "a" / "b" / "mod.md").write_text("nested")
    (deep / "too-deep.md").write_text("deep")
    (skill / "tool.py").write_text("print()")
    assert read_skill_dir(skill, "spec", "w").files == {"a/b/mod.md": "nested"}


def test_a_huge_skill_file_is_refused(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_bytes(b"x" * (skills_mod.MAX_SKILL_FILE_BYTES + 1))
    with pytest.raises(SpecError, match=r"'SKILL.md' is 262,145 bytes; a skill file may be "
                                        r"at most 262,144"):
        load_dir(tmp_path, "./skill")


def test_too_many_files_entries_or_bytes_are_refused(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    for i in range(skills_mod.MAX_SKILL_FILES + 1):
        (skill / f"m{i}.md").write_text("m")
    with pytest.raises(SpecError, match="more than 64 Markdown files"):
        load_dir(tmp_path, "./skill")
    monkeypatch.setattr(skills_mod, "MAX_SKILL_ENTRIES", 10)
    with pytest.raises(SpecError, match="more than 10 entries"):
        load_dir(tmp_path, "./skill")
    monkeypatch.setattr(skills_mod, "MAX_SKILL_ENTRIES", 2_000)
    monkeypatch.setattr(skills_mod, "MAX_SKILL_FILES", 100)
    monkeypatch.setattr(skills_mod, "MAX_SKILLS_TOTAL_BYTES", 10)
    with pytest.raises(SpecError, match="pass 10 bytes in all"):
        load_dir(tmp_path, "./skill")


def test_a_skill_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    skill = tmp_path / "skill"
    skill.mkdir()
    (skill / "SKILL.md").write_bytes(b"\xff\xfe")
    with pytest.raises(SpecError, match=r"'SKILL\.md' is not UTF-8 text"):
        load_dir(tmp_path, "./skill")


def test_a_skill_id_defined_twice_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_with_skills([{"id": "s", "path": "."}, {"id": "s", "path": "."}]))
    with pytest.raises(SpecError, match="skill id 's' is defined twice"):
        load_spec_file(spec)


# -- the Skill tool ---------------------------------------------------------------

def test_skill_answers_as_strands_cli_formats_it() -> None:
    spec = load_spec_file(SPEC).spec
    status, text = call(spec, "style-guide")
    assert status == "success"
    assert text == ("# Loaded Skill: style-guide\n\n**Description**: House style for every "
                    "text we publish\n\n---\n\n# Style guide\n\nWrite in short sentences. "
                    "Use the active voice. Never use the word \"synergy\".\n")
    assert call(spec, "style-guide/headlines") == (
        "success", "# Loaded Skill Module: style-guide/headlines\n\n---\n\n# Headlines\n\n"
                   "A headline has at most eight words and no full stop.\n")
    # README.md stands in for a missing SKILL.md; no description, no description line.
    assert call(spec, "glossary")[1].startswith("# Loaded Skill: glossary\n\n---\n\n# Glossary")


def test_skill_errors_are_strands_clis() -> None:
    spec = load_spec_file(SPEC).spec
    assert call(spec, "") == ("error", "Error: skill_id parameter is required")
    assert call(spec, 7) == ("error", "Error: skill_id parameter is required")
    assert call(spec, "pdf") == ("error", "Error: Skill 'pdf' not found in workflow "
                                          "specification.\nAvailable skills: style-guide, "
                                          "glossary")
    assert call(spec, "style-guide/tables") == (
        "error", "Error: Module 'tables' not found in skill 'style-guide'.\nExpected file: "
                 "./skills/style-guide/tables.md\nAvailable modules: headlines")


@pytest.mark.parametrize("hostile", ["style-guide/../glossary/README", "style-guide//etc/passwd",
                                     "/etc/passwd", "style-guide/../../../etc/passwd"])
def test_a_hostile_module_name_finds_nothing(hostile: str) -> None:
    status, text = call(load_spec_file(SPEC).spec, hostile)
    assert status == "error"
    assert "not found" in text


def test_a_skill_loaded_earlier_in_the_conversation_is_not_loaded_again() -> None:
    spec = load_spec_file(SPEC).spec
    _, loaded = call(spec, "style-guide")
    earlier = [
        {"role": "assistant", "content": [{"toolUse": {
            "toolUseId": "t1", "name": SKILL_TOOL, "input": {"skill_id": "style-guide"}}}]},
        {"role": "user", "content": [{"toolResult": {
            "toolUseId": "t1", "status": "success", "content": [{"text": loaded}]}}]},
    ]
    assert call(spec, "style-guide", earlier) == (
        "success", "Skill 'style-guide' is already loaded. No need to reload it.")
    # A module is tracked apart from its skill, and a failed load does not count.
    assert call(spec, "style-guide/headlines", earlier)[1].startswith("# Loaded Skill Module")
    failed = [earlier[0], {"role": "user", "content": [{"toolResult": {
        "toolUseId": "t1", "status": "error", "content": [{"text": "Error: x"}]}}]}]
    assert call(spec, "style-guide", failed)[1].startswith("# Loaded Skill: style-guide")


def test_the_skill_tool_is_a_strands_tool_named_skill() -> None:
    tool = skill_tool(load_spec_file(SPEC).spec)
    assert tool.tool_name == "Skill"
    assert tool.tool_spec["inputSchema"]["json"]["required"] == ["skill_id"]
