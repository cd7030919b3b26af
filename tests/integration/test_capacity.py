"""Provider capacity shared by the fleet (worker/capacity.py, store/lua/capacity_*.lua) on
a real redis-server: declared limits, leases that lapse by themselves, the shared backoff
and AIMD after a throttle; and end to end, real `arq worker`s against a fake OpenAI
server with an account limit: every session completes, a throttled step waits instead of
failing (no attempt, no retry, no dead letter spent)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import wait_for

from bench.limited_llm import limited_llm
from strands_durable.models import SessionStatus
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import CapacityExhausted, CapacityGate
from strands_durable.worker.providers.transient import Throttle, throttle_of

KEY = ProviderKey("openai", "gpt-test", "http://127.0.0.1:1/v1")


async def _take(store: Store, limits: DeclaredLimits, lease: str, ttl_ms: int = 30_000,
                tokens: int = 1, key: ProviderKey = KEY, session: str = "s") -> Any:
    return await store.capacity_acquire(key, limits, [Candidate(session, lease, tokens)],
                                        ttl_ms, 1_000)


async def test_declared_requests_per_minute_hold_for_every_caller(store: Store) -> None:
    limits = DeclaredLimits(rpm=1_200)  # twenty a second, spread out: a bucket of two
    grants = [await _take(store, limits, f"l{i}") for i in range(3)]
    assert [g.granted for g in grants] == [True, True, False]
    assert grants[2].reason == "requests_per_minute" and 1 <= grants[2].wait_ms <= 100
    # Another key has its own share.
    other = ProviderKey("openai", "other-model")
    assert (await _take(store, limits, "x", key=other)).granted


async def test_in_flight_leases_lapse_by_themselves_when_their_holder_dies(store: Store
                                                                          ) -> None:
    limits = DeclaredLimits(in_flight=1)
    assert (await _take(store, limits, "held-by-a-dead-worker", ttl_ms=300)).granted
    refused = await _take(store, limits, "next")
    assert not refused.granted and refused.reason == "in_flight"

    async def granted() -> bool:
        return bool((await _take(store, limits, "next")).granted)

    await wait_for(granted, timeout_s=10, what="the dead holder's lease to lapse")


async def test_a_released_lease_frees_its_slot_at_once(store: Store) -> None:
    limits = DeclaredLimits(in_flight=1)
    assert (await _take(store, limits, "a")).granted
    await store.capacity_release(KEY, limits, "a", 0, succeeded=True)
    assert (await _take(store, limits, "b")).granted


async def test_tokens_per_minute_count_what_the_provider_reported(store: Store) -> None:
    limits = DeclaredLimits(tpm=6_000)  # ten seconds' worth: a bucket of 1,000
    assert (await _take(store, limits, "a", tokens=600)).granted
    # The provider counted 900, not 600: the bucket is charged the difference.
    await store.capacity_release(KEY, limits, "a", 300, succeeded=True)
    refused = await _take(store, limits, "b", tokens=200)
    assert not refused.granted and refused.reason == "tokens_per_minute"


async def test_a_throttle_backs_off_the_whole_fleet_and_halves_once_per_window(
        store: Store) -> None:
    limits = DeclaredLimits()
    for i in range(20):  # the fleet sends 20 requests, nothing declared or learned
        assert (await _take(store, limits, f"l{i}")).granted
    rpm, in_flight = await store.capacity_throttled(KEY, "l0", 60_000, 0, 0.7, 1)
    assert rpm > 0 and in_flight == 14  # 20 in flight when it came (itself too): 0.7 of it
    # Every caller now waits out the shared backoff, whoever asks.
    refused = await _take(store, limits, "new")
    assert not refused.granted and refused.reason == "backoff"
    # Nineteen more throttles of the same burst decrease nothing further.
    for i in range(1, 20):
        again = await store.capacity_throttled(KEY, f"l{i}", 60_000, 0, 0.7, 1)
        assert again == (rpm, in_flight)
    states = {s.key: s for s in await store.capacity_states()}
    assert states == {} or KEY not in states  # registered only by a gate
    await store.capacity_register(KEY)
    state = {s.key: s for s in await store.capacity_states()}[KEY]
    assert state.throttled == 20 and state.backoff_ms > 0 and state.learned_rpm == rpm


async def test_the_providers_own_limit_is_believed(store: Store) -> None:
    assert (await _take(store, DeclaredLimits(), "a")).granted
    rpm, _ = await store.capacity_throttled(KEY, "a", 10, 600, 0.7, 1)
    assert rpm == pytest.approx(570)  # 0.95 of x-ratelimit-limit-requests


async def test_successes_grow_the_learned_rate_back_but_never_past_the_declared(
        store: Store) -> None:
    limits = DeclaredLimits(rpm=12_000)
    assert (await _take(store, limits, "a")).granted
    # The provider names no limit (one it named is a ceiling: test_capacity_told_limit).
    rpm, _ = await store.capacity_throttled(KEY, "a", 1, 0, 0.7, 1)
    assert 0 < rpm < 12_000

    async def after_backoff() -> Any:
        grant = await _take(store, limits, "b")
        return grant if grant.granted else None

    await wait_for(after_backoff, timeout_s=10, what="the backoff to end")
    await store.capacity_release(KEY, limits, "b", 0, succeeded=True)
    assert (await _take(store, limits, "c")).rpm == pytest.approx(rpm + 1)


async def test_a_gate_that_waits_too_long_fails_naming_key_and_limit(store: Store) -> None:
    gate = CapacityGate(store, CapacityPolicy(capacity_max_wait_s=0.3, capacity_limits=json.dumps(
        [{"provider": "openai", "model": "gpt-test", "in_flight": 1}])))
    lease, _ = await gate.acquire(KEY, 1, 0.0, None)
    told: list[tuple[str, str, int]] = []

    async def on_wait(label: str, reason: str, wait_ms: int) -> None:
        told.append((label, reason, wait_ms))

    with pytest.raises(CapacityExhausted) as info:
        await gate.acquire(KEY, 1, 0.0, on_wait)
    message = str(info.value)
    assert KEY.label in message and "requests-at-once" in message
    assert "DURABLE_CAPACITY_MAX_WAIT_S" in message
    assert len(told) == 1 and told[0][1] == "in_flight"  # told once per wait
    await gate.release(lease, None, succeeded=False)


def _response_error(status: int, headers: dict[str, str]) -> Exception:
    openai = pytest.importorskip("openai")
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    klass = openai.RateLimitError if status == 429 else openai.InternalServerError
    return klass("throttled", response=response, body=None)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "3"}, Throttle(3.0, None)),
    ({"retry-after-ms": "250", "retry-after": "3"}, Throttle(0.25, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
      "x-ratelimit-limit-requests": "500"}, Throttle(360.0, 500)),
    ({"retry-after": "99999999"}, Throttle(600.0, None)),  # capped
    ({"retry-after": "soon"}, Throttle(None, None)),
    ({"anthropic-ratelimit-requests-limit": "50"}, Throttle(None, 50)),
])
def test_throttles_are_read_from_the_providers_headers(headers: dict[str, str],
                                                       expected: Throttle) -> None:
    assert throttle_of(_response_error(429, headers)) == expected


def test_strands_wrapped_throttles_and_529_are_throttles_and_a_500_is_not() -> None:
    from strands.types.exceptions import ModelThrottledException

    try:
        try:
            raise _response_error(429, {"retry-after": "2"})
        except Exception as inner:
            raise ModelThrottledException("throttled") from inner
    except ModelThrottledException as outer:
        assert throttle_of(outer) == Throttle(2.0, None)
    assert throttle_of(_response_error(500, {})) is None

    class Overloaded(Exception):
        status_code = 529

    assert throttle_of(Overloaded()) == Throttle(None, None)


SPEC = """
version: 0
name: limited-{n}
runtime: {{provider: openai, model_id: gpt-limited, host: "{host}",
          failure_policy: {{retries: 0}}}}
agents: {{a: {{prompt: "You answer."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: "one {n}"}},
           {{agent: a, input: "two {n}"}}, {{agent: a, input: "three {n}"}}]}}}}
"""


@pytest.mark.timeout(300)
async def test_real_workers_against_an_account_limit_complete_every_session(
        fleet_factory: Callable[..., Any], store: Store, tmp_path: Path,
        allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `arq` workers of 16 slots, 16 sessions x 3 steps, a server that takes 10
    requests a second and 6 at once and throttles beyond: every session completes, each
    step on its first attempt (waiting spent none), though the server throttled."""
    from strands_durable.sessions.start import start_session
    from strands_durable.spec.loader import load_spec_text

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # Named only on a 429: the fleet learns the limit by meeting it (throttles happen).
    with limited_llm(per_second=10, at_once=6, delay_s=0.2, names_limit=False) as server:
        allow_provider_host("openai", server.url())
        fleet = fleet_factory(worker_concurrency=16)
        fleet.start_worker()
        fleet.start_worker()
        ids = []
        for n in range(16):
            spec = load_spec_text(SPEC.format(n=n, host=server.url("/v1")), f"s{n}.yaml")
            ids.append((await start_session(store, spec))[0])

        async def all_ended() -> bool:
            records = [await store.get_session(sid) for sid in ids]
            return all(r.status != SessionStatus.RUNNING for r in records)

        await wait_for(all_ended, timeout_s=240, what="every session to end")
        records = [await store.get_session(sid) for sid in ids]
        assert [r.status for r in records] == [SessionStatus.COMPLETED] * len(ids), \
            [r.error for r in records]
        for sid in ids:
            kinds = [f["type"] for _, f in await store.events(sid)]
            assert "step_failed" not in kinds and "step_retried" not in kinds
            assert kinds.count("step_completed") == 3
        assert server.accepted == 16 * 3  # each step's request went through once
        assert server.peak_at_once <= 6
        print(f"\n{server.accepted} accepted, {server.throttled} throttled "
              f"({server.throttled / (server.accepted + server.throttled):.1%})")


def test_declared_limits_pick_the_most_specific_entry_and_refuse_bad_ones() -> None:
    from pydantic import ValidationError

    policy = CapacityPolicy(capacity_limits=json.dumps([
        {"provider": "openai", "rpm": 100},
        {"provider": "openai", "model": "gpt-4o", "rpm": 50},
        {"provider": "openai", "model": "gpt-4o", "host": "https://gw/v1", "rpm": 10}]))
    assert policy.declared("openai", "gpt-4o", "https://gw/v1").rpm == 10  # type: ignore[union-attr]
    # The host as a spec may write the same endpoint: case, default port, trailing slash.
    assert policy.declared("openai", "gpt-4o", "HTTPS://GW:443/v1/").rpm == 10  # type: ignore[union-attr]
    assert policy.declared("openai", "gpt-4o", "https://gw/v2").rpm == 50  # type: ignore[union-attr]
    assert policy.declared("openai", "gpt-4o", "").rpm == 50  # type: ignore[union-attr]
    assert policy.declared("openai", "other", "").rpm == 100  # type: ignore[union-attr]
    assert policy.declared("anthropic", "x", "") is None
    assert CapacityPolicy(capacity_limits="").declared_limits == ()
    for bad in ("nope", '[{"provider": "openai", "rpm": -1}]', '[{"rpm": 1}]',
                '[{"provider": "openai", "burst": 3}]', '{"provider": "openai"}'):
        with pytest.raises(ValidationError):
            CapacityPolicy(capacity_limits=bad)


class _Flaky:
    """A provider model that throttles `throttles` times before it answers, or fails
    after a part of its reply when `cut` (a stream cut short: never retried here)."""

    def __init__(self, throttles: int = 0, cut: bool = False) -> None:
        self.throttles, self.cut, self.calls = throttles, cut, 0

    async def stream(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.throttles:
            raise _response_error(429, {"retry-after-ms": "20"})
        yield {"messageStart": {"role": "assistant"}}
        if self.cut:  # after a part of its reply (a messageStart alone is none: Gemini's
            # SDK yields one before it sends the request)
            yield {"contentBlockDelta": {"delta": {"text": "par"}}}
            raise _response_error(429, {})
        yield {"metadata": {"usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}}}


async def _drain(model: Any) -> list[Any]:
    return [event async for event in model.stream([{"role": "user", "content": [
        {"text": "hi"}]}], None, "sys")]


async def test_a_throttled_request_waits_and_goes_again_in_place(store: Store) -> None:
    from strands_durable.worker.capacity_model import CapacityModel

    gate = CapacityGate(store, CapacityPolicy())
    inner = _Flaky(throttles=2)
    told: list[str] = []

    async def on_wait(label: str, reason: str, wait_ms: int) -> None:
        told.append(reason)

    events = await _drain(CapacityModel(inner, gate, KEY, 16, on_wait))  # type: ignore[arg-type]
    assert inner.calls == 3 and events[-1]["metadata"]["usage"]["totalTokens"] == 7
    assert told == ["backoff", "backoff"]  # each ask after a throttle found the backoff
    state = {s.key: s for s in await store.capacity_states()}[KEY]
    assert state.throttled == 2 and state.in_flight == 0  # every lease given back


async def test_a_stream_cut_after_it_answered_is_not_retried_here(store: Store) -> None:
    from strands_durable.worker.capacity_model import CapacityModel

    inner = _Flaky(cut=True)
    with pytest.raises(Exception, match="throttled"):
        await _drain(CapacityModel(inner, CapacityGate(store, CapacityPolicy()), KEY))  # type: ignore[arg-type]
    assert inner.calls == 1
    state = {s.key: s for s in await store.capacity_states()}[KEY]
    assert state.in_flight == 0 and state.throttled == 0



async def test_durable_capacity_lists_each_key_with_its_limits(
        store: Store, prefix: str, redis_server: Any) -> None:
    import asyncio
    import os
    import subprocess

    from helpers import REPO
    from helpers.fleet import durable_bin

    gate = CapacityGate(store, CapacityPolicy())
    lease, _ = await gate.acquire(KEY, 10, 0.0, None)
    await gate.throttled(lease, Throttle(30.0, 600))
    env = {**os.environ, "DURABLE_REDIS_URL": redis_server.url, "DURABLE_KEY_PREFIX": prefix,
           "DURABLE_CAPACITY_LIMITS": json.dumps([{"provider": "openai", "in_flight": 4}])}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*durable_bin(), "capacity", *args], env=env, cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    done = await asyncio.to_thread(cli, "--json")
    assert done.returncode == 0, done.stderr
    [doc] = json.loads(done.stdout)
    assert (doc["provider"], doc["model"], doc["host"]) == (KEY.provider, KEY.model, KEY.host)
    assert doc["declared"] == {"rpm": 0, "tpm": 0, "in_flight": 4}
    assert doc["learned_rpm"] == pytest.approx(570) and doc["throttled"] == 1
    assert doc["in_flight"] == 0 and 0 < doc["backoff_ms"] <= 30_000
    table = await asyncio.to_thread(cli)
    assert table.returncode == 0 and "gpt-test" in table.stdout and "rpm 570" in table.stdout
