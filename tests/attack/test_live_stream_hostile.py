"""Hostile input to the live token stream (issue 27): GET /v1/sessions/{id}/stream
(sessions/live.py, api/sse.py), the ids a client resumes from (`after`, Last-Event-ID)
and `durable watch ID --tokens`, through the ASGI app (or uvicorn where a client must
hang up) on a real redis-server. Each gets a bounded, clear answer: a 4xx naming what is
wrong before any stream starts, or a stream that ends with its `end` frame; a client
that hangs up leaves no watch behind.

An `after` of non-ASCII digits (Arabic-Indic, fullwidth) once passed the id check
(`\\d` and int() take every Unicode digit) and reached Redis, which refused it: a 500
on the history, a stream cut off after its headers on the live and followed routes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from click.testing import CliRunner
from fastapi import FastAPI
from helpers import wait_for
from helpers.api import error_of, frames_of, make_app, served_client, submit, wait_status
from helpers.cli import durable

from strands_durable.settings import DurableSettings
from strands_durable.store.codec import MAX_STREAM_ID_PART
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

SPEC = """
version: 0
name: hostile-live
runtime:
  provider: scripted
  script: {rules: [{reply: "one two three"}]}
agents: {a: {prompt: "A."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "x"}]}}
"""
UNKNOWN = "00000000-0000-4000-8000-000000000000"
LARGEST = f"{MAX_STREAM_ID_PART}-{MAX_STREAM_ID_PART}"
# Ids of the right shape in another script's digits: Python's \d and int() take them,
# Redis does not.
UNICODE_DIGITS = ("\u0661\u0662\u0663",  # Arabic-Indic 123
                  "\uff11-\uff12",  # fullwidth 1-2
                  "1-\u0967")  # 1- Devanagari 1


@asynccontextmanager
async def lenient_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client on the ASGI app that gets what a real client gets when the app raises
    (the 500, or a stream cut short), instead of the exception."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://api.test",
                                     timeout=30) as client:
            yield client


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with lenient_client(app) as client:
        yield client


@pytest.fixture
async def completed(http: httpx.AsyncClient, consumer: StepConsumer, store: Store) -> str:
    """A session that ran to completion, its live stream written to its turn's end (the
    worker flushes it apart from the commit: it may land just after)."""
    return await run_to_the_end(http, store, SPEC)


async def run_to_the_end(http: httpx.AsyncClient, store: Store, spec: str) -> str:
    sid = await submit(http, spec)
    await wait_status(http, sid, "completed")

    async def flushed() -> bool:
        return any(f.get("kind") == "turn_end" for _, f in await store.live_entries(sid))

    await wait_for(flushed, timeout_s=30, what="the live stream's last flush")
    return sid


# -- ids a client resumes from ------------------------------------------------------------


@pytest.mark.parametrize("bad", UNICODE_DIGITS, ids=["arabic", "fullwidth", "devanagari"])
async def test_non_ascii_digits_in_after_are_a_422_on_the_live_stream(
        http: httpx.AsyncClient, completed: str, bad: str) -> None:
    r = await http.get(f"/v1/sessions/{completed}/stream", params={"after": bad})
    assert r.status_code == 422, (r.status_code, r.text[-300:])
    assert "after" in r.text


async def test_non_ascii_digits_in_after_are_a_422_on_the_history(
        http: httpx.AsyncClient, completed: str) -> None:
    r = await http.get(f"/v1/sessions/{completed}/events", params={"after": UNICODE_DIGITS[0]})
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert "after" in r.text


async def test_non_ascii_digits_in_after_are_a_422_on_the_followed_events(
        http: httpx.AsyncClient, completed: str) -> None:
    r = await http.get(f"/v1/sessions/{completed}/events",
                       params={"after": UNICODE_DIGITS[0], "follow": "1"})
    assert r.status_code == 422, (r.status_code, r.text[-300:])


async def test_non_ascii_digits_in_before_are_a_422_on_the_audit_trail(
        http: httpx.AsyncClient) -> None:
    assert (await http.get("/v1/audit", params={"before": "123"})).status_code == 200
    r = await http.get("/v1/audit", params={"before": UNICODE_DIGITS[0]})
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert "before" in r.text


@pytest.mark.parametrize("bad", [
    "", " ", "-1", "1-", "-", "1-2-3", "1.5", "0x10", "1e3", "1 2", "abc", "1-a",
    "+1", "1_000", "1" * 21, "1-" + "2" * 21, "9" * 20_000, "0-0;1", "$", "*", "<-1>"],
    ids=lambda v: repr(v)[:24])
async def test_malformed_resume_ids_are_a_bounded_422_naming_the_field(
        http: httpx.AsyncClient, completed: str, bad: str) -> None:
    """Query parameter and header alike: a 422 that names the field, never echoes a
    long value back, and starts no stream (the response is the error envelope)."""
    for params, headers, field in (({"after": bad}, {}, "after"),
                                   ({}, {"Last-Event-ID": bad}, "Last-Event-ID")):
        r = await http.get(f"/v1/sessions/{completed}/stream", params=params,
                           headers=headers)
        err = error_of(r, 422)
        assert err["code"] in ("invalid_request", "invalid_id"), err
        assert field in r.text, r.text[:300]
        assert len(r.content) < 2_000, len(r.content)
        assert not r.headers["content-type"].startswith("text/event-stream")


async def test_a_resume_id_past_the_stream_ends_at_once_with_nothing_replayed(
        http: httpx.AsyncClient, completed: str) -> None:
    """A far-future id, the largest id (which Redis refuses as an exclusive start), the
    largest of one part, and 0-0 with leading zeros: an ended session's stream answers
    its `end` frame and no live entry (everything, from 0-0), never an error."""
    everything = frames_of((await http.get(f"/v1/sessions/{completed}/stream")).text)
    live = [f for f in everything if f.event != "end"]
    assert live and everything[-1].event == "end"
    # Each answer takes a follower's quiet wait and the end's grace (about 1.5 s): the
    # query and the header take turns.
    for n, after in enumerate(("99999999999999-0", LARGEST, str(MAX_STREAM_ID_PART),
                               "0" * 20 + "-" + "0" * 20)):
        params, headers = ({"after": after}, {}) if n % 2 else ({}, {"Last-Event-ID": after})
        r = await http.get(f"/v1/sessions/{completed}/stream", params=params,
                           headers=headers)
        assert r.status_code == 200, r.text[:300]
        got = frames_of(r.text)
        assert got[-1].event == "end" and got[-1].data == {
            "session_id": completed, "status": "completed"}
        if after.startswith("0" * 20):  # all zeros: 0-0, so everything again
            assert [f.id for f in got[:-1]] == [f.id for f in live]
        else:
            assert got == got[-1:], (after, [f.event for f in got])


async def test_the_header_wins_over_the_query_and_unknown_parameters_are_ignored(
        http: httpx.AsyncClient, completed: str) -> None:
    live = [f for f in frames_of((await http.get(f"/v1/sessions/{completed}/stream")).text)
            if f.event != "end"]
    assert len(live) >= 2
    r = await http.get(f"/v1/sessions/{completed}/stream",
                       params={"after": "0-0", "follow": "nope", "count": "-1",
                               "limit": "99999999999", "x" * 200: "y" * 2_000},
                       headers={"Last-Event-ID": str(live[0].id)})
    assert r.status_code == 200, r.text[:300]
    assert [f.id for f in frames_of(r.text)[:-1]] == [f.id for f in live[1:]]


# -- session ids ----------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    UNKNOWN.replace("0", "A", 1), UNKNOWN[:-1], UNKNOWN + "0", "..%2F..%2Fmeta", "%00", "x" * 5_000,
    UNKNOWN.replace("0", "\u0660", 1)], ids=lambda v: repr(v)[:20])
async def test_malformed_session_ids_are_a_bounded_4xx_before_any_stream(
        http: httpx.AsyncClient, bad: str) -> None:
    r = await http.get(f"/v1/sessions/{bad}/stream", headers={"Last-Event-ID": "1-1"})
    assert r.status_code in (404, 422), (r.status_code, r.text[:300])
    assert len(r.content) < 2_000
    assert not r.headers["content-type"].startswith("text/event-stream")


async def test_a_deleted_session_is_404_and_leaves_no_stream(
        http: httpx.AsyncClient, completed: str, store: Store) -> None:
    assert await store.redis.exists(store.keys.live(completed)) == 1
    assert (await http.delete(f"/v1/sessions/{completed}")).status_code in (200, 204)
    assert error_of(await http.get(f"/v1/sessions/{completed}/stream"), 404)["code"] == \
        "session_not_found"
    assert await store.redis.exists(store.keys.live(completed)) == 0


# -- many clients ---------------------------------------------------------------------------


@pytest.mark.timeout(120)
async def test_many_clients_that_hang_up_leave_no_watch_behind(
        settings: DurableSettings, store: Store) -> None:
    """Forty clients on a session that keeps running (no worker takes it) and four on
    sessions of their own; each hangs up after its first frame. Their followers and the
    watches (one blocking Redis read each) end with them."""
    app = make_app(settings)
    async with served_client(app, timeout=30) as client:
        sids = [await submit(client, SPEC) for _ in range(5)]
        targets = [sids[0]] * 40 + sids[1:]
        opened = [asyncio.Event() for _ in targets]

        async def follow(n: int, sid: str) -> None:
            async with client.stream("GET", f"/v1/sessions/{sid}/stream") as r:
                assert r.status_code == 200
                async for _ in r.aiter_bytes():
                    opened[n].set()
                    await asyncio.Event().wait()  # hold it open until cancelled

        tasks = [asyncio.create_task(follow(n, sid)) for n, sid in enumerate(targets)]
        await asyncio.wait_for(asyncio.gather(*(o.wait() for o in opened)), 60)

        async def all_following() -> bool:
            watches = getattr(app.state, "live_followers", None)
            return watches is not None and sum(
                w.followers for w in watches._watches.values()) == len(targets)

        await wait_for(all_following, timeout_s=30, what="every client to follow")
        assert len(app.state.live_followers._watches) == 5  # one per session, not per client
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

        async def none_left() -> bool:
            return app.state.live_followers._watches == {}

        await wait_for(none_left, timeout_s=30, what="the watches to end with their clients")


# -- durable watch --tokens -----------------------------------------------------------------


def _watch_tokens(settings: DurableSettings, *args: str) -> tuple[int, str]:
    env = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix}
    done = CliRunner().invoke(durable(), ["watch", *args, "--tokens"], env=env)
    return done.exit_code, done.output


@pytest.mark.parametrize(("sid", "code", "says"), [
    (UNKNOWN, 1, "not found"),
    ("not-a-session", 2, "session id"),
    (UNKNOWN.replace("0", "A", 1), 2, "session id"),
    ("x" * 10_000, 2, "session id"),
], ids=["unknown", "malformed", "upper-case", "huge"])
async def test_watch_tokens_on_a_bad_session_exits_with_a_clear_line(
        settings: DurableSettings, sid: str, code: int, says: str) -> None:
    rc, output = await asyncio.to_thread(_watch_tokens, settings, sid)
    assert rc == code, output
    assert says in output and "Traceback" not in output, output
    assert len(output) < 1_000, len(output)


async def test_watch_tokens_with_a_hostile_timeout_is_refused(
        settings: DurableSettings, completed: str) -> None:
    for timeout in ("-1", "nan", "inf", "1e999", "abc"):
        rc, output = await asyncio.to_thread(_watch_tokens, settings, completed,
                                             "--timeout", timeout)
        assert rc == 2 and "Traceback" not in output, (timeout, rc, output)
        assert "timeout" in output.lower(), (timeout, output)
    rc, output = await asyncio.to_thread(_watch_tokens, settings, completed)
    assert rc == 0 and "one two three" in output, output



ESCAPING = r"""
version: 0
name: hostile-escapes
runtime:
  provider: scripted
  script: {rules: [{reply: "plain \e]0;owned\a\e[2J\e]52;c;b3duZWQ=\a text"}]}
agents: {a: {prompt: "A."}}
pattern: {type: chain, config: {steps: [{agent: a, input: "x"}]}}
"""


async def test_watch_tokens_writes_no_terminal_escapes(
        http: httpx.AsyncClient, consumer: StepConsumer, settings: DurableSettings,
        store: Store) -> None:
    sid = await run_to_the_end(http, store, ESCAPING)
    rc, output = await asyncio.to_thread(_watch_tokens, settings, sid)
    assert rc == 0 and "plain" in output and "text" in output, output
    assert "\x1b" not in output, repr(output)
