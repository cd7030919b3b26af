"""Helpers of the console's browser tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from playwright.async_api import Page

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

TOKEN = "console-t0ken"


@dataclass
class Console:
    url: str
    store: Store
    api: httpx.AsyncClient  # the JSON API, with the bearer token
    settings: DurableSettings
    consumer: StepConsumer | None = None

    async def start_worker(self) -> None:
        self.consumer = StepConsumer(self.settings, self.store)
        await self.consumer.start()


async def sign_in(page: Page, url: str, next_path: str = "/ui") -> None:
    await page.goto(f"{url}{next_path}")
    await page.get_by_label("API token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await page.wait_for_url(f"{url}{next_path}*")


def no_dialogs(page: Page) -> list[str]:
    """Every alert() the page opens (an injected script would): the test asserts none."""
    seen: list[str] = []

    async def on_dialog(dialog: Any) -> None:
        seen.append(dialog.message)
        await dialog.dismiss()

    page.on("dialog", on_dialog)
    return seen
