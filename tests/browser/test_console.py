"""The console in a real browser (headless Debian chromium, Playwright): sign in, watch
a session submitted through the API complete live, answer a human-input step, fork
from a checkpoint, requeue a dead letter. The API runs for real (uvicorn on a free
port) on a private redis-server with a real worker. Every wait is on a condition
(Playwright's expect, or the API's status), never a sleep."""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, StepBreakpoints, wait_for
from helpers.api import HITL, chain_spec, wait_status
from helpers.console import TOKEN, Console, no_dialogs, sign_in
from playwright.async_api import Page, Route, expect

from strands_durable.store.keys import CONSUMER_GROUP

pytestmark = [pytest.mark.integration, pytest.mark.browser]

LIVE = """
version: 0
name: console-live
runtime: {provider: scripted}
agents:
  researcher: {prompt: "You research."}
  writer: {prompt: "You write."}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about {{ topic }}"}
      - {agent: writer, input: "write up {{ last_response }}"}
inputs:
  values: {topic: "tides <img src=x onerror=alert(1)>"}
outputs:
  artifacts:
    - path: "report.md"
      from: "# Report\\n{{ last_response }}"
"""


async def submit(console: Console, spec: str, **body: Any) -> str:
    r = await console.api.post("/v1/sessions", json={"spec": spec, **body})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


async def test_sign_in_then_watch_a_session_complete_live(console: Console, page: Page,
                                                          shoot: Callable[[str], Any]
                                                          ) -> None:
    dialogs = no_dialogs(page)
    await page.goto(f"{console.url}/ui")
    assert "/ui/login" in page.url and TOKEN not in page.url
    await page.get_by_label("API token").fill("wrong")
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("alert")).to_contain_text("not the server's token")
    await shoot("sign-in-refused")
    await page.get_by_label("API token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.get_by_role("heading", name="Sessions", exact=True)).to_be_visible()
    assert TOKEN not in page.url
    cookie = next(c for c in await page.context.cookies() if c["name"] == "durable_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]

    breakpoints = StepBreakpoints(Path(console.settings.breakpoint_dir))
    breakpoints.set("console-live", "step:1")
    sid = await submit(console, LIVE)
    await breakpoints.wait("console-live", "step:1")
    await page.goto(f"{console.url}/ui/sessions/{sid}")
    await expect(page.locator("#session-status")).to_have_text("running")
    await page.evaluate("window.sameDocument = true")
    await shoot("session-running")

    breakpoints.clear("console-live", "step:1")
    # No reload: the page follows the events (SSE) and re-reads its live parts.
    await expect(page.locator("#session-status")).to_have_text("completed")
    await expect(page.locator("#events")).to_contain_text("session_completed")
    assert await page.evaluate("window.sameDocument") is True
    timeline = page.locator("#timeline tbody tr")
    await expect(timeline).to_have_count(2)
    await expect(timeline.nth(1)).to_contain_text("writer")
    # The hostile variable is shown as text, never run.
    await expect(page.locator("#live")).to_contain_text("<img src=x onerror=alert(1)>")
    async with page.expect_download() as download:
        await page.get_by_role("link", name="report.md").click()
    saved = await (await download.value).path()
    assert Path(saved).read_text().startswith("# Report")
    await shoot("session-completed")

    await page.goto(f"{console.url}/ui")
    await expect(page.get_by_role("link", name=sid)).to_be_visible()
    await expect(page.locator('[data-count="completed"]')).to_have_text("1")
    await shoot("sessions")
    await page.get_by_label("Status", exact=True).select_option("failed")
    await page.get_by_role("button", name="Filter").click()
    await expect(page.get_by_text("No session matches.")).to_be_visible()
    assert dialogs == []


async def test_answer_a_human_input_step(console: Console, page: Page,
                                         shoot: Callable[[str], Any]) -> None:
    dialogs = no_dialogs(page)
    await sign_in(page, console.url)
    sid = await submit(console, HITL)
    await page.goto(f"{console.url}/ui/sessions/{sid}")
    await expect(page.get_by_role("heading", name="Waiting for you at")).to_be_visible()
    await expect(page.locator(".waiting")).to_contain_text("Approve the draft?")
    await shoot("human-input")
    await page.get_by_label("Your answer").fill("approved <script>alert(2)</script>")
    await page.get_by_role("button", name="Send answer").click()
    await expect(page.locator("#session-status")).to_have_text("completed")
    await expect(page.locator("#live")).to_contain_text("approved <script>alert(2)</script>")
    doc = (await console.api.get(f"/v1/sessions/{sid}")).json()
    assert doc["status"] == "completed" and doc["waiting"] == []
    assert dialogs == []


async def test_fork_from_a_checkpoint_with_new_variables(console: Console, page: Page,
                                                         shoot: Callable[[str], Any]
                                                         ) -> None:
    sid = await submit(console, chain_spec(3, name="forkable"))
    await wait_status(console.api, sid, "completed")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await expect(page.locator("#checkpoints tbody tr")).to_have_count(3)
    await page.get_by_text("Fork from checkpoint 1", exact=True).first.click()
    form = page.locator("#checkpoints form").first
    await form.get_by_label("Variables").fill("topic=kelp")
    await form.get_by_label("Budget max_steps").fill("10")
    await shoot("fork-form")
    await form.get_by_role("button", name="Fork from checkpoint 1").click()
    await page.wait_for_url(lambda url: "/ui/sessions/" in url and sid not in url)
    forked = page.url.rsplit("/", 1)[-1]
    await expect(page.locator("#session-status")).to_have_text("completed")
    doc = (await console.api.get(f"/v1/sessions/{forked}")).json()
    assert doc["variables"]["topic"] == "kelp" and doc["steps_committed"] == 3
    await expect(page.locator("#live")).to_contain_text("step 2 of kelp")
    await shoot("forked")


async def test_an_opened_fork_form_stays_open_when_the_page_refreshes(
        console: Console, page: Page) -> None:
    """The session's live part is replaced whenever an event comes: a form the user has
    opened (a <details>) must not snap shut under them (CI clicked one open just before
    the page's first refresh and found it closed)."""
    sid = await submit(console, chain_spec(2, name="steady"))
    await wait_status(console.api, sid, "completed")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await expect(page.locator("#feed-state")).to_contain_text("completed")

    async def settled() -> bool:  # no read of the live part under way
        return bool(await page.evaluate("() => !document.getElementById('live').dataset.busy"))

    await wait_for(settled, what="the page's own refreshes to end")
    await page.get_by_text("Fork from checkpoint 1", exact=True).first.click()
    await expect(page.locator("#fork-vars-1")).to_be_visible()
    await page.evaluate("() => refresh(document.getElementById('live'))")
    await wait_for(settled, what="the refresh to end")
    assert await page.locator("#fork-form-1").evaluate("d => d.open")
    await expect(page.locator("#fork-vars-1")).to_be_visible()


async def test_a_read_answered_while_the_user_types_leaves_their_form_alone(
        console: Console, page: Page) -> None:
    """A refresh of the live part that was under way when the user began typing must not
    replace the form under them (CI: a fork's variables, typed while the page's own
    refresh was in flight, were lost and the fork ran with the old ones). The read is held
    by the test until the user has typed."""
    sid = await submit(console, chain_spec(2, name="typing"))
    await wait_status(console.api, sid, "completed")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await expect(page.locator("#feed-state")).to_contain_text("completed")

    async def settled() -> bool:
        return bool(await page.evaluate("() => !document.getElementById('live').dataset.busy"))

    await wait_for(settled, what="the page's own refreshes to end")
    held: list[Route] = []
    await page.route(f"**/ui/sessions/{sid}/live", lambda route: held.append(route))
    await page.evaluate("() => refresh(document.getElementById('live'))")

    async def asked() -> bool:
        return len(held) == 1

    await wait_for(asked, what="the refresh to be asked for")
    await page.get_by_text("Fork from checkpoint 1", exact=True).first.click()
    await page.locator("#fork-vars-1").fill("topic=kelp")  # the user is in the form
    await held[0].continue_()
    await page.unroute(f"**/ui/sessions/{sid}/live")
    await wait_for(settled, what="the held refresh to be answered")
    await expect(page.locator("#fork-vars-1")).to_have_value("topic=kelp")
    assert await page.locator("#live").evaluate("el => el.dataset.stale") == "1"
    # Once the user leaves the form, the part is read again.
    await page.locator("#fork-vars-1").blur()
    await wait_for(settled, what="the refresh after the user left the form")
    assert await page.locator("#live").evaluate("el => el.dataset.stale") is None


async def test_requeue_a_dead_letter_from_the_fleet_page(
        console_factory: Callable[..., AbstractAsyncContextManager[Console]], page: Page,
        shoot: Callable[[str], Any]) -> None:
    # A worker took the step and died: the fleet's worker re-claims it, finds it
    # delivered too often (max_deliveries=1) and dead-letters it.
    async with console_factory(worker=False, claim_idle_ms=300, max_deliveries=1) as console:
        sid = await submit(console, chain_spec(1, name="doomed"))
        store = console.store
        taken = await store.redis.xreadgroup(CONSUMER_GROUP, "crashed-worker",
                                             {store.keys.stream(0): ">"}, count=1)
        assert taken and len(taken[0][1]) == 1
        await console.start_worker()
        await wait_status(console.api, sid, "failed")
        await sign_in(page, console.url, "/ui/fleet")
        letters = page.locator("#dead-letters tbody tr")
        await expect(letters).to_have_count(1)
        await expect(letters.first).to_contain_text(sid)
        await expect(page.locator("#workers")).to_contain_text("alive")
        # Slots taken at once at its last heartbeat, of its concurrency.
        concurrency = console.settings.worker_concurrency
        slots = page.locator("#workers td[title^='steps taken at once']").first
        await expect(slots).to_have_text(re.compile(rf"^\d+ of {concurrency}$"))
        await shoot("fleet")
        await letters.first.get_by_role("button", name="Requeue").click()
        await expect(page.locator("#requeue-report")).to_contain_text(f"Requeued {sid}")
        await wait_status(console.api, sid, "completed")
        await page.goto(f"{console.url}/ui/fleet")
        await expect(page.get_by_text("No dead letter.")).to_be_visible()


async def test_pause_resume_and_cancel_buttons(console: Console, page: Page) -> None:
    breakpoints = StepBreakpoints(Path(console.settings.breakpoint_dir))
    breakpoints.set("plain", "step:0")
    sid = await submit(console, chain_spec(2))
    await breakpoints.wait("plain", "step:0")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await page.get_by_role("button", name="Pause").click()
    await expect(page.locator("#session-status")).to_have_text("paused")
    breakpoints.clear("plain", "step:0")
    await wait_for(lambda: _committed(console, sid, 1), what="the running step to commit")
    await page.reload()
    await page.get_by_role("button", name="Resume").click()
    await expect(page.locator("#session-status")).to_have_text("completed")
    await expect(page.get_by_role("button", name="Cancel")).to_have_count(0)


async def _committed(console: Console, sid: str, n: int) -> bool:
    doc = (await console.api.get(f"/v1/sessions/{sid}")).json()
    return bool(doc["steps_committed"] >= n)


async def test_a_graph_session_shows_its_path_and_loop_counts(console: Console, page: Page,
                                                              shoot: Callable[[str], Any]
                                                              ) -> None:
    spec = (REPO / "examples" / "graph-code-review-loop.yaml").read_text()
    sid = await submit(console, spec)
    await wait_status(console.api, sid, "completed")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    shape = page.get_by_role("region", name="Graph: path taken")
    await expect(shape).to_contain_text("write → review → write → review")
    await expect(shape).to_contain_text("loops of review")
    await shoot("graph")


async def test_resume_over_budget_is_refused_then_resumed_with_a_raised_budget(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    spec = chain_spec(3).replace("runtime:\n", "runtime:\n  budgets: {max_steps: 1}\n")
    sid = await submit(console, spec)
    await wait_status(console.api, sid, "paused")
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await page.get_by_role("button", name="Resume", exact=True).click()
    await expect(page.get_by_role("alert")).to_contain_text("max_steps")  # 409, said why
    await shoot("refused")
    await page.go_back()
    await page.locator("summary", has_text="Resume with changes").click()
    form = page.locator("form", has=page.get_by_role("button", name="Resume with these changes"))
    await form.get_by_label("Budget max_steps").fill("10")
    await form.get_by_label("Variables").fill("topic=y")
    await form.get_by_role("button", name="Resume with these changes").click()
    await expect(page.locator("#session-status")).to_have_text("completed")
    doc = (await console.api.get(f"/v1/sessions/{sid}")).json()
    assert doc["variables"]["topic"] == "y" and doc["steps_committed"] == 3
