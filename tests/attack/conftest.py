"""Fixtures of the attack suite: what tests/api offers (the app on a real redis-server
and an httpx client through its ASGI interface), a snapshot of everything a prefix holds
in Redis (to show an attack changed nothing), specs written as an attacker would, and a
canary secret in the environment."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from apihelp import asgi_client, make_app

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

CANARY = "sk-canary-7f3a9c"


@pytest.fixture
def app(settings: DurableSettings) -> FastAPI:
    return make_app(settings)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as c:
        yield c


async def snapshot(store: Store) -> dict[str, bytes]:
    """Every key under the store's prefix with its serialized value (DUMP), so that two
    snapshots are equal only when nothing was written, deleted or expired."""
    found: dict[str, bytes] = {}
    async for key in store.redis.scan_iter(f"{store.keys.prefix}:*"):
        if key == store.keys.workers():
            continue  # heartbeats of a live consumer change by themselves
        found[key] = await store.redis.dump(key)
    return found


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A provider key in this process's environment, as every role has one."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    return CANARY


@pytest.fixture
def set_limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set DURABLE_* limits for this test: set_limits(render_timeout_s=1). The process
    reads them once, so the cache is cleared on each change and afterwards."""

    from strands_durable.settings import current_limits

    def apply(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"DURABLE_{name.upper()}", str(value))
        current_limits.cache_clear()

    yield apply
    current_limits.cache_clear()


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a `durable` process: no Redis unless given, the canary set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_")}
    env.update({"OPENAI_API_KEY": CANARY, "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env
