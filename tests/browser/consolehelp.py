"""Helpers of the console's browser tests."""

from __future__ import annotations

from playwright.async_api import Page

TOKEN = "console-t0ken"


async def sign_in(page: Page, url: str, next_path: str = "/ui") -> None:
    await page.goto(f"{url}{next_path}")
    await page.get_by_label("API token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{url}{next_path}*")
