"""Typed, immutable models of a strands-cli workflow spec (version 0).

The models follow `schema/strands-workflow.schema.json` field for field; the loader
validates against that schema first, so these models carry types rather than rules.
Sections we do not act on (telemetry, tools, skills, security, env, context_policy,
metadata, tags) are kept as extra fields on `Spec` so every valid spec loads.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator

from strands_durable.scheduler.spec.script import ScriptConfig

__all__ = [
    "PATTERN_TYPES",
    "PROVIDERS",
    "AcceptConfig",
    "AgentNode",
    "AgentSpec",
    "AgentStep",
    "Artifact",
    "Branch",
    "Budgets",
    "ChainConfig",
    "Choice",
    "Edge",
    "EvaluatorConfig",
    "EvaluatorOptimizerConfig",
    "FailurePolicy",
    "GraphConfig",
    "GraphNode",
    "HitlGate",
    "HitlStep",
    "HitlTask",
    "HitlValidation",
    "Inference",
    "InputVarSpec",
    "Inputs",
    "OrchestratorConfig",
    "OrchestratorLimits",
    "OrchestratorWorkersConfig",
    "Outputs",
    "ParallelConfig",
    "Pattern",
    "PatternConfig",
    "PatternType",
    "Route",
    "RouterConfig",
    "RoutingConfig",
    "Runtime",
    "Spec",
    "Step",
    "Task",
    "WorkerTemplate",
    "WorkflowConfig",
    "WorkflowTask",
]

PatternType = Literal[
    "chain",
    "workflow",
    "routing",
    "parallel",
    "evaluator_optimizer",
    "orchestrator_workers",
    "graph",
]
PATTERN_TYPES: tuple[str, ...] = get_args(PatternType)

# Model providers a worker can build (the schema leaves provider a free string).
PROVIDERS: tuple[str, ...] = (
    "bedrock",
    "openai",
    "anthropic",
    "ollama",
    "litellm",
    "llamacpp",
    "scripted",
)

InputType = Literal["string", "number", "integer", "boolean", "array", "object"]
Scalar = str | int | float | bool


class _Model(BaseModel):
    """Frozen; unknown keys ignored (the JSON schema has already rejected them)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


# --- runtime -----------------------------------------------------------------


class Budgets(_Model):
    max_steps: int | None = None
    max_tokens: int | None = None
    max_duration_s: int | None = None
    warn_threshold: float = 0.8


class FailurePolicy(_Model):
    retries: int = 2
    backoff: Literal["constant", "exponential", "jittered"] = "exponential"
    wait_min: int = 1
    wait_max: int = 60


class Runtime(_Model):
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


class Inference(_Model):
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


class AgentSpec(_Model):
    """An inline agent (the `$ref` form is rejected by the loader)."""

    prompt: str
    provider: str | None = None
    model_id: str | None = None
    inference: Inference | None = None
    tools: list[str] = Field(default_factory=list)
    input_schema: str | dict[str, Any] | None = None
    output_schema: str | dict[str, Any] | None = None


# --- steps -------------------------------------------------------------------


class AgentStep(_Model):
    agent: str
    input: str | None = None
    vars: dict[str, Scalar] = Field(default_factory=dict)
    tool_overrides: list[str] | None = None


class HitlStep(_Model):
    """A human-in-the-loop pause: the session waits for a response."""

    type: Literal["hitl"] = "hitl"
    prompt: str
    context_display: str | None = None
    default: str | None = None
    timeout_seconds: int | None = None


class HitlValidation(_Model):
    pattern: str | None = None


class HitlGate(HitlStep):
    """A review gate of evaluator_optimizer / orchestrator_workers (adds validation)."""

    validation: HitlValidation | None = None


def _hitl_or(other: str) -> Any:
    """Discriminator: the HITL form is the one with a `type` key (as the schema's oneOf)."""

    def kind(value: Any) -> str:
        if isinstance(value, dict):
            return "hitl" if "type" in value else other
        return "hitl" if isinstance(value, HitlStep) else other

    return Discriminator(kind)


Step = Annotated[
    Annotated[AgentStep, Tag("agent")] | Annotated[HitlStep, Tag("hitl")],
    _hitl_or("agent"),
]


# --- pattern configs ---------------------------------------------------------


class ChainConfig(_Model):
    steps: list[Step]


class WorkflowTask(_Model):
    id: str
    agent: str
    deps: list[str] = Field(default_factory=list)
    description: str | None = None
    input: str | None = None


class HitlTask(HitlStep):
    id: str
    deps: list[str] = Field(default_factory=list)


Task = Annotated[
    Annotated[WorkflowTask, Tag("agent")] | Annotated[HitlTask, Tag("hitl")],
    _hitl_or("agent"),
]


class WorkflowConfig(_Model):
    tasks: list[Task]


class RouterConfig(_Model):
    agent: str
    input: str | None = None
    max_retries: int = 2
    review_router: Step | None = None


class Route(_Model):
    then: list[Step] = Field(default_factory=list)


class RoutingConfig(_Model):
    router: RouterConfig
    routes: dict[str, Route]


class Branch(_Model):
    id: str
    steps: list[Step]


class ParallelConfig(_Model):
    branches: list[Branch]
    reduce: Step | None = None


class EvaluatorConfig(_Model):
    agent: str
    input: str | None = None


class AcceptConfig(_Model):
    min_score: int
    max_iters: int = 3


class EvaluatorOptimizerConfig(_Model):
    producer: str
    evaluator: EvaluatorConfig
    accept: AcceptConfig
    revise_prompt: str | None = None
    review_gate: HitlGate | None = None


class OrchestratorLimits(_Model):
    max_workers: int | None = None
    max_rounds: int | None = None


class OrchestratorConfig(_Model):
    agent: str
    limits: OrchestratorLimits | None = None


class WorkerTemplate(_Model):
    agent: str
    tools: list[str] | None = None


class OrchestratorWorkersConfig(_Model):
    orchestrator: OrchestratorConfig
    decomposition_review: HitlGate | None = None
    worker_template: WorkerTemplate
    reduce_review: HitlGate | None = None
    reduce: Step | None = None
    writeup: Step | None = None


class AgentNode(_Model):
    agent: str
    input: str | None = None


GraphNode = Annotated[
    Annotated[AgentNode, Tag("agent")] | Annotated[HitlStep, Tag("hitl")],
    _hitl_or("agent"),
]


class Choice(_Model):
    when: str
    to: str


class Edge(_Model):
    """Exactly one of `to` (static; only the first target runs) or `choose`."""

    from_: str = Field(alias="from")
    to: list[str] | None = None
    choose: list[Choice] | None = None


class GraphConfig(_Model):
    max_iterations: int = 10
    nodes: dict[str, GraphNode]  # insertion order matters: the first node is the entry
    edges: list[Edge]


PatternConfig = (
    ChainConfig
    | WorkflowConfig
    | RoutingConfig
    | ParallelConfig
    | EvaluatorOptimizerConfig
    | OrchestratorWorkersConfig
    | GraphConfig
)

CONFIG_MODELS: dict[str, type[_Model]] = {
    "chain": ChainConfig,
    "workflow": WorkflowConfig,
    "routing": RoutingConfig,
    "parallel": ParallelConfig,
    "evaluator_optimizer": EvaluatorOptimizerConfig,
    "orchestrator_workers": OrchestratorWorkersConfig,
    "graph": GraphConfig,
}


class Pattern(_Model):
    type: PatternType
    config: PatternConfig

    @model_validator(mode="before")
    @classmethod
    def _config_by_type(cls, data: Any) -> Any:
        # The declared type picks the config model; never let the union guess.
        if isinstance(data, dict) and isinstance(data.get("config"), dict):
            model = CONFIG_MODELS.get(str(data.get("type")))
            if model is not None:
                return {**data, "config": model.model_validate(data["config"])}
        return data


# --- inputs and outputs ------------------------------------------------------


class InputVarSpec(_Model):
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


class Inputs(_Model):
    required: dict[str, InputVarSpec] = Field(default_factory=dict)
    optional: dict[str, InputVarSpec] = Field(default_factory=dict)
    values: dict[str, Scalar] = Field(default_factory=dict)

    def declared(self, name: str) -> InputVarSpec | None:
        return self.required.get(name) or self.optional.get(name)


class Artifact(_Model):
    path: str
    from_: str = Field(alias="from")


class Outputs(_Model):
    artifacts: list[Artifact] = Field(default_factory=list)


class Spec(BaseModel):
    """A whole spec. Sections we do not use stay available as extra fields."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    version: int | str
    name: str
    description: str | None = None
    runtime: Runtime
    agents: dict[str, AgentSpec]
    pattern: Pattern
    inputs: Inputs | None = None
    outputs: Outputs | None = None
