"""Fixtures of the console's browser tests: `durable api`'s app served by a real uvicorn
on a free port, on a private redis-server, with a real worker (StepConsumer) in this
process, and headless Debian chromium driven by Playwright. Screenshots go to the test's
tmp dir and to tests/browser/artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import RedisServer, quick_settings, random_prefix
from helpers.api import make_app, uvicorn_server
from helpers.console import TOKEN, Console
from playwright.async_api import Browser, Page, async_playwright, expect

from strands_durable.store.connect import open_store

ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
# Debian's chromium (tests/run.sh installs it): Playwright's own download is not reachable.
# A loaded 2-core CI machine can be slow: expectations wait up to 30 s for their condition.
expect.set_options(timeout=30_000)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def console_factory(redis_server: RedisServer, tmp_path: Path
                    ) -> Callable[..., AbstractAsyncContextManager[Console]]:
    @asynccontextmanager
    async def make(worker: bool = True, **updates: Any) -> AsyncIterator[Console]:
        settings = quick_settings(redis_server.url, random_prefix(), tmp_path,
                                  **{"api_token": TOKEN, **updates})
        store = open_store(settings)
        await store.prepare()
        async with uvicorn_server(make_app(settings)) as url, httpx.AsyncClient(
                base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                timeout=30) as api:
            console = Console(url, store, api, settings)
            try:
                if worker:
                    await console.start_worker()
                yield console
            finally:
                if console.consumer is not None:
                    await console.consumer.stop(grace_s=0)
                await store.close()
    return make


@pytest.fixture
async def console(console_factory: Callable[..., AbstractAsyncContextManager[Console]]
                  ) -> AsyncIterator[Console]:
    async with console_factory() as c:
        yield c


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("chromium is not installed and tests/run.sh could not install it "
                    "(apt-get install chromium)")
    async with async_playwright() as p:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start.
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox"])
        yield b
        await b.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900},
                                        accept_downloads=True)
    p = await context.new_page()
    p.set_default_timeout(30_000)
    yield p
    await context.close()


@pytest.fixture
def shoot(page: Page, tmp_path: Path, request: pytest.FixtureRequest
          ) -> Callable[[str], Any]:
    """Save a full-page screenshot as <test>-<name>.png (tmp dir and artifacts/)."""
    async def take(name: str) -> Path:
        path = tmp_path / f"{name}.png"
        await page.screenshot(path=str(path), full_page=True)
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(path, ARTIFACTS / f"{request.node.name}-{name}.png")
        return path
    return take
