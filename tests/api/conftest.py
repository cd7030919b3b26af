"""Fixtures of the HTTP API tests: the app on a real redis-server, an httpx client on it
and an in-process worker."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from apihelp import asgi_client, make_app
from fastapi import FastAPI

from sessions.settings import DurableSettings
from sessions.store import Store
from worker.consumer import StepConsumer


@pytest.fixture
def app(settings: DurableSettings) -> FastAPI:
    return make_app(settings)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as c:
        yield c


@pytest.fixture
async def consumer(settings: DurableSettings, store: Store) -> AsyncIterator[StepConsumer]:
    """A real worker (the arq worker's consumer), in this process."""
    c = StepConsumer(settings, store)
    await c.start()
    yield c
    await c.stop(grace_s=0)
