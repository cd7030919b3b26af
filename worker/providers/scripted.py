"""`ScriptedModel`: a deterministic offline Strands model driven by a `ScriptConfig`.

It lets examples, tests and benchmarks run whole workflows without a network: the
reply is chosen by the script's rules on (agent id, prompt), and token usage is a
word count, so two runs of the same session report the same numbers.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from pydantic import BaseModel
from strands.models.model import Model
from strands.types.content import Messages
from strands.types.streaming import StreamEvent
from strands.types.tools import ToolSpec

from strands_durable.errors import ProviderError
from strands_durable.spec.script import ScriptConfig, ScriptToolCall
from strands_durable.worker.providers.config import ModelConfig

T = TypeVar("T", bound=BaseModel)


def count_words(text: str) -> int:
    """The scripted provider's token count: whitespace-separated words."""
    return len(text.split())


def prompt_and_turn(messages: Messages) -> tuple[str, int]:
    """The step's prompt (the last user message with text; tool results carry none) and
    this model call's turn within the step: 1 + the assistant messages since it."""
    turn = 1
    for message in reversed(messages):
        if message.get("role") == "assistant":
            turn += 1
            continue
        text = "".join(block["text"] for block in message["content"] if "text" in block)
        if text:
            return text, turn
    return "", turn


class ScriptedModel(Model):
    """A Strands model whose replies come from `script.answer_for(agent_id, prompt, turn)`."""

    def __init__(self, agent_id: str, script: ScriptConfig | None = None) -> None:
        self.agent_id = agent_id
        self.script = script if script is not None else ScriptConfig()

    def update_config(self, **model_config: Any) -> None:
        # Only the two constructor settings exist; anything else is a caller bug.
        unknown = set(model_config) - {"agent_id", "script"}
        if unknown:
            raise ProviderError(f"scripted model: unknown config keys {sorted(unknown)}")
        self.agent_id = model_config.get("agent_id", self.agent_id)
        self.script = model_config.get("script", self.script)

    def get_config(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id, "script": self.script}

    async def structured_output(
        self,
        output_model: type[T],
        prompt: Messages,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[dict[str, T | Any], None]:
        raise ProviderError(
            f"scripted model (agent {self.agent_id!r}): structured output is not supported"
        )
        yield {}  # pragma: no cover  - makes this an async generator like the base API

    async def stream(
        self,
        messages: Messages,
        tool_specs: list[ToolSpec] | None = None,
        system_prompt: str | None = None,
        **kwargs: Any,
    ) -> AsyncGenerator[StreamEvent, None]:
        started = time.perf_counter()
        prompt, turn = prompt_and_turn(messages)
        if self.script.delay_s > 0:
            await asyncio.sleep(self.script.delay_s)
        answer = self.script.answer_for(self.agent_id, prompt, turn)
        word_delay = self.script.word_delay_s
        if isinstance(answer, str):
            events, said = _reply_events(answer, by_word=word_delay > 0), answer
        else:
            events = _tool_use_events(answer, _call_id_seed(prompt, turn))
            said = " ".join(f"{call.name} {json.dumps(call.input)}" for call in answer)
        for n, event in enumerate(events):
            if word_delay > 0 and n > 2 and "contentBlockDelta" in event:
                await asyncio.sleep(word_delay)  # the next word, as a model writes it
            yield event
        input_tokens, output_tokens = count_words(prompt), count_words(said)
        latency_ms = int((time.perf_counter() - started) * 1000)
        yield {
            "metadata": {
                "usage": {
                    "inputTokens": input_tokens,
                    "outputTokens": output_tokens,
                    "totalTokens": input_tokens + output_tokens,
                },
                "metrics": {"latencyMs": latency_ms},
            }
        }


def _reply_events(text: str, by_word: bool = False) -> list[StreamEvent]:
    """The Strands stream events of one assistant text message that ends the turn: its
    text in one delta, or `by_word` a delta per word (each with its following space)."""
    parts = re.findall(r"\S+\s*|\s+", text) if by_word and text else [text]
    deltas: list[StreamEvent] = [{"contentBlockDelta": {"delta": {"text": part}}}
                                 for part in parts]
    return [
        {"messageStart": {"role": "assistant"}},
        {"contentBlockStart": {"start": {}}},
        *deltas,
        {"contentBlockStop": {}},
        {"messageStop": {"stopReason": "end_turn"}},
    ]


def _call_id_seed(prompt: str, turn: int) -> str:
    """Deterministic tool-use ids: the same prompt and turn ask with the same ids."""
    return hashlib.sha256(f"{turn}\0{prompt}".encode()).hexdigest()[:12]


def _tool_use_events(calls: tuple[ScriptToolCall, ...], seed: str) -> list[StreamEvent]:
    """The Strands stream events of one assistant message asking for `calls`."""
    events: list[StreamEvent] = [{"messageStart": {"role": "assistant"}}]
    for index, call in enumerate(calls, start=1):
        tool_use_id = f"tooluse_{seed}_{index}"
        events += [
            {"contentBlockStart": {"start": {"toolUse": {"toolUseId": tool_use_id,
                                                         "name": call.name}}}},
            {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(call.input)}}}},
            {"contentBlockStop": {}},
        ]
    events.append({"messageStop": {"stopReason": "tool_use"}})
    return events


def build(cfg: ModelConfig) -> Model:
    return ScriptedModel(cfg.agent_id, cfg.script if cfg.script is not None else ScriptConfig())
