"""The console's conversation view model (api/console/views.py conversation_view), from
data: each block of a committed message as the page shows it, long ones folded, anything
unexpected shown as its JSON rather than dropped."""

from __future__ import annotations

from strands_durable.api.console.views import FOLD_CHARS, BlockView, conversation_view


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
    assert message.blocks[0].folded and len(message.blocks[0].body) == FOLD_CHARS + 1
    assert message.blocks[1].kind == "other" and '"format": "png"' in message.blocks[1].body
    [odd] = conversation_view([{"role": "assistant", "content": "plain string"}])
    assert odd.blocks[0].body == "plain string"
