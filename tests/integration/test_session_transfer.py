"""Sessions that move (sessions/transfer.py): each of the seven patterns exported
mid-session (running, with a step in flight; and paused) and completed, imported into
another keyspace of a real redis-server with its own worker, and finished there with the
same results as the run that was never moved."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import StepBreakpoints, quick_settings, random_prefix, wait_for
from pattern_specs import CASES

from strands_durable.models import SessionStatus
from strands_durable.sessions.control import pause, resume
from strands_durable.sessions.start import start_session
from strands_durable.sessions.transfer import (
    export_session,
    export_text,
    import_session,
    parse_export,
)
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.export import SessionExists
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration
MAX = 64 * 1024 * 1024


@dataclass
class Deployment:
    """A keyspace of its own (prefix) with its own in-process worker."""

    store: Store
    consumer: StepConsumer
    breakpoints: StepBreakpoints


async def deployment(settings: DurableSettings) -> Deployment:
    store = open_store(settings)
    await store.prepare()
    consumer = StepConsumer(settings, store)
    await consumer.start()
    return Deployment(store, consumer, StepBreakpoints(Path(settings.breakpoint_dir)))


@pytest.fixture
async def fleets(settings: DurableSettings, tmp_path: Path
                 ) -> AsyncIterator[tuple[Deployment, Deployment]]:
    other = quick_settings(settings.redis_url, random_prefix(), tmp_path / "importer")
    a, b = await deployment(settings), await deployment(other)
    yield a, b
    for d in (a, b):
        for bp in d.breakpoints.directory.glob("*"):
            bp.unlink()
        await d.consumer.stop(grace_s=0)
        await d.store.close()


async def finished(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status in (SessionStatus.COMPLETED,
                                                     SessionStatus.FAILED)


async def outcome(store: Store, sid: str) -> tuple[str, dict[str, str], str, dict[str, str]]:
    """What a run ends with: status, each step's response, pattern_state, artifacts."""
    await wait_for(lambda: finished(store, sid), timeout_s=120, what="the session's end")
    record = await store.get_session(sid)
    responses = {r.key: r.response for r in await store.results(sid)}
    state = await store.redis.hget(store.keys.meta(sid), "state")
    return record.status.value, responses, state or "", await store.artifacts(sid)


async def moved(doc_text: str, to: Store, **kwargs: object) -> str:
    """Through the document's text, as `durable export > f; durable import f` moves it."""
    imported = await import_session(to, parse_export(doc_text, MAX), **kwargs)  # type: ignore[arg-type]
    return imported.session_id


async def reference(a: Deployment, name: str) -> tuple[str, tuple[str, ...]]:
    """An uninterrupted run's session and its steps in commit order."""
    sid, _ = await start_session(a.store, CASES[name].load())
    await outcome(a.store, sid)
    order = tuple(await a.store.redis.lrange(a.store.keys.order(sid), 0, -1))
    return sid, order


@pytest.mark.parametrize("name", sorted(CASES))
async def test_a_session_moved_mid_run_finishes_as_it_would_have(
        fleets: tuple[Deployment, Deployment], name: str) -> None:
    a, b = fleets
    ref, order = await reference(a, name)
    expected = await outcome(a.store, ref)
    assert len(order) >= 2, order
    loaded = CASES[name].load()
    workflow, held_step = loaded.spec.name, order[1]

    # Running: held at its second step's model call, that step's entry pending.
    a.breakpoints.set(workflow, held_step)
    sid, _ = await start_session(a.store, loaded)
    await a.breakpoints.wait(workflow, held_step)
    doc = await export_session(a.store, sid)
    assert doc.meta["status"] == "running" and doc.results and doc.queued
    moved_sid = await moved(export_text(doc), b.store)
    assert moved_sid == sid
    assert await outcome(b.store, sid) == expected

    # Paused: stays paused where it lands, and finishes once resumed there.
    sid2, _ = await start_session(a.store, loaded)
    await a.breakpoints.wait(workflow, held_step, n=2)
    await pause(a.store, sid2)
    doc2 = await export_session(a.store, sid2)
    await moved(export_text(doc2), b.store)
    await wait_for(lambda: _held(b.store, sid2), what="the importer to hold the queued job")
    assert (await b.store.get_session(sid2)).status == SessionStatus.PAUSED
    await resume(b.store, sid2)
    assert await outcome(b.store, sid2) == expected

    # Completed: the same document again is refused; under a new id it is a copy.
    with pytest.raises(SessionExists):
        await moved(export_text(doc2), b.store)
    done = await export_session(a.store, ref)
    copy = await moved(export_text(done), b.store, new_id=True)
    assert copy != ref and await outcome(b.store, copy) == expected
    a.breakpoints.clear(workflow, held_step)


async def _held(store: Store, sid: str) -> bool:
    return bool(await store.redis.llen(store.keys.held(sid)))


async def test_the_document_carries_every_part(fleets: tuple[Deployment, Deployment]) -> None:
    a, b = fleets
    sid, _ = await reference(a, "evaluator_optimizer")
    doc = await export_session(a.store, sid)
    text = export_text(doc)
    parsed = json.loads(text)
    assert parsed["kind"] == "strands-durable/session" and parsed["format"] == 1
    assert parsed["session_id"] == sid and parsed["meta"]["status"] == "completed"
    assert doc.events and doc.checkpoints and doc.conversations and doc.artifacts
    await moved(text, b.store)
    again = await export_session(b.store, sid)
    same = ("meta", "results", "order", "events", "conversations", "checkpoints",
            "artifacts", "failed", "held")
    assert {k: getattr(again, k) for k in same if k != "meta"} == \
           {k: getattr(doc, k) for k in same if k != "meta"}
    assert {k: v for k, v in again.meta.items() if k != "idempotency_key"} == \
           {k: v for k, v in doc.meta.items() if k != "idempotency_key"}
    assert await b.store.index_score(0, SessionStatus.COMPLETED, sid) is not None


async def contents(store: Store) -> dict[str, object]:
    """Every key under the prefix: its value (a stream by its entries: a deleted entry
    still moves a stream's last id)."""
    found: dict[str, object] = {}
    async for key in store.redis.scan_iter(f"{store.keys.prefix}:*"):
        if key in (store.keys.workers(), store.keys.beats(0)):
            continue
        kind = await store.redis.type(key)
        found[key] = (await store.redis.xrange(key) if kind == "stream"
                      else await store.redis.dump(key))
    return found


@pytest.mark.parametrize("fails_at", ["events", "timers"])
async def test_an_import_that_fails_part_way_takes_back_what_it_wrote(
        fleets: tuple[Deployment, Deployment], monkeypatch: pytest.MonkeyPatch,
        fails_at: str) -> None:
    """Redis does not roll a script back when a command fails: import_session.lua does
    (here the Python checks are passed by, so that a write fails inside the script)."""
    from strands_durable.store import export

    a, b = fleets
    await b.consumer.stop(grace_s=0)  # nothing takes what the script queues meanwhile
    await a.consumer.stop(grace_s=0)
    sid, _ = await start_session(a.store, CASES["chain"].load())
    doc = await export_session(a.store, sid)
    assert doc.queued and doc.events
    if fails_at == "events":  # an id below the one before it: XADD fails in the middle
        doc = doc.model_copy(update={"events": [
            *doc.events, doc.events[0].model_copy(update={"id": "1-1"})]})
    else:  # after the jobs went on the stream: a timer's score that is no number
        payload = export.import_payload

        def bad_timer(d: export.SessionExport, shard: int) -> str:
            body = json.loads(payload(d, shard))
            body["timers"] = [["soon", body["queued"][0]]]
            return json.dumps(body)

        monkeypatch.setattr(export, "import_payload", bad_timer)
    before = await contents(b.store)
    with pytest.raises(export.ImportFailed, match="nothing written"):
        await b.store.import_session(doc)
    assert await contents(b.store) == before


EXAMPLE_SPECS = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=[p.stem for p in EXAMPLE_SPECS])
async def test_every_example_moves_queued_and_completed(
        fleets: tuple[Deployment, Deployment], path: Path) -> None:
    """Each example (scripted offline): its completed session copied to another fleet
    reads the same; a session not yet started there (its first steps queued) moved and
    run there ends as the uninterrupted run did."""
    from strands_durable.spec.loader import load_spec_file

    a, b = fleets
    ref, _ = await start_session(a.store, load_spec_file(path))
    expected = await outcome(a.store, ref)
    assert expected[0] == "completed", expected
    copy = await moved(export_text(await export_session(a.store, ref)), b.store, new_id=True)
    assert await outcome(b.store, copy) == expected
    await a.consumer.stop(grace_s=0)  # what a starts now stays queued there
    queued, _ = await start_session(a.store, load_spec_file(path))
    doc = await export_session(a.store, queued)
    assert doc.meta["status"] == "running" and doc.queued and not doc.results
    assert await moved(export_text(doc), b.store) == queued
    assert await outcome(b.store, queued) == expected
