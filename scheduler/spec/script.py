"""The `scripted` provider's rules: a deterministic offline stand-in for an LLM.

The rules live with the spec (`runtime.script`) or come from `--script FILE`; they are
stored with the session so every worker answers the same way.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class ScriptRule(BaseModel):
    """First matching rule wins; a rule with no conditions matches everything."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    contains: str | None = None
    reply: str | None = None
    # Instead of replying, fail the call with this message: offline failure drills.
    error: str | None = None

    @model_validator(mode="after")
    def _reply_or_error(self) -> ScriptRule:
        if (self.reply is None) == (self.error is None):
            raise ValueError("a rule needs exactly one of `reply` or `error`")
        return self

    def matches(self, agent_id: str, prompt: str) -> bool:
        if self.agent is not None and self.agent != agent_id:
            return False
        return self.contains is None or self.contains in prompt


class ScriptConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    # A delay past the model timeout (DURABLE_MODEL_TIMEOUT_S) could only time out.
    delay_s: float = Field(default=0.0, ge=0.0, le=600.0, allow_inf_nan=False)
    rules: tuple[ScriptRule, ...] = ()

    def rule_for(self, agent_id: str, prompt: str) -> ScriptRule | None:
        return next((r for r in self.rules if r.matches(agent_id, prompt)), None)

    def reply_for(self, agent_id: str, prompt: str) -> str:
        """The reply; raises ScriptedFailure when the matching rule says `error`."""
        rule = self.rule_for(agent_id, prompt)
        if rule is None:
            return f"{agent_id}: {prompt[:200]}"
        if rule.error is not None:
            raise ScriptedFailure(f"scripted error for agent {agent_id}: {rule.error}")
        return rule.reply or ""


class ScriptedFailure(RuntimeError):
    """A scripted provider call that the rules say must fail (not transient)."""
