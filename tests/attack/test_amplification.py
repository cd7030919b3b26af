"""Rows 2, 3 and 10: small specs that ask for unbounded work or storage.

YAML alias bombs and documents nested 5,000 deep are refused while they are read;
templates that multiply text, numbers or loops are refused before they build the
result; the CLI applies the API's limits; every refusal is a clear message (exit 2,
HTTP 413/422) naming the field and the DURABLE_* limit, never a traceback, a 500, a
hang or a key written to Redis.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from helpers import REPO, RedisServer, start_redis
from helpers.api import asgi_client, make_app
from helpers.attack import cli_env
from helpers.fleet import durable_bin

from strands_durable.errors import SpecError, TemplateError
from strands_durable.sessions.start import new_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text

HEAD = """
version: 0
name: amplify
runtime: {provider: scripted}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "hello"}
"""


def with_values(values_yaml: str) -> str:
    return HEAD + "inputs:\n  values:\n" + values_yaml


def billion_laughs(levels: int = 9) -> str:
    """The classic: each level a list of ten aliases of the one before."""
    lines = ['    l0: &l0 "lol"']
    for n in range(1, levels + 1):
        lines.append(f"    l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 10)}]")
    return with_values("\n".join(lines) + "\n")


def alias_heavy(kib: int = 170, copies: int = 2000) -> str:
    """A 181 KB spec: one long string and thousands of aliases of it (+336 MB)."""
    text = "y" * (kib * 1024)
    refs = ", ".join(["*big"] * copies)
    return with_values(f'    big: &big "{text}"\n    many: [{refs}]\n')


def nested_yaml(depth: int = 5000) -> str:
    return with_values("    deep: " + "[" * depth + "]" * depth + "\n")


def nested_mapping_yaml(depth: int = 5000) -> str:
    return with_values("    deep: " + "{a: " * depth + "1" + "}" * depth + "\n")


def nested_json(depth: int = 5000) -> str:
    return json.dumps({"version": 0, "name": "n"})[:-1] + ', "deep": ' + "[" * depth \
        + "]" * depth + "}"


MALFORMED = {
    "billion laughs": (billion_laughs(), "DURABLE_MAX_SPEC_NODES"),
    "181 KB of aliases": (alias_heavy(), "DURABLE_MAX_SPEC_EXPANDED_BYTES"),
    "recursive alias": (with_values("    loop: &a [*a]\n"), "recursive alias"),
    "YAML nested 5,000 deep": (nested_yaml(), "DURABLE_MAX_SPEC_DEPTH"),
    "YAML mappings nested 5,000 deep": (nested_mapping_yaml(), "DURABLE_MAX_SPEC_DEPTH"),
    "JSON nested 5,000 deep": (nested_json(), "DURABLE_MAX_SPEC_DEPTH"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("text", "limit"), MALFORMED.values(), ids=MALFORMED.keys())
def test_spec_is_refused_while_it_is_read(text: str, limit: str) -> None:
    started = time.monotonic()
    with pytest.raises(SpecError) as info:
        load_spec_text(text, "spec.yaml")
    assert limit in str(info.value)
    assert time.monotonic() - started < 10


def chain(step_input: str) -> str:
    quoted = step_input.replace('"', '\\"')
    return HEAD.replace('input: "hello"', f'input: "{quoted}"') \
        + "inputs:\n  values: {topic: tidal, n: 9}\n"


TEMPLATES = {
    "huge power": ("{{ 9**(9**7) }}", "bits"),
    "huge power of a variable": ("{{ n**(n**n) }}", "bits"),
    "text times 10^8": ("{{ 'a'*100000000 }}", "DURABLE_MAX_RENDER_CHARS"),
    "list times 10^8": ("{{ ([topic]*100000000)|length }}", "DURABLE_MAX_RENDER_CHARS"),
    "replace amplification": ("{{ ('x'*1000)|replace('x', 'y'*10000) }}",
                              "DURABLE_MAX_RENDER_CHARS"),
    "replace method amplification": ("{{ ('x'*1000).replace('x', 'y'*10000) }}",
                                     "DURABLE_MAX_RENDER_CHARS"),
    "join of a huge list": ("{{ ([topic]*100000)|join('z'*1000) }}",
                            "DURABLE_MAX_RENDER_CHARS"),
    "doubling by set": ("{% set a = 'x'*900000 %}{% set a = a ~ a %}{{ a|length }}",
                        "DURABLE_MAX_RENDER_CHARS"),
    "literal text in nested loops": (
        "{% for a in 'x'*1000 %}{% for b in 'x'*1000 %}0123456789{% endfor %}{% endfor %}",
        "DURABLE_MAX_RENDER_CHARS"),
    "output of a list of big strings": ("{{ ['x'*600000, 'x'*600000] }}",
                                        "DURABLE_MAX_RENDER_CHARS"),
    "nested empty loops": ("{% for a in 'x'*1000 %}{% for b in 'x'*1000 %}"
                           "{% for c in 'x'*1000 %}{% endfor %}{% endfor %}{% endfor %}",
                           "DURABLE_RENDER_TIMEOUT_S"),
    "exponential macro": ("{% macro f(k) %}{% if k %}{{ f(k-1) }}{{ f(k-1) }}{% endif %}"
                          "{% endmacro %}{{ f(60) }}", "DURABLE_RENDER_TIMEOUT_S"),
    "regex backtracking": ("{{ ('a'*40 ~ '!')|regex_search('^(a|aa)+$') }}",
                           "DURABLE_RENDER_TIMEOUT_S"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("template", "limit"), TEMPLATES.values(), ids=TEMPLATES.keys())
def test_template_work_is_bounded(set_limits: Any, template: str, limit: str) -> None:
    set_limits(render_timeout_s=1)
    started = time.monotonic()
    with pytest.raises((TemplateError, SpecError)) as info:
        new_session(load_spec_text(chain(template), "spec.yaml"))
    assert limit in str(info.value), str(info.value)
    assert "pattern.config.steps[0].input" in str(info.value)
    assert time.monotonic() - started < 10


def test_an_artifact_is_bounded_by_its_own_limit(set_limits: Any) -> None:
    from strands_durable.planning.artifacts import render_artifacts

    set_limits(max_artifact_bytes=2048)
    spec = load_spec_text(HEAD + "outputs:\n  artifacts:\n    - path: big.md\n"
                          "      from: \"{{ last_response * 10 }}\"\n", "spec.yaml").spec
    with pytest.raises(TemplateError) as info:
        render_artifacts(spec, {"last_response": "z" * 300})
    assert info.value.where == "outputs.artifacts[0].from"
    assert "DURABLE_MAX_ARTIFACT_BYTES" in info.value.problem
    assert render_artifacts(spec, {"last_response": "z" * 100}) == {"big.md": "z" * 1000}


# -- through the HTTP API and the CLI, on a real redis-server -------------------------


async def test_api_refuses_amplification_and_stores_nothing(settings: DurableSettings,
                                                            redis_server: RedisServer) -> None:
    """The 181 KB alias spec put +336 MB in Redis, 'a'*10^8 +100 MB."""
    client_redis = redis.Redis.from_url(redis_server.url)
    app = make_app(settings)
    async with asgi_client(app) as client:
        keys = client_redis.dbsize()
        memory = client_redis.info("memory")["used_memory"]
        for spec in (alias_heavy(), chain("{{ 'a'*100000000 }}"), billion_laughs(),
                     nested_yaml(), nested_json(), chain("{{ 9**(9**7) }}")):
            r = await client.post("/v1/sessions", json={"spec": spec})
            assert r.status_code == 422, r.text[:500]
            assert "DURABLE_" in r.json()["error"]["message"] or "bits" in r.text
        deep: Any = 0
        for _ in range(400):
            deep = [deep]
        r = await client.post("/v1/sessions", json={"spec": {"version": 0, "x": deep}})
        assert r.status_code == 422 and "DURABLE_MAX_SPEC_DEPTH" in r.text
        r = await client.post("/v1/sessions", json={"spec": chain("hi"), "variables": {
            "v": deep}})
        assert r.status_code == 422 and "DURABLE_MAX_SPEC_DEPTH" in r.text
        assert client_redis.dbsize() == keys
        assert client_redis.info("memory")["used_memory"] - memory < 5 * 1024 * 1024
    client_redis.close()


@pytest.fixture(scope="module")
def empty_redis() -> Iterator[RedisServer]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def flushed(empty_redis: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(empty_redis.url)
    client.flushall()
    yield client
    client.close()


def durable(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*durable_bin(), *args], cwd=REPO, env=cli_env(**env),
                          capture_output=True, text=True, timeout=120)


def spec_file(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_clear_refusal(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert "Traceback" not in output
    for fragment in fragments:
        assert fragment in done.stderr, output


def test_cli_applies_the_spec_size_limit(tmp_path: Path, empty_redis: RedisServer,
                                         flushed: redis.Redis) -> None:
    """A 10 MB spec went into Redis as 25 MB through `durable submit`."""
    padding = "# " + "p" * 1000 + "\n"
    big = spec_file(tmp_path, chain("hi") + padding * 10_000)
    done = durable(tmp_path, "submit", str(big), DURABLE_REDIS_URL=empty_redis.url)
    assert_clear_refusal(done, "DURABLE_MAX_SPEC_BYTES")
    assert flushed.dbsize() == 0
    done = durable(tmp_path, "run", str(big))
    assert_clear_refusal(done, "DURABLE_MAX_SPEC_BYTES")


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("text", "limit"), [
    (billion_laughs(), "DURABLE_MAX_SPEC_NODES"),
    (nested_yaml(), "DURABLE_MAX_SPEC_DEPTH"),
    (nested_json(), "DURABLE_MAX_SPEC_DEPTH"),
    (chain("{{ 9**(9**7) }}"), "steps[0].input"),
    (chain("{{ topic.__class__ }}"), "steps[0].input"),
], ids=["alias bomb", "YAML 5,000 deep", "JSON 5,000 deep", "huge power", "dunder"])
def test_cli_refusals_exit_2_and_write_no_key(tmp_path: Path, empty_redis: RedisServer,
                                              flushed: redis.Redis, text: str,
                                              limit: str) -> None:
    """A nine-level alias bomb hung `durable run` over 60 s; 5,000 levels were a
    RecursionError traceback; a refused submit on an empty Redis wrote 2 keys."""
    path = spec_file(tmp_path, text)
    started = time.monotonic()
    done = durable(tmp_path, "run", str(path))
    assert_clear_refusal(done, limit)
    assert time.monotonic() - started < 30
    assert flushed.dbsize() == 0
    done = durable(tmp_path, "submit", str(path), DURABLE_REDIS_URL=empty_redis.url)
    assert_clear_refusal(done, limit)
    assert flushed.dbsize() == 0
    assert [k for k in flushed.scan_iter()] == []


def test_cli_applies_the_session_size_limit(tmp_path: Path, empty_redis: RedisServer,
                                            flushed: redis.Redis) -> None:
    topic = "t" * 60_000
    path = spec_file(tmp_path, chain("{{ topic }}").replace("{topic: tidal, n: 9}",
                                                             f"{{topic: {topic}, n: 9}}"))
    done = durable(tmp_path, "submit", str(path), DURABLE_REDIS_URL=empty_redis.url,
                   DURABLE_MAX_SESSION_BYTES="65536")
    assert_clear_refusal(done, "DURABLE_MAX_SESSION_BYTES")
    assert flushed.dbsize() == 0
    done = durable(tmp_path, "submit", str(path), DURABLE_REDIS_URL=empty_redis.url)
    assert done.returncode == 0, done.stderr


def test_nul_in_an_artifact_path_is_a_clear_error(tmp_path: Path) -> None:
    """`run --out` with a NUL in a literal artifact path was a ValueError traceback."""
    path = spec_file(tmp_path, chain("hi") + 'outputs:\n  artifacts:\n'
                     '    - {path: "report\\0.md", from: "{{ last_response }}"}\n')
    done = durable(tmp_path, "run", str(path), "--out", str(tmp_path / "out"))
    assert_clear_refusal(done, "outputs.artifacts[0].path", "control character")
    assert not (tmp_path / "out").exists()


def test_a_bad_limit_setting_is_a_usage_error(tmp_path: Path) -> None:
    path = spec_file(tmp_path, chain("hi"))
    done = durable(tmp_path, "run", str(path), DURABLE_RENDER_TIMEOUT_S="-1")
    assert_clear_refusal(done, "DURABLE_RENDER_TIMEOUT_S")


@pytest.mark.parametrize("template", [
    "{{ " + "(" * 3000 + "1" + ")" * 3000 + " }}",
    "{% if 1 %}" * 500 + "x" + "{% endif %}" * 500,
    "{{ " + "-" * 5000 + "1 }}",
], ids=["brackets", "blocks", "unary"])
def test_a_deeply_nested_template_is_a_clear_error(template: str) -> None:
    """Jinja's parser and Python's compiler recurse: this was a RecursionError."""
    with pytest.raises(SpecError) as info:
        load_spec_text(chain(template), "spec.yaml")
    assert "steps[0].input: template nested too deeply" in str(info.value)


async def test_a_lone_surrogate_is_a_clear_error(settings: DurableSettings) -> None:
    """JSON can carry "\\ud800", which no UTF-8 encoder takes: this was a 500."""
    app = make_app(settings)
    async with asgi_client(app) as client:
        for body in ('{"spec": "\\ud800"}', '{"spec": {"a\\ud800": 1}}',
                     '{"spec": "x: 1", "variables": {"v": "\\udfff"}}',
                     '{"spec": "version: 0\\nname: \\"\\\\ud800\\""}'):
            r = await client.post("/v1/sessions", content=body,
                                  headers={"content-type": "application/json"})
            assert r.status_code == 422, r.text
            assert "not valid Unicode" in r.json()["error"]["message"], r.text


def test_a_control_character_in_yaml_is_a_clear_error() -> None:
    """PyYAML's reader refuses it while the loader is built (found by the fuzz test)."""
    with pytest.raises(SpecError, match="special characters are not allowed"):
        load_spec_text("\x14name: x\n", "spec.yaml")
