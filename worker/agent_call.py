"""One model turn of a step: restore an agent's conversation, call it, collect the reply.

A fresh Strands `Agent` is built per attempt from the committed history, so a retried
attempt starts from exactly the same conversation and the caller's history is never
mutated. Transient provider errors are retried here (tenacity); anything else, and the
last transient error once attempts run out, propagates unchanged to the durable layer.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from strands import Agent
from strands.agent.agent_result import AgentResult
from strands.agent.conversation_manager import NullConversationManager
from strands.models.model import Model
from strands.types.exceptions import EventLoopException
from strands.types.tools import AgentTool
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from strands_durable.worker import lean_strands
from strands_durable.worker.providers.transient import is_transient

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Keys Strands adds to each message that are not needed to restore a conversation:
# `tracking_id` is a random UUID (it would make committed history non-deterministic)
# and `metadata` holds per-turn usage, only used by Strands as an estimation baseline.
_VOLATILE_MESSAGE_KEYS = ("tracking_id", "metadata")


@dataclass(frozen=True)
class RetryPolicy:
    """In-place retries of transient provider errors: exponential backoff, full jitter."""

    attempts: int = 3
    wait_min_s: float = 0.5
    wait_max_s: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"RetryPolicy.attempts must be >= 1, got {self.attempts}")
        if not 0 <= self.wait_min_s <= self.wait_max_s:
            raise ValueError("RetryPolicy needs 0 <= wait_min_s <= wait_max_s")


@dataclass(frozen=True)
class AgentReply:
    text: str
    input_tokens: int
    output_tokens: int
    messages: list[dict[str, Any]]  # the full conversation after the call, JSON-ready


async def call_agent(
    model: Model,
    *,
    system_prompt: str | None,
    history: list[dict[str, Any]],
    prompt: str,
    retry: RetryPolicy | None = None,
    timeout_s: float | None = None,
    tools: list[AgentTool] | None = None,
    before_attempt: Callable[[], None] | None = None,
) -> AgentReply:
    """Run one agent invocation on `model` (with `tools`, as many model turns and tool
    calls as the model asks for), retrying transient errors per `retry` (default policy).
    Each attempt gets `timeout_s` (None: unlimited); running out of it is transient.
    `before_attempt` runs before each attempt (a journal restarts its turn count)."""

    # Strands changes the list and its messages in place: each attempt gets its own
    # copy of the history, from one pickle (a fifth of copy.deepcopy's cost).
    frozen = pickle.dumps(history, pickle.HIGHEST_PROTOCOL)

    async def attempt() -> AgentReply:
        if before_attempt is not None:
            before_attempt()
        return await _call_once(model, system_prompt, _restored(frozen), prompt, tools or [])

    return await with_retries(attempt, retry=retry, timeout_s=timeout_s)


async def with_retries(work: Callable[[], Awaitable[T]], *, retry: RetryPolicy | None = None,
                       timeout_s: float | None = None) -> T:
    """`work()` retried in place on transient provider errors (the default policy unless
    `retry`), each attempt within `timeout_s` (None: unlimited; running out is transient)."""
    policy = retry if retry is not None else RetryPolicy()
    # The first attempt runs bare: building tenacity's retrying loop cost about 65 us a
    # call, 3% of a one-turn agent step, and most calls never retry.
    try:
        return await _within(timeout_s, work)
    except Exception as exc:
        if policy.attempts == 1 or not is_transient(exc):
            raise
        failed: Exception | None = exc
    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.attempts),
        wait=wait_random_exponential(
            multiplier=policy.wait_min_s, min=policy.wait_min_s, max=policy.wait_max_s
        ),
        retry=retry_if_exception(is_transient),
        before_sleep=_log_retry,
        reraise=True,  # the caller sees the provider's own exception, not RetryError
    )
    async for attempt in retrying:
        with attempt:
            if failed is not None:  # attempt 1, run above: tenacity waits and logs as for it
                error, failed = failed, None
                raise error
            return await _within(timeout_s, work)
    raise AssertionError("unreachable: tenacity either returns or re-raises")


async def _within(timeout_s: float | None, work: Callable[[], Awaitable[T]]) -> T:
    try:
        async with asyncio.timeout(timeout_s):
            return await work()
    except TimeoutError:
        raise TimeoutError(f"no reply from the model within {timeout_s:g}s") from None


async def _call_once(model: Model, system_prompt: str | None, history: list[dict[str, Any]],
                     prompt: str, tools: list[AgentTool]) -> AgentReply:
    lean_strands.install()  # no JSON for spans that record nothing, plain-data copies
    agent = Agent(
        model=model,
        system_prompt=system_prompt,
        tools=list(tools) or None,
        messages=history,  # type: ignore[arg-type]  # the attempt's own copy
        # The history is what the durable layer restored (bounded by the spec's context
        # policy, compacted in worker/compaction.py): Strands' default sliding window
        # would drop turns from it, and from the new turns the commit takes.
        conversation_manager=NullConversationManager(),
        callback_handler=None,  # no printing to stdout
        # Strands' own throttling retry (6 attempts, 4 s..240 s) would hide errors
        # from our policy and hold the step for minutes: one retry layer only.
        retry_strategy=None,
    )
    try:
        result = await agent.invoke_async(prompt)
    except EventLoopException as exc:
        # A model call after a tool call fails inside Strands' recursive cycle, which
        # wraps it: unwrap it, so retries and error classes see the provider's own error.
        raise exc.original_exception from None
    usage = result.metrics.accumulated_usage
    return AgentReply(
        text=_reply_text(result),
        input_tokens=int(usage.get("inputTokens", 0)),
        output_tokens=int(usage.get("outputTokens", 0)),
        messages=[_restorable(message) for message in agent.messages],
    )


def _restored(frozen: bytes) -> list[dict[str, Any]]:
    """A fresh copy of the history, each message with a tracking id that names its place
    (Strands would draw a UUID per message on every call; the ids are dropped again
    before anything is committed, see _VOLATILE_MESSAGE_KEYS)."""
    messages: list[dict[str, Any]] = pickle.loads(frozen)
    for index, message in enumerate(messages):
        message["tracking_id"] = f"restored-{index}"
    return messages


def _reply_text(result: AgentResult) -> str:
    """The text blocks of the final assistant message, joined (no trailing newline)."""
    blocks = result.message.get("content", [])
    return "\n".join(block["text"] for block in blocks if "text" in block)


def _restorable(message: Any) -> dict[str, Any]:
    return {key: value for key, value in message.items() if key not in _VOLATILE_MESSAGE_KEYS}


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome is not None else None
    wait_s = state.next_action.sleep if state.next_action is not None else 0.0
    logger.warning(
        "transient model error on attempt %d, retrying in %.2fs: %r",
        state.attempt_number,
        wait_s,
        error,
    )
