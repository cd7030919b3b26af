"""Hostile input to provider capacity (issue 26): what a provider's throttled answer says
(Retry-After, retry-after-ms, x-ratelimit-*), the operator's DURABLE_CAPACITY_* settings,
a spec's `runtime.capacity`, and the provider keys a tenant's spec names, on a real
redis-server (worker/capacity.py, store/capacity.py, store/lua/capacity_*.lua).

Each gets a bounded, clear answer: a header's wait is finite and at most
MAX_RETRY_AFTER_S, a provider's named limit never raises the operator's, a setting is
refused naming the variable (exit 2), a limit that could never apply is refused, the keys
specs make up leave the fleet's list and a worker's memory once unused, and no control
character of a spec reaches an operator's terminal."""

from __future__ import annotations

import asyncio
import json
import math
import random
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from helpers import wait_for
from helpers.cli import durable
from pydantic import ValidationError

from strands_durable.errors import SpecError
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import WAIT_CAP_MS, CapacityGate
from strands_durable.worker.providers.transient import (
    MAX_RETRY_AFTER_S,
    Throttle,
    throttle_of,
)

KEY = ProviderKey("openai", "gpt-hostile", "")
FAR_FUTURE = "Fri, 31 Dec 9999 23:59:59 GMT"
PAST = "Thu, 01 Jan 1970 00:00:00 GMT"
HUGE_RPM = "999999999999"  # just under what the header parser believes (1e12)


def throttled(headers: dict[str, str], status: int = 429) -> Exception:
    """A throttled answer as httpx raises it (no provider SDK needed)."""
    request = httpx.Request("POST", "http://provider.test/v1/chat/completions")
    response = httpx.Response(status, headers=headers, request=request)
    return httpx.HTTPStatusError("throttled", request=request, response=response)


# -- what a throttled answer says ---------------------------------------------------------


@pytest.mark.parametrize(("headers", "expected"), [
    ({"retry-after": "nan"}, Throttle(None, None)),
    ({"retry-after": "inf"}, Throttle(None, None)),
    ({"retry-after": "-5"}, Throttle(None, None)),
    ({"retry-after": "1e400"}, Throttle(None, None)),
    ({"retry-after": "-0"}, Throttle(0.0, None)),
    ({"retry-after": FAR_FUTURE}, Throttle(MAX_RETRY_AFTER_S, None)),
    ({"retry-after": PAST}, Throttle(0.0, None)),
    ({"retry-after": "Fri, 31 Dec 99999 23:59:59 GMT"}, Throttle(None, None)),  # no year
    ({"retry-after": "Fri, 31 Dec 2030 23:59:59 +9999"}, Throttle(None, None)),  # no zone
    ({"retry-after": "Mon, 99 Foo 2020 99:99:99 GMT"}, Throttle(None, None)),
    ({"retry-after": "\x00\x1b[2J"}, Throttle(None, None)),
    ({"retry-after": "99999999999"}, Throttle(MAX_RETRY_AFTER_S, None)),  # capped
    ({"retry-after": "9" * 400}, Throttle(None, None)),  # past 1e12: not believed
    ({"retry-after-ms": "nan", "retry-after": "2"}, Throttle(2.0, None)),  # falls through
    ({"retry-after-ms": "-1", "retry-after": "2"}, Throttle(2.0, None)),
    ({"retry-after-ms": "1e20"}, Throttle(None, None)),
    ({"retry-after-ms": "99999999999"}, Throttle(MAX_RETRY_AFTER_S, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1h"},
     Throttle(MAX_RETRY_AFTER_S, None)),
    ({"x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-requests": "99999999999999999999h"},
     Throttle(MAX_RETRY_AFTER_S, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "-1s"},
     Throttle(None, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1e3s"},
     Throttle(None, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2m-3s"},
     Throttle(None, None)),
    ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1.5m0.5s"},
     Throttle(90.5, None)),
    ({"x-ratelimit-remaining-requests": "5", "x-ratelimit-reset-requests": "6m0s"},
     Throttle(None, None)),  # requests left: the reset is not a wait
    ({"x-ratelimit-limit-requests": "0"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "-500"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "0.5"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "nan"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "1e12"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "1e400"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": "500/min"}, Throttle(None, None)),
    ({"x-ratelimit-limit-requests": HUGE_RPM}, Throttle(None, int(HUGE_RPM))),
    ({"anthropic-ratelimit-requests-limit": "garbage",
      "x-ratelimit-limit-requests": "60"}, Throttle(None, 60)),
], ids=lambda v: repr(v)[:50] if isinstance(v, dict) else "")
def test_hostile_throttle_headers_read_as_a_bounded_wait_or_none(
        headers: dict[str, str], expected: Throttle) -> None:
    assert throttle_of(throttled(headers)) == expected
    assert throttle_of(throttled(headers, 529)) == expected  # Anthropic's overloaded


def test_no_header_value_makes_an_unbounded_or_non_finite_wait() -> None:
    """Random header values of digits, units, signs, dates and junk: never an exception,
    a wait in [0, MAX_RETRY_AFTER_S] or none, a limit a positive integer under 1e12."""
    draw = random.Random(27)
    alphabet = "0123456789.-+eE_ smhnaif:,GMTFriDec\t"
    names = ("retry-after", "retry-after-ms", "x-ratelimit-reset-requests",
             "x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")
    for _ in range(3_000):
        headers = {"x-ratelimit-remaining-requests": draw.choice(["0", "1", "", "00"])}
        for name in draw.sample(names, draw.randint(1, len(names))):
            headers[name] = "".join(draw.choice(alphabet) for _ in range(draw.randint(0, 40)))
        found = throttle_of(throttled(headers))
        assert found is not None, headers
        wait = found.retry_after_s
        assert wait is None or (math.isfinite(wait) and 0 <= wait <= MAX_RETRY_AFTER_S), \
            (headers, wait)
        limit = found.limit_rpm
        assert limit is None or (isinstance(limit, int) and 1 <= limit < 10**12), \
            (headers, limit)


async def test_the_hostiles_answer_backs_off_at_most_the_cap_and_never_raises_the_limit(
        store: Store) -> None:
    """A 429 saying "retry in 8,000 years" and "your limit is a trillion a minute", on a
    key the operator limits to 60 a minute: the fleet backs off MAX_RETRY_AFTER_S at most,
    pollers are told to look again within WAIT_CAP_MS, the limit in force stays 60; a
    later "Retry-After: 0" (or a past date) does not cut the backoff short."""
    policy = CapacityPolicy(capacity_limits=json.dumps(
        [{"provider": "openai", "model": KEY.model, "rpm": 60}]))
    gate = CapacityGate(store, policy)
    lease, _ = await gate.acquire(KEY, 1, 0.0, None, "")
    throttle = throttle_of(throttled({"retry-after": FAR_FUTURE,
                                      "x-ratelimit-limit-requests": HUGE_RPM}))
    assert throttle == Throttle(MAX_RETRY_AFTER_S, int(HUGE_RPM))
    await gate.throttled(lease, throttle)
    (state,) = await store.capacity_states()
    assert MAX_RETRY_AFTER_S * 1000 - 5_000 < state.backoff_ms <= MAX_RETRY_AFTER_S * 1000
    assert state.in_flight == 0  # the refused request's lease went back

    for later in ({"retry-after": "0"}, {"retry-after": PAST}, {"retry-after-ms": "-1"}):
        found = throttle_of(throttled(later))
        assert found is not None
        backoff_ms = int((found.retry_after_s or 0) * 1000)
        await store.capacity_throttled(KEY, "no-such-lease", backoff_ms, 0, 0.7, 1)
    (state,) = await store.capacity_states()
    assert state.backoff_ms > MAX_RETRY_AFTER_S * 1000 - 5_000  # not cut short

    grant = await store.capacity_acquire(KEY, gate.limits(KEY),
                                         [Candidate("s", "next", 1)], 30_000, WAIT_CAP_MS)
    assert not grant.granted and grant.reason == "backoff"
    assert 1 <= grant.wait_ms <= WAIT_CAP_MS
    assert 0 < grant.rpm <= 60


async def test_a_named_limit_on_a_success_never_lifts_the_declared_one(store: Store) -> None:
    """Every answer may name the account's limit (x-ratelimit-limit-requests): one
    naming a trillion, or 1, on a key declared at 6,000 a minute: never above it."""
    key = ProviderKey("openai", "gpt-told", "")
    limits = DeclaredLimits(rpm=6_000)  # a bucket of ten: each ask below is granted
    await store.capacity_register(key)
    for n, told in enumerate((int(HUGE_RPM), 1, int(HUGE_RPM))):
        grant = await store.capacity_acquire(key, limits, [Candidate("s", f"l{n}", 1)],
                                             30_000, WAIT_CAP_MS)
        assert grant.granted and 0 < grant.rpm <= 6_000, grant
        await store.capacity_release(key, limits, grant.lease_id, 0, True, None, told)
        (state,) = [s for s in await store.capacity_states() if s.key == key]
        assert 0 < state.learned_rpm <= 6_000, (told, state.learned_rpm)


# -- the operator's settings ------------------------------------------------------------


def _cli(settings: DurableSettings, *args: str, **env: str) -> tuple[int, str]:
    base = {"DURABLE_REDIS_URL": settings.redis_url, "DURABLE_KEY_PREFIX": settings.key_prefix}
    done = CliRunner().invoke(durable(), list(args), env={**base, **env})
    return done.exit_code, done.output


@pytest.mark.parametrize(("name", "value", "says"), [
    ("CAPACITY_LIMITS", '[{"provider": "openai", "in_flight": -1}]', "0.in_flight"),
    ("CAPACITY_LIMITS", '[{"provider": "openai", "rpm": 1.5}]', "0.rpm"),
    ("CAPACITY_LIMITS", '[{"provider": "openai", "tpm": 1e400}]', "0.tpm"),
    ("CAPACITY_LIMITS", '[{"provider": "openai", "rpm": 10000001}]', "0.rpm"),
    ("CAPACITY_LIMITS", '[{"provider": ""}]', "0.provider"),
    ("CAPACITY_LIMITS", '[{"provider": "' + "p" * 65 + '"}]', "0.provider"),
    ("CAPACITY_LIMITS", '[{"provider": "openai"}, {"provider": "openai", "rpm": [1]}]',
     "1.rpm"),
    ("CAPACITY_LIMITS", '{"provider": "openai"}', "valid array"),
    ("CAPACITY_LIMITS", '[{"provider": "openai", "rpm": 5', "Invalid JSON"),
    ("CAPACITY_MAX_WAIT_S", "nan", "finite"),
    ("CAPACITY_MAX_WAIT_S", "1e999", "finite"),
    ("CAPACITY_MAX_WAIT_S", "0", "greater than 0"),
    ("CAPACITY_MAX_WAIT_S", "86401", "less than or equal"),
    ("CAPACITY_LEASE_S", "0.5", "greater than or equal to 1"),
    ("CAPACITY_LEASE_S", "-inf", "CAPACITY_LEASE_S"),
    ("CAPACITY_LEASE_S", "3601", "less than or equal"),
    ("CAPACITY_ENABLED", "maybe", "valid boolean"),
], ids=lambda v: str(v)[:30])
async def test_hostile_capacity_settings_exit_2_naming_the_variable(
        settings: DurableSettings, name: str, value: str, says: str) -> None:
    for command in ("capacity", "workers"):
        rc, output = await asyncio.to_thread(_cli, settings, command,
                                             **{f"DURABLE_{name}": value})
        assert rc == 2, (command, rc, output)
        assert f"DURABLE_{name}" in output and says in output, output
        assert "Traceback" not in output


@pytest.mark.parametrize("value", ['{"provider": "openai", "rpm": true}',
                                   '{"provider": "openai", "in_flight": true}',
                                   '{"provider": "openai", "rpm": "7"}'],
                         ids=["rpm-true", "in_flight-true", "rpm-string"])
def test_a_boolean_or_string_limit_is_refused_as_the_spec_refuses_it(value: str) -> None:
    with pytest.raises(ValidationError, match=r"0\.(rpm|in_flight)"):
        CapacityPolicy(capacity_limits=f"[{value}]")


@pytest.mark.parametrize("entry", [
    {"provider": "opnai", "rpm": 10},
    {"provider": "OpenAI", "rpm": 10},
    {"provider": "openai", "host": "gw.example.com", "rpm": 10},
    {"provider": "openai", "host": "https://gw.example.com/v1?key=x", "rpm": 10},
], ids=["typo", "case", "no-scheme", "query"])
def test_a_limit_that_can_never_apply_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(ValidationError, match=r"0\.(provider|host)"):
        CapacityPolicy(capacity_limits=json.dumps([entry]))


async def test_a_huge_refused_setting_is_not_echoed_back_whole(
        settings: DurableSettings) -> None:
    rc, output = await asyncio.to_thread(_cli, settings, "capacity",
                                         DURABLE_CAPACITY_LIMITS="[" * 100_000)
    assert rc == 2 and "DURABLE_CAPACITY_LIMITS" in output
    assert len(output) < 2_000, len(output)


# -- a spec's own limits ------------------------------------------------------------------

SPEC = """
version: 0
name: hostile-capacity
runtime:
  provider: openai
  model_id: gpt-4o
  capacity: {capacity}
agents: {{a: {{prompt: "A."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: x}}]}}}}
"""


@pytest.mark.parametrize(("value", "path"), [
    ("{rpm: .inf}", "runtime.capacity.rpm"),
    ("{rpm: .nan}", "runtime.capacity.rpm"),
    ("{rpm: -.inf}", "runtime.capacity.rpm"),
    ("{rpm: 1e3}", "runtime.capacity.rpm"),
    ("{rpm: !!str 3}", "runtime.capacity.rpm"),
    ("{rpm: !!float 3}", "runtime.capacity.rpm"),
    ("{rpm: 2019-01-01}", "runtime.capacity.rpm"),
    ("{rpm: !!binary aGk=}", "runtime.capacity.rpm"),
    ("{tpm: 10000000001}", "runtime.capacity.tpm"),
    ("{wait_counts_toward_duration: 1}", "runtime.capacity.wait_counts_toward_duration"),
    ("{wait_counts_toward_duration: 'no'}", "runtime.capacity.wait_counts_toward_duration"),
    ("null", "runtime.capacity"),
    ("''", "runtime.capacity"),
], ids=lambda v: str(v)[:30])
def test_more_hostile_spec_limits_are_refused_naming_the_field(value: str, path: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec_text(SPEC.format(capacity=value), "s.yaml")
    assert info.value.path == path and len(str(info.value)) < 300


# -- provider keys a tenant's spec names ------------------------------------------------

HOSTILE_MODELS = 150


async def _call_each(gate: CapacityGate, keys: list[ProviderKey]) -> None:
    """One model request on each key, as a step of a spec naming that model makes."""
    for key in keys:
        lease, _ = await gate.acquire(key, 1, 0.0, None, "")
        await gate.release(lease, None, succeeded=False)


def _hostile_keys(tag: str) -> list[ProviderKey]:
    # A spec's model_id is free text (a failing model still takes its turn first).
    return [ProviderKey("openai", f"{tag}-{n}-" + "m" * 2_000, "")
            for n in range(HOSTILE_MODELS)]


async def test_provider_keys_named_by_specs_do_not_pile_up_for_good(store: Store) -> None:
    await _call_each(CapacityGate(store, CapacityPolicy()), _hostile_keys("registry"))
    registry = store.keys.capacity_keys()

    async def registered() -> int:
        return int(await store.redis.hlen(registry))  # type: ignore[misc]

    assert await registered() == HOSTILE_MODELS
    # A day later: every key's own state has expired (PEXPIRE of a day); delete it now.
    async for name in store.redis.scan_iter(f"{store.keys.prefix}:cap:*"):
        await store.redis.delete(name)
    fresh = ProviderKey("openai", "named-just-now")
    await store.capacity_register(fresh)  # registered, no request yet: listed
    states = await store.capacity_states()
    assert [state.key for state in states] == [fresh]
    assert await registered() == 1


async def test_a_worker_keeps_nothing_per_idle_provider_key(store: Store) -> None:
    gate = CapacityGate(store, CapacityPolicy())
    await _call_each(gate, _hostile_keys("queues"))

    async def pollers_done() -> bool:
        return all(q.poller is None for q in gate._queues.values())

    await wait_for(pollers_done, timeout_s=30, what="the keys' pollers to end")
    assert len(gate._queues) < HOSTILE_MODELS // 2, len(gate._queues)


async def test_durable_capacity_prints_no_terminal_escapes_from_a_spec(
        store: Store, settings: DurableSettings) -> None:
    loaded = load_spec_text(SPEC.format(capacity="{}").replace(
        "model_id: gpt-4o", 'model_id: "gpt\\e]0;owned\\a\\e[2J"'), "s.yaml")
    model = loaded.spec.runtime.model_id or ""
    assert "\x1b" in model  # the spec loader takes it
    await _call_each(CapacityGate(store, CapacityPolicy()), [ProviderKey("openai", model)])
    for command in ("capacity", "workers"):
        rc, output = await asyncio.to_thread(_cli, settings, command)
        assert rc == 0, output
        assert "gpt" in output and "\x1b" not in output, (command, repr(output[:400]))
