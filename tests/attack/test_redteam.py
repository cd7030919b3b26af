"""Findings of a red-team pass over the hardened sandbox, API and CLI (issue 10).

Each test is an attack that got through before its fix: it says what the attacker sent,
and checks the answer is bounded and clear.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers import REPO
from test_sandbox_escapes import chain_spec

from strands_durable.api.limits import MAX_BODY_BYTES
from strands_durable.errors import InvalidId, SpecError, TemplateError
from strands_durable.patterns.json_reply import extract_json
from strands_durable.spec.loader import load_spec_text
from strands_durable.spec.templates import render
from strands_durable.store.keys import check_name

# --- values that are small to write and huge to walk ----------------------------------


def shared_levels(name: str, levels: int, open_: str = "[", close: str = "]",
                  leaf: str = "[1, 2, 3]", item: str = "{}") -> str:
    """`{% set` lines building a value of 10**levels leaves in a few hundred bytes: each
    level is a literal holding the previous one ten times (shared, not copied);
    `item` places it (a mapping's items need keys: "'k{k}': {}")."""
    text = f"{{% set {name}0 = {leaf} %}}"
    for i in range(1, levels + 1):
        below = ", ".join(item.format(f"{name}{i - 1}", k=k) for k in range(10))
        text += f"{{% set {name}{i} = {open_}{below}{close} %}}"
    return text


# Before: each ran one uninterruptible C-level walk of ~10**12 nodes (`==`, `in`, a
# dict key's hash, `unique`'s hash, `max`'s comparisons), holding the GIL for hours, so
# the API's event loop (its loading threads share the GIL) and the worker's lease
# renewal stopped with it. The render deadline is only checked between operations.
SHARED_VALUE_WALKS = {
    "== of two lists": shared_levels("a", 12) + shared_levels("b", 12) + "{{ a12 == b12 }}",
    "in": shared_levels("a", 12) + shared_levels("b", 12) + "{{ a12 in [b12] }}",
    "dict key hash": shared_levels("a", 12, "(", ")", "(1, 2, 3)") + "{{ {a12: 1}|length }}",
    "unique hash": shared_levels("a", 12, "(", ")", "(1, 2, 3)")
    + "{{ [a12]|unique|list|length }}",
    "max": shared_levels("a", 12) + shared_levels("b", 12) + "{{ [a12, b12]|max|length }}",
    "dict literal": shared_levels("a", 12, "{", "}", "{'k': [1, 2, 3]}", "'k{k}': {}")
    + shared_levels("b", 12, "{", "}", "{'k': [1, 2, 3]}", "'k{k}': {}") + "{{ a12 == b12 }}",
    "macro varargs": (
        "{% macro grow(n) %}{% if n %}{{ grow(n - 1, varargs, varargs, varargs, varargs,"
        " varargs, varargs, varargs, varargs, varargs, varargs) }}{% else %}"
        "{{ {varargs: 1}|length }}{% endif %}{% endmacro %}{{ grow(12, (1, 2, 3)) }}"),
}


@pytest.mark.parametrize("template", SHARED_VALUE_WALKS.values(),
                         ids=SHARED_VALUE_WALKS.keys())
def test_a_value_built_from_shared_parts_is_sized_when_built(template: str) -> None:
    assert len(template) < 10_000
    started = time.monotonic()
    with pytest.raises(TemplateError) as info:
        render(template, {}, "pattern.config.steps[0].input")
    assert time.monotonic() - started < 20  # before: hours
    assert "DURABLE_MAX_RENDER_CHARS" in str(info.value)
    assert info.value.where == "pattern.config.steps[0].input"


@pytest.mark.parametrize("template, expected", [
    ("{% set a = [1, 2] %}{% set b = [a, a] %}{{ b == [[1, 2], [1, 2]] }}", "True"),
    ("{% for k, v in {'x': (1, 2)}.items() %}{{ k }}{{ v[1] }}{% endfor %}", "x2"),
    ("{% set a, b = (1, [2]) %}{{ a }}{{ b }}", "1[2]"),
    ("{% macro m() %}{{ varargs|length }}{{ kwargs|length }}{% endmacro %}"
     "{{ m(1, 2, x=3) }}", "21"),
])
def test_small_literals_still_render(template: str, expected: str) -> None:
    assert render(template, {}, "x") == expected


# --- a lone surrogate in a step key ----------------------------------------------------

LONE_SURROGATE_BODY = b'{"step": "\\udfff"}'  # JSON escape: the parsed text is one surrogate


async def test_a_lone_surrogate_step_key_is_a_422(client: httpx.AsyncClient) -> None:
    """Before: the key passed validation, the 409 naming it could not be encoded as UTF-8,
    and the server answered 500 (the ASGI transport re-raised the UnicodeEncodeError)."""
    created = await client.post("/v1/sessions", json={"spec": chain_spec("hi")})
    assert created.status_code == 201, created.text
    sid = created.json()["session_id"]
    answer = await client.post(f"/v1/sessions/{sid}/requeue", content=LONE_SURROGATE_BODY,
                               headers={"content-type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert "step key" in answer.text


def test_check_name_refuses_lone_surrogates() -> None:
    for text in ("\udfff", "a\ud800b"):
        with pytest.raises(InvalidId):
            check_name("step key", text)
    assert check_name("step key", "node:é:1") == "node:é:1"


# --- an answer the schema did not promise --------------------------------------------


async def test_an_oversized_body_is_a_documented_413(client: httpx.AsyncClient) -> None:
    """Before: POST .../signal with a body over the limit answered 413, a status its
    OpenAPI operation did not list (schemathesis: "Undocumented status code")."""
    sid = "3b241101-e2bb-4255-8caf-4136c566a962"
    answer = await client.post(f"/v1/sessions/{sid}/signal",
                               json={"response": "x" * (MAX_BODY_BYTES + 1)})
    assert answer.status_code == 413
    schema = (await client.get("/openapi.json")).json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if "requestBody" in operation:
                assert "413" in operation["responses"], f"{method.upper()} {path}"


# --- an LLM reply that costs its length squared to search ----------------------------

BRACKET_REPLIES = {
    "open brackets": "[" * 1_000_000,
    "nested keys": '{"a":' * 400_000,
    "unclosed lists": "[1," * 300_000,
}


@pytest.mark.parametrize("reply", BRACKET_REPLIES.values(), ids=BRACKET_REPLIES.keys())
def test_searching_a_reply_for_json_is_bounded(reply: str) -> None:
    """A router, evaluator or orchestrator reply (a scripted rule's reply is part of the
    submitted spec) is searched for JSON bracket by bracket. Before: every bracket began
    a parse that read on to the end or a recursion limit, so a 1 MB reply of brackets
    took about a minute of the worker's CPU, outside any render deadline."""
    started = time.process_time()  # this process's CPU: the machine's load is not counted
    with pytest.raises(ValueError, match="no JSON object found"):
        extract_json(reply, kind=dict)
    assert time.process_time() - started < 20  # before: 45 s to 80 s each (2 cores)


def test_json_after_bracketed_prose_is_still_found() -> None:
    reply = "see [1] and [2] {not json} " * 2000 + 'so: {"route": "x"}'
    assert extract_json(reply, kind=dict) == {"route": "x"}


@pytest.mark.parametrize("delay", ["1e9", ".inf", ".nan", "-1"])
def test_a_scripted_delay_is_bounded_and_finite(delay: str) -> None:
    """A delay past the model timeout could only time out, again on every retry."""
    text = chain_spec("{{ 1 }}").replace(
        "runtime: {provider: scripted}",
        f"runtime: {{provider: scripted, script: {{delay_s: {delay}}}}}")
    assert f"delay_s: {delay}" in text
    with pytest.raises(SpecError, match="delay_s"):
        load_spec_text(text, "spec.yaml")


@pytest.mark.parametrize("args", [["--timeout", "nan"], ["--timeout", "inf"],
                                  ["--timeout", "-1"], ["--poll", "nan"], ["--poll", "0"]])
@pytest.mark.parametrize("command", ["wait", "watch"])
def test_wait_and_watch_refuse_a_timeout_that_never_ends(command: str, args: list[str]) -> None:
    result = subprocess.run([sys.executable, "-m", "strands_durable.api.cli", command,
                             "3b241101-e2bb-4255-8caf-4136c566a962", *args],
                            cwd=REPO, capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})
    assert result.returncode == 2, result.stderr
    assert "seconds" in result.stderr and "Traceback" not in result.stderr


# --- command-line input that is not text, or out of range ------------------------------
PLAIN = ("version: 0\nname: plain\nruntime: {provider: scripted}\nagents: {a: {prompt: hi}}\n"
         "pattern: {type: chain, config: {steps: [{agent: a, input: 'about {{ topic }}'}]}}\n"
         "inputs: {values: {topic: x}}\n")


def durable_cli(tmp_path: Path, *args: str | bytes, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "strands_durable.api.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120, errors="replace",
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "DURABLE_HOME": str(tmp_path / "home"), **env})


@pytest.mark.parametrize("var", [b"topic=\xff", b"\xff=1"])
@pytest.mark.parametrize("command", [["validate"], ["run", "--ephemeral"]])
def test_a_variable_that_is_not_utf8_is_exit_2_naming_it(tmp_path: Path, command: list[str],
                                                         var: bytes) -> None:
    spec = tmp_path / "plain.yaml"
    spec.write_text(PLAIN)
    result = durable_cli(tmp_path, *command, str(spec), "--var", var)
    assert result.returncode == 2, result.stderr[-500:]
    assert "variables." in result.stderr and "not valid Unicode" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_spec_whose_file_name_is_not_utf8_runs_under_an_escaped_name(tmp_path: Path) -> None:
    spec = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xffname.yaml"))
    spec.write_text(PLAIN)
    result = durable_cli(tmp_path, "run", str(spec))  # the local store keeps the session
    assert result.returncode == 0, result.stderr[-500:]
    listed = durable_cli(tmp_path, "sessions", "list", "--json")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr


@pytest.mark.parametrize(("args", "env"), [
    (["sessions", "list", "--limit", "99999999999999999999"], {}),
    (["sessions", "list", "--limit", "-1"], {}),
    (["run", "--ephemeral", "SPEC"], {"DURABLE_EVENTS_MAX": "9" * 26}),
    (["run", "--ephemeral", "SPEC"], {"DURABLE_MAX_SPEC_BYTES": "9" * 26}),
    (["run", "--ephemeral", "SPEC"], {"DURABLE_LIVE_TTL_S": "9" * 26})])
def test_numbers_past_their_range_are_exit_2(tmp_path: Path, args: list[str],
                                              env: dict[str, str]) -> None:
    spec = tmp_path / "plain.yaml"
    spec.write_text(PLAIN)
    result = durable_cli(tmp_path, *[str(spec) if a == "SPEC" else a for a in args], **env)
    assert result.returncode == 2, result.stderr[-500:]
    assert "Traceback" not in result.stderr
    assert next(iter(env), "--limit") in result.stderr


def test_an_unknown_key_is_shown_escaped_and_short(tmp_path: Path) -> None:
    # YAML's own escape (\e) makes the key a terminal's escape code; a raw one is no YAML.
    for key in ("\\e[31mRED\\e[0mX", "k" * 5000):
        spec = tmp_path / "key.yaml"
        spec.write_text(PLAIN + f'? "{key}"\n: v\n')  # an explicit key: any length
        result = durable_cli(tmp_path, "validate", str(spec))
        assert result.returncode == 2, result.stderr[-500:]
        assert "\x1b" not in result.stderr and len(result.stderr) < 1000, result.stderr[:300]
        assert "unknown field" in result.stderr
