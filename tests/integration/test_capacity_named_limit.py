"""A limit the provider names on every answer, not only on a 429 (OpenAI's and
Anthropic's requests-a-minute headers), is believed from the first answer: the fleet
paces itself just under it before it ever meets it. On a real redis-server
(store/lua/capacity_release.lua) and through the real OpenAI SDK against a local server
(worker/providers/openai.py's response hook, worker/providers/told.py,
worker/capacity_model.py)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import pytest
from helpers import wait_for
from wire_fakes import wire_fake

from bench.limited_llm import limited_llm
from strands_durable.provider_policy import CapacityPolicy
from strands_durable.store.capacity import Candidate, DeclaredLimits, ProviderKey
from strands_durable.store.store import Store
from strands_durable.worker.capacity import CapacityGate
from strands_durable.worker.capacity_model import CapacityModel
from strands_durable.worker.providers import ModelConfig, build_model

KEY = ProviderKey("openai", "gpt-named", "http://127.0.0.1:1/v1")
NOTHING = DeclaredLimits()


async def _served(store: Store, lease: str, told_rpm: int) -> float:
    """One request granted and answered naming `told_rpm`; the rate learned after it."""
    async def granted() -> bool:
        grant = await store.capacity_acquire(KEY, NOTHING, [Candidate("s", lease, 1)],
                                             30_000, 1_000)
        return bool(grant.granted)

    await wait_for(granted, timeout_s=10, what=f"{lease} to be granted")
    await store.capacity_release(KEY, NOTHING, lease, 0, succeeded=True, told_rpm=told_rpm)
    await store.capacity_register(KEY)
    return {s.key: s for s in await store.capacity_states()}[KEY].learned_rpm


async def test_the_first_answer_naming_a_limit_paces_the_fleet_under_it(store: Store) -> None:
    assert await _served(store, "a", 0) == 0  # nothing named: nothing learned, no pace
    assert await _served(store, "b", 600) == pytest.approx(570)  # 0.95 of it, at once
    # A lower limit named later brings the rate down to just under it at once.
    assert await _served(store, "c", 300) == pytest.approx(285)
    # A higher one lifts the ceiling; the rate climbs to it a request a minute at a time
    # (the additive half of AIMD), not in one jump.
    assert await _served(store, "d", 1200) == pytest.approx(286)
    assert await _served(store, "e", 1200) == pytest.approx(287)


def _model(url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return build_model(ModelConfig(provider="openai", agent_id="a", host=url,
                                   model_id="gpt-named"))


async def _one_turn(store: Store, model: Any, key: ProviderKey) -> None:
    capacity = CapacityModel(model, CapacityGate(store, CapacityPolicy()), key)
    events = [event async for event in capacity.stream(
        [{"role": "user", "content": [{"text": "hi"}]}], None, "sys")]
    assert any("metadata" in event for event in events)


@pytest.mark.parametrize("names_limit", [True, False])
async def test_the_openai_client_hears_the_limit_on_a_successful_answer(
        store: Store, names_limit: bool, allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    with limited_llm(per_second=10, at_once=6, delay_s=0.0, names_limit=names_limit
                     ) as server:
        allow_provider_host("openai", server.url())
        key = ProviderKey("openai", "gpt-named", server.url("/v1"))
        await _one_turn(store, _model(server.url("/v1"), monkeypatch), key)
        assert (server.accepted, server.throttled) == (1, 0)
    await store.capacity_register(key)
    state = {s.key: s for s in await store.capacity_states()}[key]
    # The server takes 10 a second (600 a minute) and, like OpenAI, says so in every
    # answer: the fleet paces itself at 0.95 of it from the first answer, no 429 met.
    assert state.learned_rpm == (pytest.approx(570) if names_limit else 0)


NAMED = {"openai": {"x-ratelimit-limit-requests": "600"},
         "anthropic": {"anthropic-ratelimit-requests-limit": "600"}}
WIRE = {"openai": ("gpt-4o", "/v1"), "anthropic": ("claude-x", "")}


@pytest.mark.parametrize("provider", sorted(NAMED))
async def test_each_providers_client_hears_its_own_header(
        store: Store, provider: str, allow_provider_host: Callable[[str, str], None],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if importlib.util.find_spec(provider) is None:
        pytest.skip(f"the {provider} SDK is not installed")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    model_id, path = WIRE[provider]
    with wire_fake() as server:
        server.headers.update(NAMED[provider])
        allow_provider_host(provider, server.url + path)
        key = ProviderKey(provider, model_id, server.url + path)
        model = build_model(ModelConfig(provider=provider, agent_id="a", model_id=model_id,
                                        host=server.url + path))
        await _one_turn(store, model, key)
    await store.capacity_register(key)
    assert {s.key: s for s in await store.capacity_states()}[key].learned_rpm == \
        pytest.approx(570)
