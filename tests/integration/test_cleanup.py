"""`sessions cleanup` on a real redis-server: ended sessions older than N days go, with
every key they owned; running and paused ones never do; a dry run deletes nothing."""

from __future__ import annotations

import pytest
from helpers import StepBreakpoints, wait_for

from strands_durable.errors import DurableError, SessionNotFound
from strands_durable.models import SessionStatus, now_ms
from strands_durable.sessions.autoresume import find_resumable
from strands_durable.sessions.cleanup import cleanup_sessions
from strands_durable.sessions.control import cancel, pause
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

pytestmark = pytest.mark.integration

DAY_MS = 86_400_000

SPEC = """
version: 0
name: NAME
runtime:
  provider: scripted
  failure_policy: {retries: 0}
  script: {rules: [{contains: "boom", error: "exploded"}]}
agents:
  a: {prompt: "You are a."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "INPUT"}
      - {agent: a, input: "two"}
"""


def spec(name: str, input_: str = "one") -> str:
    return SPEC.replace("NAME", name).replace("INPUT", input_)


async def start(store: Store, text: str) -> str:
    return (await start_session(store, load_spec_text(text, "spec.yaml")))[0]


async def is_(store: Store, sid: str, status: SessionStatus) -> bool:
    return (await store.get_session(sid)).status == status


async def keys_of(store: Store, sid: str) -> list[str]:
    return [k async for k in store.redis.scan_iter(f"{store.keys.prefix}*{sid}*")]


async def one_of_each(store: Store, breakpoints: StepBreakpoints) -> dict[str, str]:
    # Three sessions stay running (their first step stopped at a breakpoint) until
    # cancelled, paused, or the test ends.
    for name in ("stopped", "held", "busy"):
        breakpoints.set(name, "step:0")
    sids = {"completed": await start(store, spec("done")),
            "failed": await start(store, spec("bad", "boom")),
            "cancelled": await start(store, spec("stopped")),
            "paused": await start(store, spec("held")),
            "running": await start(store, spec("busy"))}
    await cancel(store, sids["cancelled"])
    await pause(store, sids["paused"])
    for status, sid in sids.items():
        await wait_for(lambda s=sid, st=status: is_(store, s, SessionStatus(st)),
                       what=f"a {status} session")
    return sids


async def test_cleanup_by_age_and_status(store: Store, consumer: StepConsumer,
                                         breakpoints: StepBreakpoints) -> None:
    sids = await one_of_each(store, breakpoints)
    later = now_ms() + 2 * DAY_MS  # two days from now, every session is two days old
    ended = [sids["completed"], sids["failed"], sids["cancelled"]]

    would = await cleanup_sessions(store, max_age_days=1, dry_run=True, now=later)
    assert sorted(would) == sorted(ended)
    for sid in sids.values():
        assert await store.exists(sid)  # the dry run deleted nothing
    assert sorted(await cleanup_sessions(store, max_age_days=1, keep_completed=True,
                                         dry_run=True, now=later)) == sorted(ended[1:])
    assert await cleanup_sessions(store, max_age_days=3, now=later) == []  # not old enough
    assert await cleanup_sessions(store, max_age_days=1) == []  # nothing is a day old now

    failed_hash = (await store.get_session(sids["failed"])).spec_hash
    deleted = await cleanup_sessions(store, max_age_days=1, keep_completed=True, now=later)
    assert sorted(deleted) == sorted(ended[1:])
    for sid in ended[1:]:
        with pytest.raises(SessionNotFound):
            await store.get_session(sid)
        assert await keys_of(store, sid) == [], f"keys of {sid} left behind"
    assert await find_resumable(store, failed_hash) is None  # gone from the spec index
    assert await store.exists(sids["completed"])

    assert await cleanup_sessions(store, max_age_days=1, now=later) == [sids["completed"]]
    assert await keys_of(store, sids["completed"]) == []
    for status in ("paused", "running"):  # however old, never these
        assert await is_(store, sids[status], SessionStatus(status))
    assert {r.session_id for r in await store.list_sessions()} == {
        sids["paused"], sids["running"]}


async def test_bad_ages_are_refused(store: Store) -> None:
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(DurableError, match=r"max age \(days\) .*must be a number of days"):
            await cleanup_sessions(store, max_age_days=bad)


async def test_a_session_deleted_after_it_was_listed_is_skipped(
        store: Store, consumer: StepConsumer, monkeypatch: pytest.MonkeyPatch) -> None:
    from strands_durable.sessions import cleanup

    gone = await start(store, spec("gone", "boom"))
    kept = await start(store, spec("kept", "boom"))
    for sid in (gone, kept):
        await wait_for(lambda s=sid: is_(store, s, SessionStatus.FAILED), what="failure")
    listed = await cleanup._candidates(store, cleanup.statuses_to_clean(False),
                                       now_ms() + 2 * DAY_MS)
    await store.delete_session(gone)  # by someone else, after the listing

    async def stale_listing(*_: object) -> list[tuple[float, str]]:
        return listed

    monkeypatch.setattr(cleanup, "_candidates", stale_listing)
    deleted = await cleanup_sessions(store, max_age_days=1, now=now_ms() + 2 * DAY_MS)
    assert deleted == [kept]
