from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
# Tests keep `durable run` in memory unless they test the local store (their own
# DURABLE_HOME, tests/integration/test_local_store.py): never a server in the real home.
os.environ.setdefault("DURABLE_EPHEMERAL", "1")

from fleet import Fleet
from helpers import RedisServer, StepBreakpoints, random_prefix, start_redis

from strands_durable.provider_policy import current_provider_policy, host_setting
from strands_durable.settings import DurableSettings, current_tool_policy
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture
def prefix() -> str:
    return random_prefix()


@pytest.fixture
def settings(redis_server: RedisServer, prefix: str, tmp_path: Path) -> DurableSettings:
    return DurableSettings(redis_url=redis_server.url, key_prefix=prefix, claim_idle_ms=1000,
                           read_block_ms=100, timer_poll_ms=50, heartbeat_s=0.5,
                           breakpoint_dir=str(tmp_path / "breakpoints"))


@pytest.fixture
def breakpoints(settings: DurableSettings) -> StepBreakpoints:
    """Breakpoints of the in-process workers made from `settings`."""
    return StepBreakpoints(Path(settings.breakpoint_dir))


@pytest.fixture
async def store(settings: DurableSettings) -> AsyncIterator[Store]:
    s = open_store(settings)
    await s.prepare()
    yield s
    await s.redis.aclose()


@pytest.fixture
async def consumer(settings: DurableSettings, store: Store) -> AsyncIterator[StepConsumer]:
    """A real worker (what `arq worker` hosts), in this process."""
    c = StepConsumer(settings, store)
    await c.start()
    yield c
    await c.stop(grace_s=0)


@pytest.fixture
def fleet_factory(redis_server: RedisServer, prefix: str, tmp_path: Path
                  ) -> Iterator[Callable[..., Fleet]]:
    """Make fleets of real `arq worker` processes; every one is killed afterwards."""
    fleets: list[Fleet] = []

    def make(**settings: object) -> Fleet:
        fleet = Fleet.create(redis_server.url, prefix, tmp_path, **settings)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop_all()


@pytest.fixture
def tool_log(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The test tools (tests/tool_fixtures/) allowed as python tools, each execution
    logged to the file this yields (for workers too: they inherit the environment), and
    a key for the OpenAI provider class pointed at a local fake."""
    log = tmp_path / "tool-calls.jsonl"
    monkeypatch.setenv("DURABLE_TOOL_MODULES", "tests.tool_fixtures")
    monkeypatch.setenv("DURABLE_TEST_TOOL_LOG", str(log))
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    current_tool_policy.cache_clear()
    yield log
    current_tool_policy.cache_clear()


@pytest.fixture
def allow_provider_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str], None]]:
    """`allow(provider, url)`: the operator lists `url` in DURABLE_<PROVIDER>_HOSTS, in this
    process and for the workers and CLIs it starts (they inherit the environment)."""

    def allow(provider: str, url: str) -> None:
        name = host_setting(provider)
        listed = [part for part in os.environ.get(name, "").split(",") if part]
        monkeypatch.setenv(name, ",".join([*listed, url]))
        current_provider_policy.cache_clear()

    current_provider_policy.cache_clear()
    yield allow
    current_provider_policy.cache_clear()
