"""strands-cli's own corpus, run offline: every spec of its `examples/`,
`tests/fixtures/valid/` and `tests/fixtures/invalid/` (verbatim copies in
tests/fixtures/strands-cli-corpus/) takes the outcome its table says
(tests/fixtures/strands-cli-corpus/EXPECTED.yaml): completed, paused (HITL), or refused
with a message naming what and where. Each runs as a user would run it offline:
`durable run FILE --provider scripted [--script RULES] [--var K=V ...] --ephemeral`
(the in-process store), with the fleet's default tool policy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Literal

import pytest
import yaml
from click.testing import CliRunner
from helpers import FIXTURES
from helpers.cli import durable
from pydantic import BaseModel, ConfigDict, Field, model_validator

from strands_durable.errors import SpecError
from strands_durable.settings import current_limits, current_tool_policy
from strands_durable.spec.loader import load_spec_file

CORPUS = FIXTURES / "strands-cli-corpus"
RULES = FIXTURES / "scripts" / "corpus"
MIRROR = Path("/work/.mirror/ThomasRohde+strands-cli/repo")
EXIT = {"completed": 0, "refused": 2, "paused": 3}
runner = CliRunner()


class Expected(BaseModel):
    """One row of the table: how to run a corpus file and what must come of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    outcome: Literal["completed", "paused", "refused"]
    # For `refused`: a substring of the message (it names the field and the problem).
    message: str | None = None
    # For `paused`: a substring of the HITL prompt shown to the user.
    prompt: str | None = None
    vars: dict[str, str] = Field(default_factory=dict)
    script: str | None = None  # a file under tests/fixtures/scripts/corpus/
    # Step keys that must have committed (the route, the loop, the accepted draft...).
    steps: list[str] = Field(default_factory=list)
    # Step keys that must not have committed (the route not taken).
    not_steps: list[str] = Field(default_factory=list)
    # Submitted as written (its own providers) to a fleet with the default policy: the
    # refusal, when it has one.
    submit_refused: str | None = None
    # A section whose fidelity another change owns: the outcome recorded is today's.
    section: str | None = None
    why: str | None = None

    @model_validator(mode="after")
    def _message_for_refusals(self) -> Expected:
        if (self.outcome == "refused") != (self.message is not None):
            raise ValueError("`message` goes with `refused`, and only with it")
        return self


def _table() -> dict[str, Expected]:
    raw = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text(encoding="utf-8"))
    return {name: Expected.model_validate(row) for name, row in raw.items()}


TABLE = _table()


def corpus_files() -> list[str]:
    globs = ("examples/*.yaml", "tests/fixtures/valid/*.yaml", "tests/fixtures/invalid/*.yaml")
    return sorted(str(p.relative_to(CORPUS)) for g in globs for p in CORPUS.glob(g))


@pytest.fixture(autouse=True)
def _offline_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fleet's defaults: no Redis URL, the default tool policy. The telemetry rows'
    collector (localhost:4317) is not there offline and exporting to it only retries
    until its timeout: traces are off here (tests/integration has a real receiver)."""
    for name in list(os.environ):
        if name.startswith(("DURABLE_", "OTEL_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    current_limits.cache_clear()
    current_tool_policy.cache_clear()


def durable_run(name: str, row: Expected, out_dir: Path) -> tuple[int, str]:
    args = ["run", str(CORPUS / name), "--provider", "scripted", "--ephemeral",
            "--out", str(out_dir)]
    if row.script:
        args += ["--script", str(RULES / row.script)]
    for key, value in row.vars.items():
        args += ["--var", f"{key}={value}"]
    result = runner.invoke(durable(), args, catch_exceptions=False)
    return result.exit_code, result.output


def test_the_table_covers_the_corpus_and_nothing_else() -> None:
    assert corpus_files() == sorted(TABLE)
    scripts = {row.script for row in TABLE.values() if row.script}
    assert scripts == {p.name for p in RULES.glob("*.yaml")}


def test_the_corpus_is_upstreams_unchanged() -> None:
    if not (MIRROR / "HEAD").exists():
        pytest.skip(f"no strands-cli mirror at {MIRROR}")
    commit = (CORPUS / "SOURCE.txt").read_text().split("@ ", 1)[1].split()[0]
    for path in sorted(p for p in CORPUS.rglob("*") if p.is_file()):
        name = str(path.relative_to(CORPUS))
        if name in ("SOURCE.txt", "EXPECTED.yaml"):
            continue
        upstream = subprocess.run(["git", "-C", str(MIRROR), "show", f"{commit}:{name}"],
                                  capture_output=True, check=True).stdout
        assert path.read_bytes() == upstream, name


@pytest.mark.parametrize("name", sorted(n for n, r in TABLE.items() if r.outcome != "refused"))
def test_corpus_spec_submitted_as_written(name: str) -> None:
    """No --provider, the fleet's loader: what `durable submit FILE` would answer."""
    row = TABLE[name]
    if row.submit_refused is None:
        assert load_spec_file(CORPUS / name, row.vars).spec.name
        return
    with pytest.raises(SpecError) as refused:
        load_spec_file(CORPUS / name, row.vars)
    assert row.submit_refused in str(refused.value)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_corpus_spec_takes_its_expected_outcome(name: str, tmp_path: Path) -> None:
    row = TABLE[name]
    code, output = durable_run(name, row, tmp_path)
    flat = " ".join(output.split())
    assert code == EXIT[row.outcome], output
    assert "Traceback" not in output
    if row.message is not None:
        assert " ".join(row.message.split()) in flat, output
    if row.prompt is not None:
        assert " ".join(row.prompt.split()) in flat, output
    committed = {line.split()[1] for line in output.splitlines() if line.startswith("✓ ")}
    assert set(row.steps) <= committed, (sorted(committed), output)
    assert not set(row.not_steps) & committed, (sorted(committed), output)
