"""`durable` as a new user meets it, run as real processes on a private local store
(a real redis-server in DURABLE_HOME): piped tables keep ids whole, `--json` on every
command (errors too), `--version`, `validate`, `--script` merged, the token table,
`sessions delete` confirmation, and on a pseudo-terminal the progress line (with what the
running step's model has written so far) and folding."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, REPO, StepBreakpoints
from helpers.held_llm import FIRST, held_llm
from local_store import DURABLE, RUN_TIMEOUT_S, LocalHome, private_home

GRAPH = EXAMPLES / "graph-code-review-loop.yaml"
CHAIN = EXAMPLES / "chain-research.yaml"
REFS_DEMO = REPO / "tests/fixtures/strands-cli-refs/examples/atomic-ref-demo-openai.yaml"
UNKNOWN = "00000000-0000-4000-8000-000000000000"
ONE_RULE = 'rules:\n  - agent: coder\n    contains: changelog\n    reply: "Shipped by one rule."\n'


@pytest.fixture
def home(tmp_path: Path) -> Iterator[LocalHome]:
    yield from private_home(tmp_path)


def durable(home: LocalHome, *args: str | Path, cwd: Path = REPO, **env: str
            ) -> subprocess.CompletedProcess[str]:
    """Piped, as in a script: stdout and stderr captured, no terminal on stdin."""
    return subprocess.run([*DURABLE, *map(str, args)], cwd=cwd, env=home.env(**env),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def json_error(result: subprocess.CompletedProcess[str], rc: int, code: str) -> str:
    assert result.returncode == rc, (result.stdout, result.stderr)
    assert "Traceback" not in result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["error"]["code"] == code, doc
    return str(doc["error"]["message"])


def graph_session(home: LocalHome) -> str:
    return str(json.loads(ok(durable(home, "run", GRAPH, "--json")))["session_id"])


def test_piped_tables_keep_ids_and_step_keys_whole(home: LocalHome) -> None:
    run = ok(durable(home, "run", GRAPH))
    sid = re.search(r"session (\S+) ", run)
    assert sid is not None and len(sid.group(1)) == 36
    sid_text = sid.group(1)
    assert "running" not in run and "waiting" not in run  # no progress line in a pipe
    listed = ok(durable(home, "sessions", "list"))
    history = ok(durable(home, "history", sid_text))
    checkpoints = ok(durable(home, "checkpoints", sid_text))
    status = ok(durable(home, "status", sid_text))
    for table in (listed, history, checkpoints, status):
        assert "…" not in table
    assert any(sid_text in line and "graph-code-review-loop" in line
               for line in listed.splitlines())
    assert any("node:release:1" in line and "step_completed" in line
               for line in history.splitlines())
    assert any("node:release:1" in line and "coder" in line
               for line in checkpoints.splitlines())
    assert sid_text in status


def test_token_usage_is_a_table(home: LocalHome) -> None:
    sid = graph_session(home)
    doc = json.loads(ok(durable(home, "status", sid, "--json")))
    usage = doc["token_usage"]
    status = ok(durable(home, "status", sid))
    assert "{'" not in status and "by_agent" not in status
    header = next(line for line in status.splitlines() if "agent" in line and "total" in line)
    assert re.findall(r"\w+", header) == ["agent", "in", "out", "total"]
    rows = {cells[0]: cells[1:] for cells in (re.findall(r"[\w-]+", line)
                                              for line in status.splitlines()) if cells}
    for agent, total in usage["by_agent"].items():
        agent_in, agent_out, agent_total = map(int, rows[agent])
        assert agent_in + agent_out == agent_total == total
    assert rows["total"] == [str(usage["total_input_tokens"]),
                             str(usage["total_output_tokens"]),
                             str(usage["total_input_tokens"] + usage["total_output_tokens"])]


def test_every_command_answers_json(home: LocalHome, tmp_path: Path) -> None:
    sid = graph_session(home)
    docs: dict[str, Any] = {}
    for args in (("status", sid), ("history", sid), ("checkpoints", sid),
                 ("checkpoints", sid, "2"), ("sessions", "list"), ("sessions", "show", sid),
                 ("wait", sid), ("watch", sid), ("validate", GRAPH),
                 ("sessions", "cleanup", "--max-age-days", "1", "--dry-run")):
        docs[args[0] + ":" + ":".join(map(str, args[1:]))] = json.loads(
            ok(durable(home, *args, "--json")))
    assert docs[f"wait:{sid}"] == docs[f"watch:{sid}"] == {
        "session_id": sid, "status": "completed", "error": None, "paused_reason": None,
        "timed_out": False}
    assert docs[f"validate:{GRAPH}"]["parts"] == {"nodes": 3}
    forked = json.loads(ok(durable(home, "resume", sid, "--from-checkpoint", "2", "--json")))
    assert forked["forked_from"] == sid and len(forked["session_id"]) == 36
    paused = json.loads(ok(durable(home, "pause", forked["session_id"], "--json")))
    assert paused == {"session_id": forked["session_id"], "status": "paused"}
    cancelled = json.loads(ok(durable(home, "cancel", forked["session_id"], "--json")))
    assert cancelled["status"] == "cancelled"
    deleted = json.loads(ok(durable(home, "sessions", "delete", sid, "--yes", "--json")))
    assert deleted == {"session_id": sid, "deleted": True}


def test_errors_as_json_keep_their_exit_codes(home: LocalHome, tmp_path: Path) -> None:
    sid = graph_session(home)
    assert UNKNOWN in json_error(durable(home, "status", UNKNOWN, "--json"), 1,
                                 "session_not_found")
    assert "'nope'" in json_error(durable(home, "history", "nope",
                                          "--json"), 2, "invalid_id")
    assert "--bogus" in json_error(durable(home, "status", sid, "--json", "--bogus"), 2,
                                   "invalid_input")
    assert "completed" in json_error(durable(home, "pause", sid, "--json"), 1,
                                     "invalid_transition")
    bad = tmp_path / "bad.yaml"
    bad.write_text(GRAPH.read_text().replace("max_iterations: 4", "max_iterations: many"))
    message = json_error(durable(home, "run", bad, "--json"), 2, "invalid_spec")
    assert "bad.yaml" in message and "max_iterations" in message
    json_error(durable(home, "submit", bad, "--json"), 2, "invalid_spec")
    json_error(durable(home, "run", "--json"), 2, "invalid_input")
    for role in ("api", "scheduler"):  # a bad setting stops a role before it serves
        assert "DURABLE_SHARDS" in json_error(
            durable(home, role, "--json", DURABLE_SHARDS="abc"), 2, "misconfigured")
    # Without --json the same errors are one line on stderr, stdout empty.
    plain = durable(home, "status", UNKNOWN)
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.strip() == f"error: session '{UNKNOWN}' not found"


def test_version(home: LocalHome) -> None:
    from strands_durable.version import DATA_FORMAT, __version__

    assert ok(durable(home, "--version")).strip() == \
        f"durable (strands-durable) {__version__}, data format {DATA_FORMAT}"


def test_validate_loads_as_run_does(home: LocalHome, tmp_path: Path) -> None:
    line = ok(durable(home, "validate", GRAPH)).strip()
    assert line == (f"valid: graph-code-review-loop (graph) from {GRAPH}: 2 agents, 3 nodes")
    # $ref agents resolve relative to the spec, wherever the command runs.
    demo = ok(durable(home, "validate", REFS_DEMO, "--provider", "scripted", "--var",
                      "subject=Outage", "--var", "body=Down", cwd=tmp_path))
    assert demo.startswith("valid: ") and "2 agents" in demo
    missing_var = durable(home, "validate", REFS_DEMO, cwd=tmp_path)
    assert missing_var.returncode == 2 and "--var subject=VALUE" in missing_var.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(CHAIN.read_text().replace("{{ steps[1].response }}\n          Write",
                                             "{{ stepz[1].response }}\n          Write"))
    validated, ran = durable(home, "validate", bad), durable(home, "run", bad)
    assert validated.returncode == ran.returncode == 2
    assert validated.stderr == ran.stderr and "stepz" in validated.stderr
    assert "Traceback" not in validated.stderr
    assert home.sessions() == []  # validate stores nothing (and the bad run neither)


def test_script_merges_into_the_specs_rules(home: LocalHome, tmp_path: Path) -> None:
    one_rule = tmp_path / "one-rule.yaml"
    one_rule.write_text(ONE_RULE)
    merged = json.loads(ok(durable(home, "run", GRAPH, "--script", one_rule, "--json")))
    assert merged["status"] == "completed" and merged["steps_committed"] == 7
    assert merged["final_response"] == "Shipped by one rule."
    # Replacing drops the spec's reviewer rules: the review never approves.
    replaced = durable(home, "run", GRAPH, "--script", one_rule, "--script-replace")
    assert replaced.returncode == 1 and "max_iterations" in replaced.stderr


def test_delete_asks_and_refuses_without_a_terminal(home: LocalHome) -> None:
    sid = graph_session(home)
    refused = durable(home, "sessions", "delete", sid)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert [s["session_id"] for s in home.sessions()] == [sid]
    assert durable(home, "sessions", "delete", UNKNOWN).returncode == 1  # not found first
    code, screen = on_terminal(home, "sessions", "delete", sid, answer=b"n\n")
    assert code == 1 and "[y/N]" in screen and [s["session_id"] for s in home.sessions()]
    code, screen = on_terminal(home, "sessions", "delete", sid, answer=b"y\n")
    assert code == 0 and f"deleted {sid}" in screen and home.sessions() == []


def test_on_a_terminal_a_progress_line_and_folded_ids(home: LocalHome,
                                                      tmp_path: Path) -> None:
    # Each step waits at a breakpoint until its progress line is on the screen: the
    # line is seen while the step runs, whatever the machine's speed.
    breakpoints = StepBreakpoints(tmp_path / "breakpoints")
    shown = [("step:0", "researcher"), ("step:1", "analyst"), ("step:2", "writer")]
    for key, _ in shown:
        breakpoints.set("chain-research", key)
    release = [(f"running {key} {agent} ",
                functools.partial(breakpoints.clear, "chain-research", key))
               for key, agent in shown]
    code, screen = on_terminal(home, "run", CHAIN, release=release,
                               DURABLE_BREAKPOINT_DIR=str(breakpoints.directory))
    assert code == 0, screen
    for key, agent in shown:
        assert f"running {key} {agent} " in screen
    sid = re.search(r"session (\S{36})", screen)
    assert sid is not None
    code, screen = on_terminal(home, "sessions", "list", columns=50)
    assert code == 0 and "…" not in screen
    cells = "".join(re.findall(r"^│ ?([0-9a-f-]+)", screen, flags=re.MULTILINE))
    assert sid.group(1) in cells  # folded over lines, every character there


def test_on_a_terminal_the_progress_line_shows_what_the_model_writes(
        home: LocalHome, tmp_path: Path,
        allow_provider_host: Callable[[str, str], None]) -> None:
    # The model writes half its reply and holds the rest until that half is on the
    # screen: seen while the step runs, whatever the machine's speed.
    with held_llm(allow_provider_host) as held:
        spec = tmp_path / "live.yaml"
        spec.write_text(f"""
version: 0
name: live
runtime: {{provider: openai, model_id: gpt-live, host: "{held.url('/v1')}"}}
agents: {{writer: {{prompt: "You write."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: writer, input: "say hello"}}]}}}}
""")
        code, screen = on_terminal(
            home, "run", spec, release=[(": " + "".join(FIRST), held.go.set)],
            OPENAI_API_KEY="test-key", DURABLE_OPENAI_HOSTS=held.url("/v1"))
    assert code == 0, screen
    assert "running step:0 writer " in screen and ": Hello wor" in screen
    assert "Hello world!" in screen  # the committed step, printed as always


def on_terminal(home: LocalHome, *args: str | Path, answer: bytes = b"",
                columns: int = 100,
                release: Sequence[tuple[str, Callable[[], None]]] = (),
                **env_extra: str) -> tuple[int, str]:
    """Run `durable ARGS` on a pseudo-terminal `columns` wide; its exit code and screen.
    `release`: (text, action) in order, each action run once its text is on the screen."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in home.env(**env_extra).items() if k not in ("COLUMNS", "LINES")}
    process = subprocess.Popen([*DURABLE, *map(str, args)], cwd=REPO, env=env,
                               stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    if answer:
        os.write(master, answer)  # the terminal holds it until the prompt reads it
    pending = list(release)
    chunks: list[bytes] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        if not select.select([master], [], [], 1.0)[0]:
            continue
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not data:
            break
        chunks.append(data)
        while pending and pending[0][0] in _plain(b"".join(chunks)):
            pending.pop(0)[1]()
    os.close(master)
    # Its terminal closed is not its exit: a loaded machine may take seconds more to end
    # it (its local store's stop). Killed only past the deadline: the code says -9.
    try:
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait(timeout=RUN_TIMEOUT_S)
    return code, _plain(b"".join(chunks))


def _plain(raw: bytes) -> str:
    """A terminal's bytes as text: no escape sequences, no carriage returns."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode(errors="replace")).replace("\r", "")


if sys.platform != "linux":  # pragma: no cover - pty and /proc are Linux here
    pytestmark = pytest.mark.skip("needs Linux")
