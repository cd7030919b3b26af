"""Fixtures of the HTTP API tests: the app on a real redis-server, an httpx client on it
and an in-process worker."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from apihelp import asgi_client, make_app
from fastapi import FastAPI

from strands_durable.settings import DurableSettings


@pytest.fixture
def app(settings: DurableSettings) -> FastAPI:
    return make_app(settings)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as c:
        yield c


