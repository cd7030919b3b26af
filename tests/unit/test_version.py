"""One version, spelled in core/version.py: pyproject.toml reads it (setuptools' dynamic
version), CHANGELOG.md's newest entry names it, and the API's OpenAPI document shows it."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path

from strands_durable.version import DATA_FORMAT, __version__

REPO = Path(__file__).resolve().parents[2]


def test_the_version_is_semantic() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    assert isinstance(DATA_FORMAT, int) and DATA_FORMAT >= 1


def test_pyproject_reads_the_version_from_the_module() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "strands_durable.version.__version__"}


def test_setuptools_resolves_the_same_version() -> None:
    from setuptools.config.pyprojecttoml import read_configuration

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # [tool.setuptools] is "beta" to setuptools
        config = read_configuration(REPO / "pyproject.toml", expand=True)
    assert config["project"]["version"] == __version__


def test_the_changelog_s_newest_entry_is_this_version() -> None:
    entries = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    # What main has that no release has yet sits above, under "Unreleased" (at most one).
    releases = entries[1:] if entries[0] == "Unreleased" else entries
    assert releases[0] == __version__
    assert "Unreleased" not in releases
    assert len(entries) == len(set(entries))


def test_the_api_document_shows_the_version() -> None:
    from strands_durable.api.app import create_app
    from strands_durable.settings import DurableSettings

    app = create_app(DurableSettings(redis_url="memory://"))
    assert app.version == __version__


def test_the_helm_chart_ships_this_release() -> None:
    """The chart's appVersion is the release it deploys (and its own version moves with
    it): a release that forgets the chart fails here."""
    from pathlib import Path

    import yaml

    from strands_durable.version import __version__

    chart = yaml.safe_load((Path(__file__).resolve().parents[2] / "helm" / "strands-durable"
                            / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    assert chart["version"] == __version__
