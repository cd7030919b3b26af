"""Accessibility of each console page in chromium: every control has a label, the pages
work from the keyboard alone, text meets WCAG AA contrast (4.5:1), and the structure a
screen reader gets (Playwright's ARIA snapshot) has the headings and named tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.api import HITL, wait_status
from helpers.console import TOKEN, Console, sign_in
from playwright.async_api import Page, expect

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHECKS = (Path(__file__).resolve().parent / "a11y.js").read_text()
UNLABELLED = f"() => ({CHECKS}).unlabelled()"
LOW_CONTRAST = f"() => ({CHECKS}).lowContrast()"


async def check_page(page: Page, shoot: Callable[[str], Any], name: str) -> str:
    assert await page.evaluate(UNLABELLED) == [], name
    assert await page.evaluate(LOW_CONTRAST) == [], name
    await shoot(name)
    snapshot: str = await page.locator("main").aria_snapshot()
    assert "heading" in snapshot and "[level=1]" in snapshot, name
    return snapshot


async def test_signing_in_and_moving_around_by_keyboard(console: Console, page: Page,
                                                        shoot: Callable[[str], Any]) -> None:
    await page.goto(f"{console.url}/ui")
    await check_page(page, shoot, "sign-in")
    # The token field has the focus; typing and Enter sign in.
    await page.keyboard.type(TOKEN)
    await page.keyboard.press("Enter")
    await expect(page.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
    # The first Tab reaches the skip link, which moves the focus to the content.
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("main")).to_be_focused()
    # From there, Tab walks the filters in order.
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Status", exact=True)).to_be_focused()
    await page.keyboard.press("Tab")
    await expect(page.get_by_label("Workflow")).to_be_focused()
    await page.keyboard.type("approve")
    await page.keyboard.press("Enter")  # submits the filter form
    await expect(page).to_have_url(f"{console.url}/ui?status=&workflow=approve&after=&before=")
    snapshot = await check_page(page, shoot, "sessions")
    assert 'table "Most recently updated first' in snapshot


async def test_session_and_fleet_pages_are_labelled_and_readable(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    r = await console.api.post("/v1/sessions", json={"spec": HITL})
    sid = r.json()["session_id"]
    await wait_status(console.api, sid, "paused")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await expect(page.get_by_label("Your answer")).to_be_visible()
    await page.locator("summary", has_text="Fork from checkpoint 1").click()  # its form
    snapshot = await check_page(page, shoot, "session-waiting")
    for region in ("Summary", "Steps", "Checkpoints", "Events"):
        assert f'region "{region}' in snapshot, region
    # The answer form works from the keyboard: focus, type, Enter on the button.
    await page.get_by_label("Your answer").focus()
    await page.keyboard.type("approved")
    await page.keyboard.press("Tab")
    await expect(page.get_by_role("button", name="Send answer")).to_be_focused()
    await page.keyboard.press("Enter")
    await expect(page.locator("#session-status")).to_have_text("completed")
    await page.goto(f"{console.url}/ui/fleet")
    snapshot = await check_page(page, shoot, "fleet")
    assert 'table "Alive: a heartbeat within' in snapshot
