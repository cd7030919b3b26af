"""Hostile session imports (POST /v1/sessions/import, `durable import`): a wrong format
version, a truncated or oversized document, jobs of another session, anything that would
reach a key outside the session, an id that exists: each refused with a clear error in
the error envelope (CLI: exit 2, one line) and nothing written (a snapshot of every key
under the prefix is unchanged)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import REPO, RedisServer, quick_settings, random_prefix, wait_for
from helpers.api import asgi_client, error_of, make_app
from helpers.attack import cli_env, snapshot
from pattern_specs import CASES

from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.sessions.transfer import export_session, export_text
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

OTHER = "11111111-2222-4333-8444-555555555555"
Doc = dict[str, Any]


@pytest.fixture
async def exported(store: Store, consumer: StepConsumer) -> Doc:
    """A finished session of another deployment, exported (a JSON document)."""
    sid, _ = await start_session(store, CASES["evaluator_optimizer"].load())

    async def done() -> bool:
        return (await store.get_session(sid)).status is SessionStatus.COMPLETED

    await wait_for(done, what="the session to complete")
    doc: Doc = json.loads(export_text(await export_session(store, sid)))
    return doc


@pytest.fixture
async def target(settings: DurableSettings, tmp_path: Path) -> AsyncIterator[Store]:
    """The importing deployment's store, prepared (its config and groups written)."""
    target = open_store(quick_settings(settings.redis_url, random_prefix(),
                                       tmp_path / "target"))
    await target.prepare()
    yield target
    await target.close()


@pytest.fixture
async def api(target: Store, settings: DurableSettings) -> AsyncIterator[httpx.AsyncClient]:
    app = make_app(settings, key_prefix=target.keys.prefix, max_import_bytes=256 * 1024)
    async with asgi_client(app) as client:
        yield client


def job_of(doc: Doc) -> str:
    return doc["failed"].get("x") or json.dumps({"session_id": doc["session_id"], "key": "x",
                                                 "agent": "a", "input": ""})


def with_(**changes: Any) -> Callable[[Doc], Doc]:
    return lambda doc: {**doc, **changes}


HOSTILE: dict[str, tuple[Callable[[Doc], Any], str]] = {
    "a newer format": (with_(format=2), "export format 2; this release"),
    "no format": (lambda d: {k: v for k, v in d.items() if k != "format"}, "export format None"),
    "another kind": (with_(kind="temporal/history"), "its kind is not"),
    "not an object": (lambda d: [d], "its kind is not"),
    "a field outside the format": (with_(keys={"durable:config": "x"}), "keys: Extra inputs"),
    "a bad session id": (with_(session_id="../config"), "session id '../config' is not valid"),
    "a held job of another session": (
        lambda d: {**d, "held": [json.dumps({"session_id": OTHER, "key": "step:0"})]},
        f"held job 0 belongs to session '{OTHER}'"),
    "a timer of another session": (
        lambda d: {**d, "timers": [{"due_ms": 1, "job": json.dumps({"session_id": OTHER})}]},
        f"timer 0 belongs to session '{OTHER}'"),
    "a spec hash that spells another key": (
        lambda d: {**d, "meta": {**d["meta"], "spec_hash": "x}:idx:all"}},
        "meta.spec_hash is not a sha256"),
    "a lane with a control character": (
        lambda d: {**d, "conversations": [{"lane": "a\nb", "items": []}]},
        "conversation lane 'a\\nb' is not valid"),
    "a result that is not JSON": (
        lambda d: {**d, "results": {**d["results"], "step:0": "{"}}, "is not JSON"),
    "an order naming no result": (lambda d: {**d, "order": [*d["order"], "nope"]},
                                  "order names step 'nope', which has no result"),
    "an unknown status": (lambda d: {**d, "meta": {**d["meta"], "status": "owned"}},
                          "meta.status 'owned' is not a session status"),
    "a lone surrogate": (lambda d: {**d, "meta": {**d["meta"], "workflow_name": "\ud800"}},
                         "not valid Unicode"),
    "a message that is not an object": (
        lambda d: {**d, "conversations": [{"lane": "a", "items": ["[1]"]}]},
        "lane 'a' item 0 is not a JSON object"),
    "a job that is no step job": (
        lambda d: {**d, "queued": [json.dumps({"session_id": d["session_id"], "rm": "-rf"})]},
        "queued job 0 is not a step job"),
    "an event id past the range": (
        lambda d: {**d, "events": [{"id": "18446744073709551616-0", "fields": {"t": "x"}}]},
        "past a stream id's range"),
    "events out of order": (lambda d: {**d, "events": d["events"][::-1]}, "out of order"),
    "an event id that is not one": (
        lambda d: {**d, "events": [{"id": "*", "fields": {"type": "x"}}]},
        "event id '*' is not a stream id"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
async def test_a_hostile_document_is_refused_and_nothing_is_written(
        api: httpx.AsyncClient, target: Store, exported: Doc, case: str) -> None:
    change, message = HOSTILE[case]
    before = await snapshot(target)
    # As JSON escapes (ASCII): a lone surrogate travels as one.
    r = await api.post("/v1/sessions/import", content=json.dumps(change(exported)),
                       headers={"content-type": "application/json"})
    err = error_of(r, 422)
    assert err["code"] in ("invalid_export", "invalid_id"), err
    assert message in err["message"], err["message"]
    assert await snapshot(target) == before


async def test_a_truncated_document_is_refused(api: httpx.AsyncClient, target: Store,
                                               exported: Doc) -> None:
    text = json.dumps(exported)
    before = await snapshot(target)
    for cut in (1, len(text) // 2, len(text) - 1):
        err = error_of(await api.post("/v1/sessions/import", content=text[:cut]), 422)
        assert err["code"] == "invalid_export" and "not JSON" in err["message"]
    err = error_of(await api.post("/v1/sessions/import", content="[" * 100_000), 422)
    assert "not JSON" in err["message"]  # nested past any parser's depth
    assert await snapshot(target) == before


async def test_an_oversized_document_is_refused_by_its_size(
        api: httpx.AsyncClient, target: Store, exported: Doc) -> None:
    huge = {**exported, "artifacts": {"big.md": "x" * 300_000}}
    before = await snapshot(target)
    err = error_of(await api.post("/v1/sessions/import", json=huge), 413)
    assert err["details"]["limit_bytes"] == 256 * 1024
    assert await snapshot(target) == before


async def test_an_existing_id_is_refused_unless_a_new_one_is_asked_for(
        api: httpx.AsyncClient, target: Store, exported: Doc) -> None:
    first = await api.post("/v1/sessions/import", json=exported)
    assert first.status_code == 201, first.text
    assert first.json()["session_id"] == exported["session_id"]
    before = await snapshot(target)
    err = error_of(await api.post("/v1/sessions/import", json=exported), 409)
    assert err["code"] == "session_exists" and exported["session_id"] in err["message"]
    assert await snapshot(target) == before
    copy = await api.post("/v1/sessions/import", params={"new_id": "true"}, json=exported)
    assert copy.status_code == 201, copy.text
    new = copy.json()
    assert new["session_id"] != exported["session_id"]
    assert new["source_session_id"] == exported["session_id"]
    doc = (await api.get(f"/v1/sessions/{new['session_id']}/export")).json()
    assert doc["results"] == exported["results"] and doc["session_id"] == new["session_id"]


def durable(redis: RedisServer, prefix: str, *args: str, stdin: str = "",
            **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "strands_durable.api.cli", *args], cwd=REPO,
                          env=cli_env(DURABLE_REDIS_URL=redis.url, DURABLE_KEY_PREFIX=prefix,
                                      **env),
                          input=stdin, capture_output=True, text=True, timeout=120)


async def test_the_cli_refuses_in_one_line_with_exit_2(
        redis_server: RedisServer, target: Store, exported: Doc, tmp_path: Path) -> None:
    prefix = target.keys.prefix
    before = await snapshot(target)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({**exported, "format": 9}))
    cases = [(("import", str(wrong)), {}, "export format 9"),
             (("import", "-"), {}, "not JSON"),
             (("import", str(tmp_path / "missing.json")), {}, "missing.json"),
             (("import", str(wrong)), {"DURABLE_MAX_IMPORT_BYTES": "65536"}, "")]
    big = tmp_path / "big.json"
    big.write_text(json.dumps({**exported, "artifacts": {"a": "x" * 70_000}}))
    cases.append((("import", str(big)), {"DURABLE_MAX_IMPORT_BYTES": "65536"},
                  "over 65536 bytes"))
    for args, env, message in cases:
        result = durable(redis_server, prefix, *args, stdin="{\"kind\": ", **env)
        assert result.returncode == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert message in lines[0], lines[0]
        assert "Traceback" not in result.stdout + result.stderr
    assert await snapshot(target) == before
    good = tmp_path / "good.json"
    good.write_text(json.dumps(exported))
    assert durable(redis_server, prefix, "import", str(good)).returncode == 0
    again = durable(redis_server, prefix, "import", str(good))
    assert again.returncode == 2 and "exists already" in again.stderr


async def test_more_events_than_a_session_keeps_are_refused(
        settings: DurableSettings, target: Store, exported: Doc) -> None:
    """The import script writes every event: their count is bounded by DURABLE_EVENTS_MAX,
    not by the document's size alone."""
    app = make_app(settings, key_prefix=target.keys.prefix, events_max=100)
    flood = {**exported, "events": [{"id": f"1-{n}", "fields": {"type": "x"}}
                                    for n in range(1, 1_200)]}
    before = await snapshot(target)
    async with asgi_client(app) as api:
        err = error_of(await api.post("/v1/sessions/import", json=flood), 422)
    assert "1199 events" in err["message"] and "DURABLE_EVENTS_MAX" in err["message"]
    assert await snapshot(target) == before
