"""The building blocks every pattern's config is made of: steps, HITL pauses, and the
base model and base class of a pattern config.

Pattern configs themselves live with their pattern (patterns/<type>.py); this
module must not import them (spec/model.py picks a config by pattern type
through the pattern registry).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

__all__ = [
    "AgentStep",
    "HitlGate",
    "HitlStep",
    "HitlValidation",
    "PatternConfig",
    "Scalar",
    "SpecModel",
    "Step",
    "hitl_or",
]

Scalar = str | int | float | bool


class SpecModel(BaseModel):
    """Frozen; unknown keys ignored (the JSON schema has already rejected them)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class PatternConfig(SpecModel):
    """The base of every pattern's `pattern.config` model."""


class AgentStep(SpecModel):
    """A step that runs one agent on `input` (a template over the variables and earlier steps)."""

    agent: str
    input: str | None = None
    vars: dict[str, Scalar] = Field(default_factory=dict)
    tool_overrides: list[str] | None = None


class HitlStep(SpecModel):
    """A human-in-the-loop pause: the session waits for a response."""

    type: Literal["hitl"] = "hitl"
    prompt: str
    context_display: str | None = None
    default: str | None = None
    timeout_seconds: int | None = None


class HitlValidation(SpecModel):
    pattern: str | None = None


class HitlGate(HitlStep):
    """A review gate of evaluator_optimizer / orchestrator_workers (adds validation)."""

    validation: HitlValidation | None = None


def hitl_or(other: str) -> Any:
    """Discriminator: the HITL form is the one with a `type` key (as the schema's oneOf)."""

    def kind(value: Any) -> str:
        if isinstance(value, dict):
            return "hitl" if "type" in value else other
        return "hitl" if isinstance(value, HitlStep) else other

    discriminator: Callable[[Any], str] = kind
    return Discriminator(discriminator)


Step = Annotated[
    Annotated[AgentStep, Tag("agent")] | Annotated[HitlStep, Tag("hitl")],
    hitl_or("agent"),
]
