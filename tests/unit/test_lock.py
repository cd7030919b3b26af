"""requirements/constraints.txt, the one lock, agrees with pyproject.toml and with what runs.

Every install path (install.sh, tests/run.sh, the Dockerfile) installs through this lock,
so a dependency that pyproject asks for but the lock lacks, or a lock pin outside
pyproject's bounds, would let a fresh machine resolve a version nobody tested.
"""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

import pytest
from helpers import REPO
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
LOCK = REPO / "requirements" / "constraints.txt"


def locked_versions() -> dict[str, Version]:
    """The pins that apply to this interpreter (universal locks fork on markers)."""
    pins: dict[str, Version] = {}
    for line in LOCK.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        requirement = Requirement(line)
        if requirement.marker and not requirement.marker.evaluate(default_environment()):
            continue
        (spec,) = requirement.specifier
        assert spec.operator == "==", f"lock line not pinned exactly: {line}"
        pins[canonicalize_name(requirement.name)] = Version(spec.version)
    return pins


def declared() -> list[Requirement]:
    optional = PYPROJECT["optional-dependencies"]
    return [Requirement(r) for r in PYPROJECT["dependencies"]
            + [r for extra in optional.values() for r in extra]]


def test_every_declared_dependency_is_locked_within_its_bounds() -> None:
    pins = locked_versions()
    for requirement in declared():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement} is not in {LOCK.name}: regenerate the lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"{LOCK.name} pins {name}=={pins[name]}, outside pyproject's {requirement}")


def test_every_declared_dependency_has_an_upper_bound() -> None:
    unbounded = [str(r) for r in declared()
                 if not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)]
    assert not unbounded, f"no upper bound: {unbounded}"


@pytest.mark.parametrize("name", ["redis", "arq", "strands-agents", "pydantic", "pytest",
                                  "schemathesis", "fastapi", "jinja2"])
def test_this_environment_runs_the_locked_versions(name: str) -> None:
    """The suite itself runs on what the lock says (tests/run.sh installs through it)."""
    installed = Version(metadata.version(name))
    assert installed == locked_versions()[canonicalize_name(name)], (
        f"{name} {installed} is installed but the lock says "
        f"{locked_versions()[canonicalize_name(name)]}: run `bash install.sh --dev`")


def test_the_lock_says_how_it_was_made() -> None:
    assert re.search(r"uv pip compile pyproject.toml .*-o requirements/constraints.txt",
                     LOCK.read_text().splitlines()[1])
