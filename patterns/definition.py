"""What one pattern type is, for the rest of the code: its config model, the checks of
a spec that uses it, its planner, the model of its stored state, and how the console
draws its state.

Each pattern module (chain.py, graph.py, ...) defines one `PatternDefinition` subclass
and an instance of it named `PATTERN`; patterns/__init__.py registers it by
type. The loader, the spec model and the budgets ask the registry, never the config's
class: a new pattern is a new module and one registry line.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from strands_durable.errors import SpecError
from strands_durable.patterns.base import Planner
from strands_durable.patterns.shapes import Shape, raw_shape
from strands_durable.patterns.state import PatternState
from strands_durable.spec.steps import AgentStep, HitlStep, PatternConfig

__all__ = [
    "COMMON_TEMPLATE_NAMES",
    "AgentCall",
    "AgentRef",
    "PatternDefinition",
    "StepLike",
    "StepSite",
    "TemplateField",
    "check_unique",
    "indexed",
    "name_set",
    "optional",
    "step_templates",
]

# Names every pattern's template contexts hold.
COMMON_TEMPLATE_NAMES = frozenset({"last_response", "hitl_response"})


class AgentCall(Protocol):
    """A step that calls an agent: a chain step, a workflow task, a graph node..."""

    @property
    def agent(self) -> str: ...

    @property
    def input(self) -> str | None: ...


StepLike = HitlStep | AgentCall
StepSite = tuple[str, StepLike]  # (field path, step)
AgentRef = tuple[str, str]  # (field path, agent id)


@dataclass(frozen=True)
class TemplateField:
    """A template of the spec, where it is, and what it may name beyond the pattern's
    names and the inputs: the step's own `vars`; a graph condition is an expression."""

    path: str
    text: str
    step_vars: frozenset[str] = frozenset()
    condition: bool = False


ConfigT = TypeVar("ConfigT", bound=PatternConfig)


class PatternDefinition(Generic[ConfigT]):
    """One pattern type. Subclasses set the attributes and override what applies."""

    pattern_type: str
    config_model: type[ConfigT]
    # The `$defs` entry of the shipped JSON schema that `pattern.config` must match.
    schema_def: str
    # Names the pattern puts in its template contexts (strands-cli's executors, plus
    # the aliases its schema descriptions promise). Generous on purpose: a name allowed
    # here that a context lacks fails at render time; one missing rejects a valid spec.
    context_names: frozenset[str]
    planner: Planner
    # The typed model of the pattern_state its planner stores (patterns/state.py): every
    # pattern has its own (a test holds each registered pattern to one); this default
    # keeps the raw state.
    state_model: type[PatternState] = PatternState
    # A step budget the pattern has even when the spec sets none (None: unbounded).
    default_max_steps: int | None = None
    # The config field `durable validate` counts as the pattern's parts (None: the
    # pattern decides its parts as it runs: evaluator rounds, orchestrator plans).
    parts_field: str | None = None
    # Whether a notes entry names the agent's configured tools (strands-cli's
    # orchestrator gives none).
    notes_name_tools: bool = True

    @property
    def template_names(self) -> frozenset[str]:
        return COMMON_TEMPLATE_NAMES | self.context_names

    def steps(self, config: ConfigT) -> Iterator[StepSite]:
        """Every step-like item of the config (agent or HITL) with its field path."""
        return iter(())

    def own_agent_refs(self, config: ConfigT) -> Iterator[AgentRef]:
        """Agents the config names outside its steps (a router, a producer...)."""
        return iter(())

    def agent_refs(self, config: ConfigT) -> Iterator[AgentRef]:
        """(field path, agent id) for every place the config names an agent."""
        yield from self.own_agent_refs(config)
        for path, step in self.steps(config):
            if not isinstance(step, HitlStep):
                yield f"{path}.agent", step.agent

    def prompt_templates(self, config: ConfigT) -> Iterator[str]:
        """Agents whose prompt this pattern renders as a step's input (strands-cli uses
        agents' prompts as written otherwise); by default none."""
        return iter(())

    def template_fields(self, config: ConfigT) -> Iterator[TemplateField]:
        """Every template of the config; by default those of its steps."""
        for path, step in self.steps(config):
            yield from step_templates(path, step)

    def check(self, config: ConfigT, source: str) -> None:
        """References inside the config (ids, dependencies, edges), once every agent
        it names is known to exist; raises SpecError."""

    def shape(self, view: Mapping[str, Any]) -> Shape:
        """How the console draws a session's state view (`planner.view`): every
        pattern draws its own with a drawer of patterns/shapes.py (a test holds each
        registered pattern to one); this default shows the raw state."""
        return raw_shape(self.pattern_type, view)


def indexed(path: str, items: Iterable[StepLike]) -> Iterator[StepSite]:
    for i, item in enumerate(items):
        yield f"{path}[{i}]", item


def optional(path: str, item: StepLike | None) -> Iterator[StepSite]:
    if item is not None:
        yield path, item


def step_templates(path: str, step: StepLike) -> Iterator[TemplateField]:
    if isinstance(step, HitlStep):  # HitlTask and HitlGate too
        yield TemplateField(f"{path}.prompt", step.prompt)
        if step.context_display is not None:
            yield TemplateField(f"{path}.context_display", step.context_display)
        return
    step_vars = frozenset(step.vars) if isinstance(step, AgentStep) else frozenset()
    if step.input is not None:
        yield TemplateField(f"{path}.input", step.input, step_vars)


def name_set(text: str) -> frozenset[str]:
    """The names in a space-separated list."""
    return frozenset(text.split())


def check_unique(ids: list[str], path: str, noun: str, source: str) -> None:
    """Each id once; the second occurrence is the error."""
    seen: set[str] = set()
    for i, item_id in enumerate(ids):
        if item_id in seen:
            raise SpecError(source, f"{path}[{i}].id", f"duplicate {noun} id {item_id!r}")
        seen.add(item_id)
