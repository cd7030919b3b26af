"""The documentation: a README that is a front door, a MkDocs site in docs/ that builds with
--strict (a broken link or a page left out of the nav fails), references generated from the
code and committed up to date, and examples that name no machine's paths."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RUN_COMMAND = "$ bash install.sh && .venv/bin/durable run examples/chain-research.yaml --out ./out"


def _generator() -> ModuleType:
    path = ROOT / "docs" / "reference" / "generate.py"
    spec = importlib.util.spec_from_file_location("docs_reference_generate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_is_a_front_door() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    assert RUN_COMMAND in text.splitlines()
    assert "$ bash tests/run.sh" in text.splitlines()
    # No hand-kept numbers: the suite's count lives nowhere in the front door.
    assert not re.search(r"\d[\d,]* passed", text)
    for page in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / page).is_file(), page


def test_committed_references_match_the_code() -> None:
    stale = _generator().stale()
    assert stale == [], (f"docs/reference/{stale} differ from the code: run "
                         ".venv/bin/python docs/reference/generate.py and commit them")


def test_references_name_every_setting_and_command() -> None:
    from strands_durable.settings import DurableSettings

    reference = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    for name in DurableSettings.model_fields:
        assert f"`DURABLE_{name.upper()}`" in reference
    cli = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for command in ("run", "submit", "validate", "requeue", "api", "scheduler", "sessions"):
        assert f"`durable {command}`" in cli
    api = (ROOT / "docs" / "reference" / "api.md").read_text()
    assert "### `POST /v1/sessions`" in api


def test_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").is_file()


MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:tmp|work|root)/|/home/(?!you/)\w")


def test_no_machine_paths_in_the_docs() -> None:
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}:{number}: {line.strip()}"
             for page in pages
             for number, line in enumerate(page.read_text().splitlines(), 1)
             if MACHINE_PATH.search(line)]
    assert found == []
