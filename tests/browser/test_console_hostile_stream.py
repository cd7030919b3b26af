"""Hostile text on the console's session page (the live model output, over SSE) and its
conversation page (headless chromium, Playwright, a real worker and uvicorn): what a
model wrote (replies, tool calls and their JSON input), what a tool returned, what a
spec wrote (agent ids, system prompts, step inputs) and a session's variables are shown
as text, exactly, wherever they land (element text, attributes, the live feed's JSON):
no element is made, no script runs, and the page keeps working. Folded blocks keep the
conversation page's size bounded however large a payload is."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from helpers.api import wait_status
from helpers.console import Console, no_dialogs, sign_in
from playwright.async_api import Page, expect

from strands_durable.api.console.views import FOLDED_CHARS

pytestmark = [pytest.mark.integration, pytest.mark.browser]

# Breaks out of an element's text, an attribute (either quote), a <script> JSON block,
# a JS string, and an SSE frame; each would make an element with a `pwned` class.
BREAKOUTS = (
    '</pre></details><b class="pwned">pre</b>'
    '"><b class="pwned">attr</b><x y=\''
    "'><b class=\"pwned\">sq</b>"
    '</script><script>alert("script")</script>'
    '"+alert("js")+"\\"; alert(1)//'
    '<img class="pwned" src=x onerror=alert("img")>'
    '<svg class="pwned" onload=alert("svg")></svg>'
    '<!-- <template><iframe class="pwned" srcdoc="<script>alert(2)</script>">'
    "\n\ndata: {\"kind\":\"text\",\"text\":\"INJECTED\"}\n\nevent: end\ndata: {}\n\n"
    "\r\rid: 1-1\r\n"
    "&lt;b class=pwned&gt;entity&lt;/b&gt; &amp;amp; \u2028\u2029 \U0001f600 end")
AGENT = 'w"><b class="pwned">agent</b>'  # an agent id: any printable text
TOOL = '<b class="pwned">t</b>"\''  # a tool the agent lacks (its error is the result)
# Server-rendered text as HTML parses it: a CR (alone or before LF) is read as a LF.
AS_PARSED = BREAKOUTS.replace("\r\n", "\n").replace("\r", "\n")
DEEP = 34  # list levels of the tool input (with its dicts and the spec: under 64)


def nested(depth: int) -> Any:
    value: Any = BREAKOUTS
    for n in range(depth):
        value = {f"k{n}</pre>": [value]} if n % 2 else [value]
    return value


def spec(reply: str, *, prompt: str = "You write.", tool: str | None = None,
         word_delay_s: float = 0.0, steps: int = 1) -> str:
    rules: list[dict[str, Any]] = []
    if tool is not None:
        rules.append({"agent": AGENT, "turn": 1, "tool_calls": [
            {"name": tool, "input": {"q": BREAKOUTS, "deep": nested(DEEP)}}]})
    rules.append({"agent": AGENT, "reply": reply})
    return json.dumps({
        "version": 0, "name": "hostile-console",
        "runtime": {"provider": "scripted",
                    "script": {"word_delay_s": word_delay_s, "rules": rules}},
        "agents": {AGENT: {"prompt": prompt}},
        "inputs": {"values": {"topic": "default"}},
        "pattern": {"type": "chain", "config": {"steps": [
            {"agent": AGENT, "input": "about {{ topic }} " + str(n)} for n in range(steps)]}}})


async def submit(console: Console, text: str, **body: Any) -> str:
    r = await console.api.post("/v1/sessions", json={"spec": text, **body})
    assert r.status_code == 201, r.text
    sid: str = r.json()["session_id"]
    return sid


async def assert_nothing_injected(page: Page, dialogs: list[str]) -> None:
    assert await page.locator(".pwned").count() == 0
    assert await page.locator("img, svg, iframe, template").count() == 0
    assert await page.locator("script").count() == 1  # console.js, nothing else
    assert dialogs == []


async def test_hostile_model_text_and_tool_names_stream_onto_the_session_page_as_text(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    """The live model output (console.js, followModelOutput): a reply full of markup,
    SSE syntax and carriage returns, streamed word by word, and a tool name of markup,
    shown character for character in the step's block; the heading names the hostile
    agent as text; the feed still ends with the session."""
    dialogs = no_dialogs(page)
    sid = await submit(console, spec(BREAKOUTS, tool=TOOL, word_delay_s=0.01),
                       variables={"topic": BREAKOUTS})
    await sign_in(page, console.url, f"/ui/sessions/{sid}")
    await expect(page.locator("#session-status")).to_have_text("completed")
    await expect(page.locator("#output-state")).to_contain_text("session ended")
    pre = page.locator("#model-output pre.model-text")
    await expect(pre).to_have_count(1)
    shown = await pre.evaluate("p => p.textContent")
    assert shown == f"\n[tool: {TOOL}]\n\n{BREAKOUTS}\n", shown
    assert await pre.get_attribute("data-step") == "step:0"
    await expect(page.locator("#model-output h3")).to_have_text(
        f"step:0 · {AGENT} · attempt 1 on {console.consumer.name}")  # type: ignore[union-attr]
    await expect(page.locator("#timeline")).to_contain_text(AGENT)
    await assert_nothing_injected(page, dialogs)
    await shoot("hostile-live-output")


async def test_the_conversation_page_shows_hostile_prompts_inputs_tool_calls_and_replies(
        console: Console, page: Page, shoot: Callable[[str], Any]) -> None:
    """Each block as text: the spec's system prompt and agent id, the step's input
    rendered from a hostile variable, the model's tool call (a name and a deeply nested
    JSON input of markup), the tool's error result naming that tool, and the reply."""
    dialogs = no_dialogs(page)
    sid = await submit(console, spec(BREAKOUTS, prompt=BREAKOUTS, tool=TOOL),
                       variables={"topic": BREAKOUTS})
    await wait_status(console.api, sid, "completed", timeout_s=60)
    await sign_in(page, console.url, f"/ui/sessions/{sid}/conversation")
    lane = page.locator("section.conversation")
    await expect(lane).to_have_count(1)
    assert await lane.get_attribute("data-lane") == AGENT
    await expect(lane.locator("h2")).to_have_text(f"Agent {AGENT}")
    assert await lane.locator(".system-prompt").evaluate("p => p.textContent") == AS_PARSED
    texts = await lane.locator("pre.context").evaluate_all("ps => ps.map(p => p.textContent)")
    assert f"about {AS_PARSED} 0" in texts  # the user's input, the variable in it
    assert texts[-1] == AS_PARSED  # the model's last reply
    titles = await lane.locator(".block-title").all_text_contents()
    assert any(t.startswith(f"tool call {TOOL} (") for t in titles), titles
    [use] = await lane.locator(".block-tool_use").evaluate_all(
        "ps => ps.map(p => p.textContent)")
    assert json.loads(use) == {"q": BREAKOUTS, "deep": nested(DEEP)}
    result = await lane.locator(".block-tool_result").first.evaluate("p => p.textContent")
    assert TOOL in result, result
    await assert_nothing_injected(page, dialogs)
    await shoot("hostile-conversation")


async def test_folded_blocks_bound_the_conversation_pages_size(
        console: Console, page: Page) -> None:
    """A reply of 150,000 characters (and the next step's input that quotes it) is
    folded: the page shows its start and its length, and stays small."""
    big = ("<b>x</b> " * 20_000)[:150_000]
    text = json.loads(spec(big, steps=2))
    text["pattern"]["config"]["steps"][1]["input"] = "{{ steps[0].response }}"
    sid = await submit(console, json.dumps(text))
    await wait_status(console.api, sid, "completed", timeout_s=60)
    await sign_in(page, console.url, f"/ui/sessions/{sid}/conversation")
    folded = page.locator("details.folded")
    await expect(folded.first).to_be_visible()
    assert await folded.count() >= 2
    await expect(folded.first.locator("summary")).to_contain_text(f"({len(big)} characters)")
    assert await page.locator("b").count() == 0  # the markup in it is text
    size = len((await page.content()).encode())
    # Each holds at most FOLDED_CHARS of its 150,000 (escaped: "<" is "&lt;"), where the
    # whole of each was on the page (over 1 MB).
    assert size < await folded.count() * 3 * FOLDED_CHARS, size
    await folded.first.locator("summary").click()
    await expect(folded.first.locator(".left-out")).to_contain_text(
        f"{len(big) - FOLDED_CHARS} more characters are not shown here")
