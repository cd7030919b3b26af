"""/docs and /redoc in chromium with every request to another host refused (as on an
air-gapped machine): both render from the package's files, and Swagger's Authorize
button takes the bearer token and sends it with "Try it out"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import pytest
from helpers.console import TOKEN, Console, sign_in
from playwright.async_api import Page, Route, expect

pytestmark = [pytest.mark.integration, pytest.mark.browser]


async def offline(page: Page, url: str) -> list[str]:
    """Abort every request that leaves `url`'s host; the list of those tried."""
    ours = urlparse(url).netloc
    tried: list[str] = []

    async def gate(route: Route) -> None:
        if urlparse(route.request.url).netloc == ours:
            await route.continue_()
        else:
            tried.append(route.request.url)
            await route.abort()

    await page.route("**/*", gate)
    return tried


async def test_swagger_ui_offline_authorizes_with_the_bearer_token(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    tried = await offline(page, console.url)
    await sign_in(page, console.url, "/docs")  # the page and its schema take the cookie
    await expect(page.get_by_text("listSessions", exact=True)).to_be_visible()
    await page.get_by_role("button", name="Authorize").first.click()
    dialog = page.locator(".modal-ux")
    await dialog.get_by_role("textbox").fill(TOKEN)
    await dialog.get_by_role("button", name="Apply credentials").click()
    await dialog.get_by_role("button", name="Close", exact=True).click()
    operation = page.locator("#operations-sessions-listSessions")
    await operation.get_by_text("listSessions", exact=True).click()
    await operation.get_by_role("button", name="Try it out").click()
    async with page.expect_response(lambda r: "/v1/sessions?" in r.url
                                    or r.url.endswith("/v1/sessions")) as answer:
        await operation.get_by_role("button", name="Execute").click()
    response = await answer.value
    assert response.status == 200
    assert (await response.request.all_headers())["authorization"] == f"Bearer {TOKEN}"
    await shoot("swagger")
    assert tried == []


async def test_redoc_renders_offline(console: Console, page: Page,
                                     shoot: Callable[[str], Any]) -> None:
    tried = await offline(page, console.url)
    await sign_in(page, console.url, "/redoc")
    await expect(page.get_by_role("heading", name="strands-durable")).to_be_visible()
    await expect(page.get_by_text("Submit a workflow.").first).to_be_attached()
    await shoot("redoc")
    assert tried == []
