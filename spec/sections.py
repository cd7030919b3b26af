"""Typed models of the spec sections beside the workflow itself: `telemetry`,
`context_policy`, `skills`, `security` and `env` (strands-cli's schema, field for field,
with its defaults). The JSON schema has already checked their shape; these carry types.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from strands_durable.spec.steps import SpecModel

__all__ = [
    "Compaction",
    "ContextPolicy",
    "Env",
    "Guardrails",
    "Notes",
    "OtelConfig",
    "Redaction",
    "Retrieval",
    "Secret",
    "Security",
    "Skill",
    "SkillFiles",
    "SkillLibrary",
    "Telemetry",
]


# --- telemetry ---------------------------------------------------------------


class OtelConfig(SpecModel):
    endpoint: str | None = None
    service_name: str | None = None
    sample_ratio: float = 1.0


class Redaction(SpecModel):
    tool_inputs: bool = True
    tool_outputs: bool = False


class Telemetry(SpecModel):
    otel: OtelConfig | None = None
    redact: Redaction | None = None


# --- context policy ----------------------------------------------------------


class Compaction(SpecModel):
    enabled: bool = True
    when_tokens_over: int | None = None
    summary_ratio: float = 0.35
    preserve_recent_messages: int = 12
    summarization_model: str | None = None


class Notes(SpecModel):
    file: str
    include_last: int = 12
    format: Literal["markdown", "json"] = "markdown"


class Retrieval(SpecModel):
    jit_tools: list[str] = Field(default_factory=list)
    mcp_servers: list[str] = Field(default_factory=list)


class ContextPolicy(SpecModel):
    compaction: Compaction | None = None
    notes: Notes | None = None
    retrieval: Retrieval | None = None


# --- skills ------------------------------------------------------------------


class Skill(SpecModel):
    id: str
    path: str
    description: str | None = None
    preload_metadata: bool = False


class SkillFiles(BaseModel):
    """One skill's Markdown files by POSIX path relative to its directory; `found` is
    False when its path is not a directory (the Skill tool then answers as strands-cli)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    found: bool = True
    files: dict[str, str] = Field(default_factory=dict)


class SkillLibrary(BaseModel):
    """The skills' files as the loader read them (spec/skills.py): carried in
    the stored spec, so a worker serves the Skill tool without reading a path."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skills: dict[str, SkillFiles] = Field(default_factory=dict)


# --- security ----------------------------------------------------------------


class Guardrails(SpecModel):
    deny_network: bool | None = None
    pii_redaction: bool | None = None
    # None: no restriction; []: no tool at all.
    allow_tools: list[str] | None = None


class Security(SpecModel):
    guardrails: Guardrails | None = None


# --- env -----------------------------------------------------------------------


class Secret(SpecModel):
    key: str
    name: str | None = None
    source: Literal["env", "secrets_manager", "ssm", "file"]
    path: str | None = None


class Env(SpecModel):
    secrets: list[Secret] = Field(default_factory=list)
    mounts: dict[str, str] | None = None
