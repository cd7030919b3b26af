from pathlib import Path

import pytest

from strands_durable.planning.artifacts import (
    ArtifactPathError,
    safe_target,
    write_artifacts,
)


@pytest.mark.parametrize("name", ["../escape.md", "/etc/passwd", "a/../../b.md", "", "  "])
def test_paths_outside_the_output_dir_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ArtifactPathError):
        safe_target(tmp_path, name)


def test_nested_paths_are_created_inside(tmp_path: Path) -> None:
    written = write_artifacts({"./reports/a.md": "A", "b.md": "B"}, tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == ["b.md",
                                                                           "reports/a.md"]
    assert (tmp_path / "reports" / "a.md").read_text() == "A"


def test_one_bad_path_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(ArtifactPathError):
        write_artifacts({"good.md": "ok", "../bad.md": "no"}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("rendered", "name"), [
    ("./artifacts/my report.md", "artifacts/my_report.md"),
    ("spec@#$%name.md", "spec_name.md"),
    ("Über straße.md", "Über_straße.md"),
    (".hidden/..x", "hidden/x"),
    ("a\\b c.md", "a/b_c.md"),
    ("x/" + "y" * 150 + ".md", "x/" + "y" * 100),
])
def test_artifact_names_are_sanitized_as_strands_cli_does(rendered: str, name: str) -> None:
    from strands_durable.planning.artifacts import artifact_name

    assert artifact_name(rendered) == name


@pytest.mark.parametrize("rendered", ["../escape.md", "/etc/passwd", "a/../../b.md"])
def test_sanitizing_keeps_what_the_path_rules_refuse(rendered: str, tmp_path: Path) -> None:
    from strands_durable.planning.artifacts import artifact_name

    with pytest.raises(ArtifactPathError):
        safe_target(tmp_path, artifact_name(rendered))
