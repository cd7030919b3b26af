"""The previous release's code beside this one, with no virtualenv of its own: its tree
(`git archive` of its commit into a temp dir) and a farm of links laid out as the
editable install lays out this checkout (`strands_durable/` = `core/*`, with `store/`,
`worker/`, `api/`... linked in as subpackages, from the old `pyproject.toml`'s
package-dir), put first on PYTHONPATH. `python -m arq strands_durable.worker.WorkerSettings`
and `python -m strands_durable.api.cli ...` then run the OLD code on this venv's libraries
(the lock differs only by packages the old code does not import). A `dist-info` in the
farm makes `importlib.metadata` (the old `durable --version`) say the old version."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from helpers import REPO

# The last release that landed: it calls itself 0.1.0 and knows nothing of data formats.
PREVIOUS_COMMIT = "9d516de"
PREVIOUS_VERSION = "0.1.0"


def end_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill what is left of an ended process's group (processes it started)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class CommitMissing(Exception):
    """The commit is not in this repository (a shallow clone)."""


@dataclass(frozen=True)
class Release:
    """Code that processes run: `site` first on PYTHONPATH (None: this checkout, as the
    venv's editable install has it), run from `root`."""

    name: str
    root: Path
    site: Path | None = None

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.site is not None:
            parts = [str(self.site), *[p for p in base.get("PYTHONPATH", "").split(":") if p]]
            env["PYTHONPATH"] = ":".join(parts)
        else:
            env.pop("PYTHONPATH", None)
        return env

    def popen(self, args: list[str], base: dict[str, str], log: Path
              ) -> subprocess.Popen[bytes]:
        # A group of its own: the 0.1.0 API's render processes outlive it (fixed since),
        # and end_group() ends them with it.
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, *args], cwd=self.root,
                                    env=self.env(base), stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def run(self, args: list[str], base: dict[str, str] | None = None,
            ) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], cwd=self.root,
                              env=self.env(base if base is not None else dict(os.environ)),
                              capture_output=True, text=True, timeout=120)

    def worker(self, base: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        return self.popen(["-m", "arq", "strands_durable.worker.WorkerSettings"], base, log)

    def scheduler(self, base: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
        return self.popen(["-m", "strands_durable.api.cli", "scheduler"], base, log)

    def api(self, base: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
        return self.popen(["-m", "strands_durable.api.cli", "api", "--host", "127.0.0.1",
                           "--port", str(port)], base, log)

    def imported_from(self) -> tuple[str, str]:
        """(strands_durable.__file__, the version importlib.metadata reports), as a
        process of this release sees them."""
        probe = self.run(["-c", "import strands_durable, importlib.metadata as m; "
                                "print(strands_durable.__file__); "
                                "print(m.version('strands-durable'))"])
        if probe.returncode != 0:
            raise AssertionError(f"{self.name} does not import:\n{probe.stderr}")
        path, version = probe.stdout.split()
        return path, version


CURRENT = Release("current", REPO)


def has_commit(commit: str = PREVIOUS_COMMIT) -> bool:
    found = subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=REPO,
                           capture_output=True)
    return found.returncode == 0


def build_previous_release(where: Path, commit: str = PREVIOUS_COMMIT,
                           version: str = PREVIOUS_VERSION) -> Release:
    """The release at `commit`, extracted under `where` (`where/tree`) with its farm of
    links (`where/site`). Raises CommitMissing if the repository lacks the commit."""
    if not has_commit(commit):
        raise CommitMissing(f"commit {commit} is not in this repository (a shallow clone?)")
    tree, site = where / "tree", where / "site"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO,
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(tree, filter="data")
    _link_farm(tree, site)
    dist = site / f"strands_durable-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: strands-durable\nVersion: {version}\n")
    return Release(f"strands-durable {version} ({commit})", tree, site)


def _link_farm(tree: Path, site: Path) -> None:
    """`site/strands_durable` as the old pyproject's package-dir maps the tree's folders."""
    setuptools = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping: dict[str, str] = setuptools["package-dir"]
    package = site / "strands_durable"
    package.mkdir(parents=True)
    for entry in sorted((tree / mapping["strands_durable"]).iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != "strands_durable":
            target = package / name.removeprefix("strands_durable.").replace(".", "/")
            if not target.exists():
                target.symlink_to(tree / folder)
    missing = [name for name in setuptools["packages"]
               if not (site / name.replace(".", "/") / "__init__.py").exists()]
    if missing:
        raise AssertionError(f"the farm lacks packages {missing}")
