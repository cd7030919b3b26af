"""The console's conversation view model (api/console/views.py conversation_view), from
data: each block of a committed message as the page shows it, long ones folded, anything
unexpected shown as its JSON rather than dropped."""

from __future__ import annotations

from strands_durable.api.console.views import (
    FOLD_CHARS,
    FOLDED_CHARS,
    PAGE_CHARS,
    BlockView,
    PageBudget,
    conversation_view,
)


def test_text_tool_calls_and_results_become_titled_blocks() -> None:
    [asked, answered] = conversation_view([
        {"role": "assistant", "content": [
            {"text": "let me add"},
            {"toolUse": {"name": "calculator", "toolUseId": "t1", "input": {"expression": "1+1"}}},
        ]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "t1", "status": "success",
                            "content": [{"text": "2"}, {"json": {"ok": True}}]}},
        ]},
    ])
    assert asked.role == "assistant"
    assert asked.blocks[0] == BlockView("text", "", "let me add", folded=False)
    assert asked.blocks[1].kind == "tool_use"
    assert asked.blocks[1].title == "tool call calculator (t1)"
    assert '"expression": "1+1"' in asked.blocks[1].body
    assert answered.blocks[0].title == "tool result (t1): success"
    assert answered.blocks[0].body == '2\n{\n  "ok": true\n}'


def test_long_blocks_fold_and_odd_ones_show_as_json() -> None:
    [message] = conversation_view([{"role": "user", "content": [
        {"text": "x" * (FOLD_CHARS + 1)}, {"image": {"format": "png"}}]}])
    long = message.blocks[0]  # folded, whole while under what a page holds of one
    assert long.folded and long.body == "x" * (FOLD_CHARS + 1) and long.left_out == 0
    [huge] = conversation_view([{"role": "user", "content": [
        {"text": "x" * (FOLDED_CHARS + 5)}]}])
    assert huge.blocks[0].body == "x" * FOLDED_CHARS and huge.blocks[0].left_out == 5
    assert message.blocks[1].kind == "other" and '"format": "png"' in message.blocks[1].body
    [odd] = conversation_view([{"role": "assistant", "content": "plain string"}])
    assert odd.blocks[0].body == "plain string"


def test_a_page_holds_at_most_its_budget_of_characters() -> None:
    budget = PageBudget()
    blocks = [{"text": "y" * 1_000}] * 50 + [{"text": "z" * 10 * FOLDED_CHARS}] * 1_000
    [message] = conversation_view([{"role": "user", "content": blocks}], budget)
    shown = sum(len(b.body) for b in message.blocks)
    assert shown == PAGE_CHARS and budget.chars <= 0
    assert all(len(b.body) + b.left_out in (1_000, 10 * FOLDED_CHARS) for b in message.blocks)
    assert message.blocks[-1] == BlockView("text", "", "", folded=True,
                                           left_out=10 * FOLDED_CHARS)  # none of it fits
