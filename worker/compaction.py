"""`context_policy.compaction`, durably: an agent's conversation summarised by Strands'
`SummarizingConversationManager` once it passes `when_tokens_over`, the summary
committed with the step that made it.

What strands-cli does (exec/hooks.py `ProactiveCompactionHook`, runtime/context_manager.py):
after each agent invocation, when the conversation's tokens reach `when_tokens_over`
(60,000 when unset), once per step, the agent's `SummarizingConversationManager`
(`summary_ratio`, `preserve_recent_messages`, lowered to max(messages - 5, 3) when fewer
than preserve + 5 messages exist) replaces the oldest messages with one user-role summary,
made by the agent's own model, or by a summarization agent on `summarization_model` (the
runtime's provider, temperature 0.3, its own system prompt).

Here the same happens after the step's agent call, before its commit:
- The manager chooses what to summarise (its ratio, its bounds, its tool-pair rule); the
  summary is then made here, with the model's usage, so the summarizer's tokens count
  toward the step's tokens and the budgets. A transient error is retried in place like
  the agent call; a summary that still fails is skipped (best effort, as Strands'
  proactive compression): the step commits its reply and the next step tries again.
- The compaction is a lane record (store/conversation.py) appended by the step's own
  commit after its new messages: summary + how many newest messages stay. One atomic
  commit, O(new turns). A crash before it leaves nothing: the re-run compacts again and
  commits exactly one summary; a committed summary is restored, never re-summarised.
- Tokens are estimated, not counted by tiktoken (strands-cli's TokenCounter needs its
  encoding files from the network): about one token per 4 characters of text, tool
  input and tool result text, plus 4 a message and 2 for the reply, deterministic on
  every worker.
- Agents with tools: their turns are journaled (worker/journal.py); compaction runs
  only once the agent call has returned, on the unjournaled model, so it never shifts
  the journal's turn count. A re-run replays the journal and then compacts again.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from strands import Agent
from strands.agent.conversation_manager import SummarizingConversationManager
from strands.agent.conversation_manager.compression.context_compression import (
    DEFAULT_SUMMARIZATION_PROMPT,
    as_user_summary,
)
from strands.event_loop.streaming import process_stream
from strands.models.model import Model
from strands.types.content import Message, Messages
from strands.types.exceptions import ContextWindowOverflowException

from strands_durable.spec.sections import Compaction as CompactionPolicy
from strands_durable.store.records import Compaction
from strands_durable.worker.agent_call import with_retries

logger = logging.getLogger("durable.worker")

DEFAULT_THRESHOLD = 60_000  # strands-cli's when `when_tokens_over` is unset
MIN_SUMMARIZABLE = 5  # strands-cli's hook keeps at least this many to summarise
SUMMARIZE_PROMPT = "Please summarize this conversation."  # the SDK's request
# strands-cli's summarization agent (runtime/context_manager.py), on summarization_model.
SUMMARIZER_AGENT = "summarization-agent"
SUMMARIZER_PROMPT = (
    "You are a helpful assistant that creates concise summaries of conversation history. "
    "Preserve key facts, decisions, and context while reducing length. "
    "Focus on information relevant to the ongoing task."
)
SUMMARIZER_TEMPERATURE = 0.3


@dataclass(frozen=True)
class Compacted:
    """A step's compaction: the record its commit appends, and the summarizer's usage."""

    record: Compaction
    input_tokens: int
    output_tokens: int


def threshold(policy: CompactionPolicy) -> int:
    return policy.when_tokens_over or DEFAULT_THRESHOLD


def estimate_tokens(messages: Messages | list[dict[str, Any]]) -> int:
    """The conversation's tokens, estimated as strands-cli's TokenCounter counts them
    (same parts), at one token per 4 characters."""
    total = 2
    for message in messages:
        total += 4 + _chars(str(message.get("role", "")))
        for block in message.get("content", []):
            total += _block_tokens(block)
    return total


def _block_tokens(block: Any) -> int:
    if "text" in block:
        return _chars(str(block["text"] or ""))
    if "toolResult" in block:
        content = block["toolResult"].get("content", [])
        return sum(_chars(str(item["text"])) for item in content if "text" in item)
    if "toolUse" in block:
        use = block["toolUse"]
        return _chars(str(use.get("name", ""))) + _chars(repr(use.get("input", "")))
    return _chars(str(block))


def _chars(text: str) -> int:
    return (len(text) + 3) // 4


def summarize_range(policy: CompactionPolicy, messages: list[dict[str, Any]]) -> int:
    """How many of the oldest messages the summarizing manager replaces (0: too few),
    chosen by Strands' own SummarizingConversationManager."""
    preserve = policy.preserve_recent_messages
    if len(messages) < preserve + MIN_SUMMARIZABLE:
        preserve = max(len(messages) - MIN_SUMMARIZABLE, 3)  # strands-cli's hook
    manager = _Chooser(summary_ratio=policy.summary_ratio, preserve_recent_messages=preserve)
    conversation = SimpleNamespace(messages=list(messages))
    try:
        manager.reduce_context(cast(Agent, conversation), e=_CHOOSING)
    except ContextWindowOverflowException:
        return 0
    return manager.chosen


class _Chooser(SummarizingConversationManager):
    """The manager's own choice of what to summarise; the summary is made afterwards,
    asynchronously and with its usage (the SDK's is synchronous and drops usage)."""

    chosen = 0

    def _generate_summary(self, messages: list[Message], agent: Agent) -> Message:
        self.chosen = len(messages)
        return {"role": "user", "content": [{"text": ""}]}


# Passed as the overflow that asks for reduction, so the manager raises rather than logs
# when there is nothing to summarise.
_CHOOSING = ContextWindowOverflowException("compaction threshold passed")


async def summarize(model: Model, messages: Messages, *, system_prompt: str | None
                    ) -> tuple[Message, int, int]:
    """One summary of `messages` by `model` (as the SDK's generate_summary asks for it):
    the user-role summary message, input tokens, output tokens."""
    request: Messages = [*copy.deepcopy(messages),
                         {"role": "user", "content": [{"text": SUMMARIZE_PROMPT}]}]
    stream = model.stream(request, tool_specs=None,
                          system_prompt=system_prompt or DEFAULT_SUMMARIZATION_PROMPT)
    reply: Message | None = None
    usage: dict[str, Any] = {}
    async for event in process_stream(stream):
        if "stop" in event:
            _, reply, usage_info, _ = event["stop"]
            usage = dict(usage_info)
    if reply is None:
        raise RuntimeError("failed to generate a summary: no response from the model")
    return (as_user_summary(reply), int(usage.get("inputTokens", 0)),
            int(usage.get("outputTokens", 0)))


async def compact(policy: CompactionPolicy | None, messages: list[dict[str, Any]],
                  model: Model, *, system_prompt: str | None, timeout_s: float | None,
                  where: str = "") -> Compacted | None:
    """The compaction of `messages` (an agent's conversation after its step) that the
    policy asks for, or None: no policy, disabled, under the threshold, or too few
    messages to summarise. `where` prefixes the log lines (the session and step)."""
    if policy is None or not policy.enabled:
        return None
    tokens = estimate_tokens(messages)
    if tokens < threshold(policy):
        return None
    conversation = cast(Messages, messages)
    count = summarize_range(policy, messages)
    if count <= 0:
        logger.info("%scompaction skipped: %d messages (~%d tokens) leave nothing to "
                    "summarise", where, len(messages), tokens)
        return None
    try:
        summary, input_tokens, output_tokens = await with_retries(
            lambda: summarize(model, conversation[:count], system_prompt=system_prompt),
            timeout_s=timeout_s)
    except Exception as exc:
        # Best effort, as Strands' proactive compression: the agent's reply stands and
        # commits; the next step, still over the threshold, tries again. (Cancellation,
        # a lost lease, is no Exception: it still ends the step.)
        logger.warning("%scompaction failed, the conversation stays whole: %s", where, exc)
        return None
    logger.info("%scompacted %d of %d messages (~%d tokens, threshold %d)", where, count,
                len(messages), tokens, threshold(policy))
    return Compacted(Compaction(summary=dict(summary), keep=len(messages) - count),
                     input_tokens, output_tokens)
