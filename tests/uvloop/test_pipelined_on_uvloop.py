"""Every test of tests/integration/test_pipelined.py again, on uvloop's event loop
(conftest.py beside this): uvicorn serves on uvloop wherever it is installed, and
uvloop's transports are no asyncio.Transport, so the pipelined connection takes one
over by what it offers. A test here that checks it runs on uvloop keeps that true."""

from __future__ import annotations

import asyncio

import uvloop
from integration.test_pipelined import *  # noqa: F403 (each test, collected here too)
from integration.test_pipelined import client, tls_redis  # noqa: F401 (their fixtures)


async def test_these_tests_run_on_uvloop() -> None:
    assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
