"""Row 1: templates read data, never the process's environment.

A corpus of known Jinja sandbox escapes (format-string attribute walks, `attr`, Jinja's
own globals, `self`, `loop`, string and mapping methods, Flask-style names), each
rendered with a canary provider key in os.environ: every one is refused with a clear
message, and the canary never comes back. Then the issue's exact reproduction through
the real `durable run` process, and through the HTTP API (`GET /v1/sessions/{id}` and
an artifact) with a real redis-server and a real worker.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.api import asgi_client, make_app, submit, wait_status
from helpers.attack import CANARY, cli_env
from helpers.fleet import durable_bin

from strands_durable.errors import SpecError, TemplateError
from strands_durable.sessions.start import new_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.spec.templates import render, render_condition
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

ISSUE_PAYLOAD = "{{ str.format('{0.__init__.__globals__[os].environ[OPENAI_API_KEY]}', cycler) }}"

ESCAPES = {
    "issue: str.format on cycler": ISSUE_PAYLOAD,
    "str.format on lipsum": "{{ str.format('{0.__globals__[os].environ[OPENAI_API_KEY]}', "
                            "lipsum) }}",
    "str.format on joiner": "{{ str.format('{0.__init__.__globals__[os].environ}', joiner) }}",
    "str.format_map": "{{ str.format_map('{x.__init__.__globals__[os].environ}', "
                      "{'x': cycler}) }}",
    "format method of a literal": "{{ '{0.__init__.__globals__[os].environ}'.format(cycler) }}",
    "format method of data": "{{ '{0.__class__}'.format(topic) }}",
    "format_map method": "{{ topic.format_map(tasks) }}",
    "format reached by item": "{{ topic['format']('{0.__class__}', topic) }}",
    "format filter": "{{ '%s'|format(cycler.__init__.__globals__.os.environ) }}",
    "% operator": "{{ '%s' % topic }}",
    "% operator width": "{{ '%999999999s' % topic }}",
    "attr filter": "{{ cycler|attr('__init__')|attr('__globals__') }}",
    "attr filter to format": "{{ (topic|attr('format'))('{0.__class__}', topic) }}",
    "map attribute": "{{ [topic]|map(attribute='__class__')|list }}",
    "map attribute on mapping": "{{ [tasks]|map(attribute='__init__')|list }}",
    "selectattr": "{{ [topic]|selectattr('__class__')|list }}",
    "sort attribute": "{{ [topic, topic]|sort(attribute='__class__.__name__') }}",
    "class mro": "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "class via item": "{{ topic['__class__'] }}",
    "mro of a global": "{{ str.mro() }}",
    "method self": "{{ tasks.get.__self__ }}",
    "builtin self": "{{ len.__self__ }}",
    "method globals": "{{ topic.upper.__globals__ }}",
    "cycler globals": "{{ cycler.__init__.__globals__.os.environ.OPENAI_API_KEY }}",
    "lipsum globals": "{{ lipsum.__globals__['os'].environ }}",
    "namespace globals": "{{ namespace.__init__.__globals__.os.environ }}",
    "joiner globals": "{{ joiner.__init__.__globals__.os.environ }}",
    "range": "{{ range.__class__ }}",
    "dict global": "{{ dict(a=1).items() }}",
    "self context": "{{ self._TemplateReference__context }}",
    "self context item": "{{ self['_TemplateReference__context'] }}",
    "loop internals": "{% for s in steps %}{{ loop._iterator }}{% endfor %}",
    "loop class": "{% for s in steps %}{{ loop.__class__.__init__.__globals__ }}{% endfor %}",
    "macro globals": "{% macro m() %}{% endmacro %}{{ m._func.__globals__ }}",
    "flask config": "{{ config.items() }}",
    "flask request": "{{ request.application.__globals__ }}",
    "dict items of a class": "{{ str.__dict__.items() }}",
    "mapping copy": "{{ tasks.copy.__self__ }}",
    "list mutation": "{{ steps.append(1) }}",
    "getattr builtins": "{{ steps.__getitem__.__globals__['__builtins__'] }}",
    "undefined walk": "{{ nothing.__class__.__init__.__globals__ }}",
}

REFUSED = ("unsafe", "not allowed", "not available", "is undefined", "No filter named",
           "has no attribute", "here (there is:")


def context() -> dict[str, Any]:
    return {"topic": "tidal power", "steps": [{"response": "first", "index": 0}],
            "tasks": {"overview": {"response": "an overview"}}, "last_response": "first"}


@pytest.mark.parametrize("template", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_is_refused_when_rendered(canary: str, template: str) -> None:
    with pytest.raises(TemplateError) as info:
        render(template, context(), "pattern.config.steps[1].input")
    message = str(info.value)
    assert canary not in message
    assert info.value.where == "pattern.config.steps[1].input"
    assert any(word in message for word in REFUSED), message


@pytest.mark.parametrize("template", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_is_refused_as_a_condition(canary: str, template: str) -> None:
    expr = template if "{%" in template else template.replace("}}", "is defined }}")
    with pytest.raises(TemplateError) as info:
        render_condition(expr, context(), "pattern.config.edges[0].choose[0].when")
    assert canary not in str(info.value)


def chain_spec(step_input: str, artifact: str = "{{ last_response }}") -> str:
    quoted = step_input.replace("\\", "\\\\").replace('"', '\\"')
    art = artifact.replace("\\", "\\\\").replace('"', '\\"')
    return f"""
version: 0
name: escape
runtime: {{provider: scripted}}
inputs:
  values: {{topic: tidal power}}
agents:
  a: {{prompt: "You are a."}}
pattern:
  type: chain
  config:
    steps:
      - {{agent: a, input: "{quoted}"}}
outputs:
  artifacts:
    - path: out.md
      from: "{art}"
"""


@pytest.mark.parametrize("template", ESCAPES.values(), ids=ESCAPES.keys())
def test_escape_in_a_spec_is_refused_before_anything_runs(canary: str, template: str) -> None:
    """What `durable run`, `durable submit` and POST /v1/sessions do with a spec: load it,
    then plan it (the first step's input renders). One of the two refuses it."""
    with pytest.raises((SpecError, TemplateError)) as info:
        new_session(load_spec_text(chain_spec(template), "spec.yaml"))
    assert canary not in str(info.value)
    assert "steps[0].input" in str(info.value)


def run_cli(tmp_path: Path, spec_text: str, *extra: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text)
    return subprocess.run([*durable_bin(), "run", str(spec), *extra], cwd=REPO,
                          env=cli_env(), capture_output=True, text=True, timeout=120)


def test_issue_reproduction_through_durable_run(tmp_path: Path) -> None:
    """`OPENAI_API_KEY=sk-canary durable run` of the issue's spec printed the key."""
    done = run_cli(tmp_path, chain_spec(ISSUE_PAYLOAD), "--out", str(tmp_path / "out"))
    assert CANARY not in done.stdout + done.stderr
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pattern.config.steps[0].input" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("template", [
    "{{ [topic]|map(attribute='__class__')|list }}",
    "{{ topic.format('{0.__class__}', topic) }}",
    "{{ str.format('{0.__class__}', topic) }}",
], ids=["dynamic", "method", "global"])
def test_sandbox_refusal_is_a_bad_spec_exit_2(tmp_path: Path, template: str) -> None:
    """A refusal at the first render is a bad spec (exit 2), never a run (0) or 1."""
    done = run_cli(tmp_path, chain_spec(template))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "steps[0].input" in done.stderr and "Traceback" not in done.stderr


async def db_keys(store: Store) -> list[str]:
    """This test's keys (the session-wide redis-server also holds other tests'), but for
    the live consumer's heartbeats and beats, which it writes by itself."""
    live = {store.keys.workers(), *(store.keys.beats(k) for k in range(store.keys.shards))}
    return sorted([key async for key in store.redis.scan_iter(match=f"{store.keys.prefix}*")
                   if key not in live])


async def test_issue_reproduction_through_the_api(settings: DurableSettings, store: Store,
                                                  consumer: StepConsumer, canary: str) -> None:
    """The key came back through GET /v1/sessions/{id} and an artifact. Now the spec is
    refused (422, naming the field) and nothing is stored; a walk that gets past the
    loader (an attribute named in a filter argument) fails the session at the artifact,
    and neither the session nor the artifact list shows the canary."""
    app = make_app(settings)
    async with asgi_client(app) as client:
        before = await db_keys(store)
        for spec in (chain_spec(ISSUE_PAYLOAD), chain_spec("hi", ISSUE_PAYLOAD)):
            r = await client.post("/v1/sessions", json={"spec": spec})
            assert r.status_code == 422, r.text
            assert canary not in r.text
            assert "is undefined" in r.text or "unsafe" in r.text
        assert await db_keys(store) == before

        walk = "{{ steps|map(attribute='__init__')|list }}"
        sid = await submit(client, chain_spec("hi", walk))
        doc = await wait_status(client, sid, "failed")
        assert "outputs.artifacts[0].from" in doc["error"]
        assert "not allowed" in doc["error"]
        listing = await client.get(f"/v1/sessions/{sid}/artifacts")
        assert listing.json()["items"] == []
        for path in (f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/events",
                     f"/v1/sessions/{sid}/artifacts/out.md"):
            assert canary not in (await client.get(path)).text


async def test_a_plain_spec_still_renders_its_artifact(settings: DurableSettings,
                                                       consumer: StepConsumer) -> None:
    """The allow-list keeps what specs use: loops, loop.last, .items(), filters."""
    artifact = ("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }}"
                "{% if not loop.last %},{% endif %}{% endfor %} "
                "{{ steps|length }} {{ topic|title|replace(' ', '-') }} "
                "{{ steps[0].response|truncate(20) }} {{ topic.upper() }}")
    app = make_app(settings)
    async with asgi_client(app) as client:
        sid = await submit(client, chain_spec("hi {{ topic }}", artifact))
        await wait_status(client, sid, "completed")
        body = (await client.get(f"/v1/sessions/{sid}/artifacts/out.md")).text
    assert body.startswith("a=1,b=2 1 Tidal-Power a: hi tidal power TIDAL POWER")

