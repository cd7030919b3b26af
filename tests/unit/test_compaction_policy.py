"""What compaction decides before any model call (worker/compaction.py): the token
estimate, and how many of the oldest messages Strands' SummarizingConversationManager
replaces, with strands-cli's lowered preserve count; a summarizer that fails leaves the
conversation whole. The scripted provider answers the summary offline."""

from __future__ import annotations

from typing import Any

import pytest

from strands_durable.spec.script import ScriptConfig, ScriptRule
from strands_durable.spec.sections import Compaction as Policy
from strands_durable.worker.compaction import (
    DEFAULT_THRESHOLD,
    SUMMARIZE_PROMPT,
    compact,
    estimate_tokens,
    summarize_range,
    threshold,
)
from strands_durable.worker.providers.scripted import ScriptedModel


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}]}


def said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"text": text}]}


def turns(n: int, text: str = "x") -> list[dict[str, Any]]:
    return [m for i in range(n) for m in (user(f"q{i}"), said(text))]


def test_estimate_is_deterministic_and_grows_with_text() -> None:
    assert estimate_tokens([]) == 2
    # 4 a message, the role, one token per 4 characters of text.
    assert estimate_tokens([user("abcdefgh")]) == 2 + 4 + 1 + 2
    tool = [{"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "bump",
                                                           "input": {"n": 1}}}]},
            {"role": "user", "content": [{"toolResult": {"toolUseId": "t", "status": "success",
                                                         "content": [{"text": "x" * 40}]}}]}]
    assert estimate_tokens(tool) > estimate_tokens(tool[:1]) + 10
    assert estimate_tokens(turns(3, "y" * 400)) == estimate_tokens(turns(3, "y" * 400))


def test_threshold_defaults_to_strands_cli_s() -> None:
    assert threshold(Policy()) == DEFAULT_THRESHOLD == 60_000
    assert threshold(Policy(when_tokens_over=1500)) == 1500


def test_the_managers_ratio_and_preserve_count_choose_the_range() -> None:
    # 40 messages, ratio 0.35: 14 summarised; 12 preserved leaves room for them.
    assert summarize_range(Policy(), turns(20)) == 14
    # Ratio clamped by Strands to 0.8; preserve 12 then bounds it: 40 - 12 = 28.
    assert summarize_range(Policy(summary_ratio=1.0), turns(20)) == 28
    # Fewer than preserve + 5 messages: strands-cli lowers preserve to max(n - 5, 3).
    assert summarize_range(Policy(), turns(3)) == 2  # 6 messages, preserve 3
    assert summarize_range(Policy(), turns(1)) == 0  # nothing left to summarise


def test_the_split_never_orphans_a_tool_result() -> None:
    messages = [user("go"),
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "t", "name": "b",
                                                               "input": {}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "t",
                                                             "status": "success",
                                                             "content": [{"text": "1"}]}}]},
                said("done"), user("more"), said("ok")]
    # 35% of 6 is 2, which would open the rest on the tool result: moved past it.
    assert summarize_range(Policy(preserve_recent_messages=1), messages) == 3


async def test_the_scripted_provider_answers_the_summary() -> None:
    model = ScriptedModel("a", ScriptConfig(rules=(
        ScriptRule(contains=SUMMARIZE_PROMPT, reply="the gist"),)))
    messages = turns(4, "w " * 600)
    done = await compact(Policy(when_tokens_over=1000), messages, model, system_prompt=None,
                         timeout_s=None)
    assert done is not None
    assert done.record.summary == user("the gist")
    assert done.record.keep == len(messages) - 2
    assert (done.input_tokens, done.output_tokens) == (4, 2)  # scripted: word counts
    # No rule: the scripted default reply is still a summary, the same every time.
    again = await compact(Policy(when_tokens_over=1000), messages, ScriptedModel("a"),
                          system_prompt=None, timeout_s=None)
    assert again is not None and again.record.summary == user(f"a: {SUMMARIZE_PROMPT}")


@pytest.mark.parametrize("policy", [Policy(when_tokens_over=100_000),
                                    Policy(when_tokens_over=1000, enabled=False), None])
async def test_no_compaction_under_the_threshold_or_without_a_policy(
        policy: Policy | None) -> None:
    messages = turns(4, "w " * 600)
    assert await compact(policy, messages, ScriptedModel("a"), system_prompt=None,
                         timeout_s=None) is None


async def test_a_failing_summarizer_leaves_the_conversation_whole() -> None:
    model = ScriptedModel("a", ScriptConfig(rules=(
        ScriptRule(contains=SUMMARIZE_PROMPT, error="no summaries today"),)))
    assert await compact(Policy(when_tokens_over=1000), turns(4, "w " * 600), model,
                         system_prompt=None, timeout_s=None) is None
