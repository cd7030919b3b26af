"""The `scripted` provider's rules: a deterministic offline stand-in for an LLM.

The rules live with the spec (`runtime.script`) or come from `--script FILE`; they are
stored with the session so every worker answers the same way.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ScriptToolCall(BaseModel):
    """A tool the scripted model asks for: its name and its input."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    input: dict[str, Any] = Field(default_factory=dict)

    def __hash__(self) -> int:  # a model config holding it is a cache key
        return hash((self.name, json.dumps(self.input, sort_keys=True, default=str)))


class ScriptRule(BaseModel):
    """First matching rule wins; a rule with no conditions matches everything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    contains: str | None = None
    # The model call within the step, 1-based (a tool result starts the next turn).
    turn: int | None = Field(default=None, ge=1)
    reply: str | None = None
    # Instead of replying, fail the call with this message: offline failure drills.
    error: str | None = None
    # Instead of replying, ask for these tools (the model's turn ends in tool use).
    tool_calls: tuple[ScriptToolCall, ...] | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_answer(self) -> ScriptRule:
        answers = [self.reply, self.error, self.tool_calls]
        if sum(answer is not None for answer in answers) != 1:
            raise ValueError("a rule needs exactly one of `reply`, `error` or `tool_calls`")
        return self

    def matches(self, agent_id: str, prompt: str, turn: int = 1) -> bool:
        if self.agent is not None and self.agent != agent_id:
            return False
        if self.turn is not None and self.turn != turn:
            return False
        return self.contains is None or self.contains in prompt


class ScriptConfig(BaseModel):
    """The `scripted` provider's rules: deterministic offline replies (and tool calls) in place
    of a model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # A delay past the model timeout (DURABLE_MODEL_TIMEOUT_S) could only time out.
    delay_s: float = Field(default=0.0, ge=0.0, le=600.0, allow_inf_nan=False)
    # A text reply streamed a word at a time, this long between words (0: at once), as a
    # model writes: for following a step live (GET /v1/sessions/{id}/stream).
    word_delay_s: float = Field(default=0.0, ge=0.0, le=10.0, allow_inf_nan=False)
    rules: tuple[ScriptRule, ...] = ()

    def rule_for(self, agent_id: str, prompt: str, turn: int = 1) -> ScriptRule | None:
        return next((r for r in self.rules if r.matches(agent_id, prompt, turn)), None)

    def answer_for(self, agent_id: str, prompt: str,
                   turn: int = 1) -> str | tuple[ScriptToolCall, ...]:
        """The reply text, or the tool calls to ask for; raises ScriptedFailure when the
        matching rule says `error`."""
        rule = self.rule_for(agent_id, prompt, turn)
        if rule is None:
            return f"{agent_id}: {prompt[:200]}"
        if rule.error is not None:
            raise ScriptedFailure(f"scripted error for agent {agent_id}: {rule.error}")
        if rule.tool_calls is not None:
            return rule.tool_calls
        return rule.reply or ""


class ScriptedFailure(RuntimeError):
    """A scripted provider call that the rules say must fail (not transient)."""
