"""Typed, immutable models of a strands-cli workflow spec (version 0).

The models follow `schema/strands-workflow.schema.json` field for field; the loader
validates against that schema first, so these models carry types rather than rules.
`telemetry`, `context_policy`, `skills`, `security` and `env` are typed in sections.py;
`metadata` and `tags` stay extra fields on `Spec` so every valid spec loads.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializeAsAny, model_validator

from strands_durable.patterns import PATTERNS
from strands_durable.spec.script import ScriptConfig
from strands_durable.spec.sections import (
    ContextPolicy,
    Env,
    Security,
    Skill,
    SkillLibrary,
    Telemetry,
)
from strands_durable.spec.steps import PatternConfig, Scalar, SpecModel
from strands_durable.spec.tools import ToolsConfig
from strands_durable.tools import native_name

__all__ = [
    "AgentSpec",
    "Artifact",
    "Budgets",
    "FailurePolicy",
    "Inference",
    "InputVarSpec",
    "Inputs",
    "Outputs",
    "Pattern",
    "Runtime",
    "Spec",
]

InputType = Literal["string", "number", "integer", "boolean", "array", "object"]


# --- runtime -----------------------------------------------------------------


class Budgets(SpecModel):
    """Limits on a session: steps, tokens (input + output) and wall time; a warning at
    `warn_threshold`."""

    max_steps: int | None = None
    max_tokens: int | None = None
    max_duration_s: int | None = None
    warn_threshold: float = 0.8


class FailurePolicy(SpecModel):
    """How often and how far apart a failed step is tried again (spec `runtime.failure_policy`)."""

    retries: int = 2
    backoff: Literal["constant", "exponential", "jittered"] = "exponential"
    wait_min: int = 1
    wait_max: int = 60


class SpecCapacity(BaseModel):
    """Our extension, `runtime.capacity`: lower limits for this spec's own model calls on
    each provider key (provider, model, host) they use, kept by all its sessions together
    beside the fleet's (DURABLE_CAPACITY_LIMITS and the learned ones): never a way to
    raise them (worker/capacity.py takes both). Left out: no limit of its own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rpm: int | None = Field(default=None, ge=1, le=10_000_000, strict=True,
                            description="Requests per minute.")
    tpm: int | None = Field(default=None, ge=1, le=10_000_000_000, strict=True,
                            description="Input + output tokens per minute.")
    in_flight: int | None = Field(default=None, ge=1, le=100_000, strict=True,
                                  description="Requests at once.")
    wait_counts_toward_duration: bool = Field(
        default=True, strict=True,
        description="Whether time a step waits for capacity counts toward "
                    "budgets.max_duration_s (strands-cli's budget is wall-clock time).")

    @property
    def limited(self) -> bool:
        """Whether the spec declares any limit of its own."""
        return bool(self.rpm or self.tpm or self.in_flight)

    def scope_id(self, spec_name: str, namespace: str = "") -> str:
        """Which sessions keep these limits together: those of one namespace's specs of
        this name that declare the same limits (a tenant's spec of the same name cannot
        spend another's budget)."""
        raw = f"{spec_name}\0{self.rpm}\0{self.tpm}\0{self.in_flight}"
        if namespace and namespace != "default":  # the default's ids as before: upgrades
            raw += f"\0{namespace}"
        return hashlib.sha256(raw.encode()).hexdigest()[:16]


class Runtime(SpecModel):
    """Where the agents' models come from: provider, model, host or region, sampling, budgets,
    failure policy."""

    provider: str
    model_id: str | None = None
    region: str | None = None
    host: str | None = None
    space_id: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_parallel: int = 5
    budgets: Budgets | None = None
    failure_policy: FailurePolicy = FailurePolicy()
    # Our extension: rules of the offline `scripted` provider (not in the schema).
    script: ScriptConfig | None = None
    # Our extension: this spec's own lower provider limits (not in the schema).
    capacity: SpecCapacity | None = None


class Inference(SpecModel):
    """An agent's sampling settings (temperature, top_p, max_tokens), over the runtime's."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


class AgentSpec(SpecModel):
    """An inline agent (the `$ref` form is rejected by the loader)."""

    prompt: str
    provider: str | None = None
    model_id: str | None = None
    inference: Inference | None = None
    # None: every global tool (strands-cli's rule); a list: the tools it names.
    tools: list[str] | None = None
    input_schema: str | dict[str, Any] | None = None
    output_schema: str | dict[str, Any] | None = None


# --- the pattern ---------------------------------------------------------------


class Pattern(SpecModel):
    """The workflow's pattern: its `type` (one of the seven) and that type's `config` model."""

    type: str
    # SerializeAsAny: dump the fields of the type's config model, not of the base.
    config: SerializeAsAny[PatternConfig]

    @model_validator(mode="before")
    @classmethod
    def _config_by_type(cls, data: Any) -> Any:
        # The declared type picks the config model; never let a union guess.
        if isinstance(data, dict):
            pattern_type = str(data.get("type"))
            if pattern_type not in PATTERNS:
                raise ValueError(f"unknown pattern type {pattern_type!r}; "
                                 f"supported: {', '.join(PATTERNS)}")
            config = data.get("config")
            if isinstance(config, dict):
                model = PATTERNS[pattern_type].config_model
                return {**data, "config": model.model_validate(config)}
        return data


# --- inputs and outputs ------------------------------------------------------


class InputVarSpec(SpecModel):
    """`topic: string` (shorthand) or `{type, description, default, enum}`."""

    type: InputType
    description: str | None = None
    default: Any = None
    enum: list[Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data

    @property
    def has_default(self) -> bool:
        return "default" in self.model_fields_set


class Inputs(SpecModel):
    """The spec's variables: required and optional declarations and default `values`."""

    required: dict[str, InputVarSpec] = Field(default_factory=dict)
    optional: dict[str, InputVarSpec] = Field(default_factory=dict)
    values: dict[str, Scalar] = Field(default_factory=dict)

    def declared(self, name: str) -> InputVarSpec | None:
        return self.required.get(name) or self.optional.get(name)


class Artifact(SpecModel):
    """An output file: `path` (a template, written under the run's output folder) rendered
    `from` a template."""

    path: str
    from_: str = Field(alias="from")


class Outputs(SpecModel):
    """What a run writes when it completes: its artifacts."""

    artifacts: list[Artifact] = Field(default_factory=list)


class Spec(BaseModel):
    """A whole spec. `metadata` and `tags` stay available as extra fields."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    version: int | str
    name: str
    description: str | None = None
    runtime: Runtime
    agents: dict[str, AgentSpec]
    pattern: Pattern
    inputs: Inputs | None = None
    outputs: Outputs | None = None
    tools: ToolsConfig | None = None
    telemetry: Telemetry | None = None
    context_policy: ContextPolicy | None = None
    skills: list[Skill] = Field(default_factory=list)
    security: Security | None = None
    env: Env | None = None
    # Not a spec field (the schema refuses it in what a user writes): the loader reads
    # the skills' files and attaches them here (spec/skills.py).
    skill_library: SkillLibrary | None = None

    def tools_for(self, agent_id: str, overrides: list[str] | None = None) -> ToolsConfig:
        """The tools agent `agent_id` gets (a step's `tool_overrides` win over its list)."""
        wanted = overrides if overrides is not None else self.agents[agent_id].tools
        selected = (self.tools or ToolsConfig()).selected(wanted)
        guardrails = self.security.guardrails if self.security else None
        if guardrails is None or guardrails.allow_tools is None:
            return selected
        # The loader refuses a spec that names a tool outside the list; this keeps the
        # worker to it whatever reaches it.
        allowed = set(guardrails.allow_tools)
        return ToolsConfig(
            python=[tool for tool in selected.python  # a native tool by any of its names
                    if tool.callable in allowed or (tool.native is not None and any(
                        native_name(entry) == tool.native for entry in allowed))],
            mcp=[server for server in selected.mcp if server.id in allowed],
            http_executors=[executor for executor in selected.http_executors
                            if executor.id in allowed])


@lru_cache(maxsize=256)
def parse_spec(spec_json: str) -> Spec:
    """A session's stored spec (checked at submit), read back; cached by its text, since
    every step of a session reads the same one."""
    return Spec.model_validate(json.loads(spec_json))
