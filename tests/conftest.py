from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

# Tests keep `durable run` in memory unless they test the local store (their own
# DURABLE_HOME, tests/integration/test_local_store.py): never a server in the real home.
os.environ.setdefault("DURABLE_EPHEMERAL", "1")

from helpers import RedisServer, StepBreakpoints, quick_settings, random_prefix, start_redis
from helpers.fleet import Fleet
from helpers.held_llm import HeldLLM, held_llm
from helpers.zygote import install as fork_cli_commands_from_a_zygote

from strands_durable.provider_policy import current_provider_policy, host_setting
from strands_durable.settings import DurableSettings, current_tool_policy
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

# Short `durable` commands fork from one process that imported the CLI once
# (tests/helpers/zygote.py; DURABLE_TEST_ZYGOTE=0 runs each in a new interpreter).
fork_cli_commands_from_a_zygote()
TESTS = Path(__file__).resolve().parent
# What a test needs, by its folder (docs/testing.md): the marker every test of the folder
# gets. `slow` marks the folders that start fleets, clusters, browsers or deploy tools.
FOLDER_MARKERS = {"unit": "unit", "api": "api", "attack": "attack", "integration": "integration",
                  "uvloop": "integration", "e2e": "e2e", "chaos": "chaos", "cluster": "cluster",
                  "browser": "browser", "deploy": "deploy"}
SLOW_FOLDERS = {"e2e", "chaos", "cluster", "browser", "deploy"}
# Modules of the other folders that are slow as a whole (they start `durable` or `arq`
# processes, real servers or long drills; each over ~15 s on 2 cores): not in the fast
# lane (`tests/run.sh --fast`). A new module of that kind belongs here.
SLOW_MODULES = {
    "api/test_http_provider_hosts.py", "api/test_http_render_stage.py",
    "api/test_openapi_fuzz.py",
    "attack/test_amplification.py", "attack/test_dos.py", "attack/test_idempotency_conflict.py",
    "attack/test_key_confusion.py", "attack/test_provider_host_attacks.py",
    "attack/test_redis_connect.py", "attack/test_redis_outage.py",
    "attack/test_redis_tls_acl.py", "attack/test_redteam.py", "attack/test_run_isolation.py",
    "attack/test_live_stream_hostile.py",
    "integration/test_adaptive_slots.py", "integration/test_bench_inflight.py",
    "integration/test_capacity.py", "integration/test_capacity_wait_budget.py",
    "integration/test_cut_short_replies.py",
    "integration/test_capacity_fair_share.py", "integration/test_cli_output.py",
    "integration/test_cli_zygote.py",
    "integration/test_gemini_http.py", "integration/test_local_store.py",
    "integration/test_mcp_pool.py", "integration/test_mcp_tools.py",
    "integration/test_noreplicas.py", "integration/test_run_out_dir.py",
    "integration/test_provider_failures_hostile.py",
    "integration/test_schedules_cli.py", "integration/test_sentinel.py",
    # Deeper sweeps of what a fast-lane module covers more cheaply (each 4-8 s of CPU):
    # every corpus spec's state at every step (the corpus itself: test_strands_cli_corpus),
    # every route x role x namespace of the quota routes (the routes: test_http_quotas).
    "unit/test_pattern_state_models.py", "attack/test_quota_routes.py",
}
# Single tests of that kind in modules that otherwise belong in the fast lane.
SLOW_TESTS = {
    "integration/test_quotas.py::test_durable_quotas_set_list_delete",  # ~10 `durable` CLIs
    "integration/test_token_quota.py::test_hostile_values_are_refused_naming_the_field",  # 11
    # A 5,000-step chain spec loaded and planned: the bench's sizes, 3 s of CPU.
    "unit/test_bench_measures.py::test_a_long_bench_chain_loads_past_the_default_spec_limits",
}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the fast lane (`-m "not slow"`) the SLOW_MODULES are not even imported: each of
    its processes would import them (their SDKs, their cases) only to deselect them all."""
    if config.option.markexpr.strip() != "not slow":
        return None
    path = collection_path.resolve()
    if path.is_relative_to(TESTS) and path.relative_to(TESTS).as_posix() in SLOW_MODULES:
        return True
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the xdist_group markers (--dist loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by what it needs (its folder) and `slow` where it is; keep the tests
    of a module that shares a module-scoped fixture of ours on one xdist worker, so that
    the fixture (a reference run, a built venv, a cluster) is made once, not once per
    worker."""
    for item in items:
        path = Path(item.path).resolve()
        where = path.relative_to(TESTS) if path.is_relative_to(TESTS) else Path(path.name)
        folder = where.parts[0] if len(where.parts) > 1 else ""
        if folder in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[folder])
        test = f"{where.as_posix()}::{item.nodeid.split('::', 1)[-1]}"
        if folder in SLOW_FOLDERS or where.as_posix() in SLOW_MODULES or test in SLOW_TESTS:
            item.add_marker("slow")
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else []
        if any(d[-1].scope == "module" and d[-1].baseid.startswith("tests") for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


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
    return quick_settings(redis_server.url, prefix, tmp_path)


@pytest.fixture
def app(settings: DurableSettings) -> FastAPI:
    """`durable api`'s app on `settings` (tests/api, tests/attack)."""
    from helpers.api import make_app

    return make_app(settings)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client on `app` through its ASGI interface."""
    from helpers.api import asgi_client

    async with asgi_client(app) as c:
        yield c


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
def held(allow_provider_host: Callable[[str, str], None],
         monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldLLM]:
    """An OpenAI-compatible server that streams half a reply and holds the rest until
    `held.go` is set (tests/helpers/held_llm.py), its host allowed, a key set."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with held_llm(allow_provider_host) as state:
        yield state


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
