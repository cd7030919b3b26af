"""The console's session page shows what a running step's model writes, as it writes it
(headless chromium, Playwright): a local OpenAI-compatible server writes half its reply
and holds the rest until the page shows that half; the session is still running then;
the rest appears without a reload, and once the step commits the page says the session
ended. The conversation page shows what each agent's model saw and answered from what is
committed (its prompt, each turn, each tool call with its input and result), a reply
with markup in it as text, never run."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from helpers import REPO
from helpers.api import wait_status
from helpers.console import Console, no_dialogs, sign_in
from helpers.held_llm import FIRST, HeldLLM
from playwright.async_api import Page, expect

pytestmark = [pytest.mark.integration, pytest.mark.browser]

SPEC = """
version: 0
name: console-stream
runtime: {{provider: openai, model_id: gpt-live, host: "{host}"}}
agents: {{writer: {{prompt: "You write."}}}}
pattern: {{type: chain, config: {{steps: [{{agent: writer, input: "say hello"}}]}}}}
"""


async def test_the_session_page_shows_the_running_steps_text_as_it_is_written(
        console: Console, page: Page, held: HeldLLM, shoot: Callable[[str], Any]) -> None:
    r = await console.api.post("/v1/sessions", json={"spec": SPEC.format(
        host=held.url("/v1"))})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    output = page.locator("#model-output")
    await expect(output.locator("pre.model-text")).to_have_text("".join(FIRST))
    await expect(output.locator("h3")).to_contain_text("step:0 · writer · attempt 1")
    await expect(page.locator("#session-status")).to_have_text("running")
    assert (await console.store.get_session(sid)).steps_committed == 0
    await page.evaluate("window.sameDocument = true")
    await shoot("session-mid-stream")

    held.go.set()
    await expect(output.locator("pre.model-text")).to_have_text("Hello world!\n")
    await expect(page.locator("#session-status")).to_have_text("completed")
    await expect(page.locator("#output-state")).to_contain_text("session ended")
    assert await page.evaluate("window.sameDocument") is True
    await shoot("session-stream-done")


async def test_the_conversation_page_shows_what_each_agent_saw_and_answered(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    spec = (REPO / "examples/chain-calculator-tools.yaml").read_text()
    spec = re.sub(r'reply: "Quote:[^"]*"', 'reply: "<img src=x onerror=alert(1)> quoted"', spec)
    dialogs = no_dialogs(page)
    r = await console.api.post("/v1/sessions", json={"spec": spec})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    await wait_status(console.api, sid, "completed", timeout_s=60)
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await page.locator("#conversation-link").click()
    accountant = page.locator('section[data-lane="accountant"]')
    await expect(accountant.locator(".system-prompt")).not_to_be_empty()
    await expect(accountant.locator(".block-tool_use").first).to_contain_text("49 * 12 * 0.85")
    await expect(accountant.locator(".block-title").first).to_contain_text(
        "tool call calculator")
    await expect(accountant.locator(".block-tool_result").first).to_contain_text("499.8")
    await expect(accountant.locator(".role-assistant").last).to_contain_text(
        "A year of the team plan costs 499.8")
    writer = page.locator('section[data-lane="writer"]')
    await expect(writer.locator(".role-assistant").last).to_contain_text(
        "<img src=x onerror=alert(1)> quoted")  # shown as text, never run
    await shoot("conversation")
    assert dialogs == []
