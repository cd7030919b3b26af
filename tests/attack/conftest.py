"""Fixtures of the attack suite: what tests/api offers (the app on a real redis-server
and an httpx client through its ASGI interface), plus a snapshot of everything a
prefix holds in Redis, to show an attack changed nothing."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

from apihelp import asgi_client, make_app

from sessions.settings import DurableSettings
from sessions.store import Store


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
