"""Load a strands-cli workflow spec: parse, validate, cross-check, resolve variables.

Every failure is a SpecError naming the source, the field path and the problem, in
this order: YAML syntax, top-level shape, the shipped JSON schema (with readable
messages: each `oneOf` is rewritten into an if/then/else on its discriminating key,
and `pattern.config` is validated against the config of the declared pattern type),
supported providers, references between fields, input variables, then a static
check of every template against the names available where it renders.

Before any of that, the spec's size is bounded (sessions/settings.py `Limits`): its
text, its nesting depth, and its nodes and characters once YAML aliases are expanded,
so a small alias bomb or a deeply nested document is refused while it is being read,
not after it has been expanded (or has overflowed the stack).
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from pydantic import ValidationError

from strands_durable.errors import InvalidId, SpecError, TemplateError
from strands_durable.scheduler.spec.model import (
    PROVIDERS,
    AgentNode,
    AgentStep,
    ChainConfig,
    EvaluatorOptimizerConfig,
    GraphConfig,
    HitlStep,
    Inputs,
    InputVarSpec,
    OrchestratorWorkersConfig,
    ParallelConfig,
    Pattern,
    RoutingConfig,
    Spec,
    WorkflowConfig,
    WorkflowTask,
)
from strands_durable.scheduler.spec.script import ScriptConfig
from strands_durable.scheduler.spec.templates import (
    KNOWN_GLOBALS,
    undeclared_condition_names,
    undeclared_names,
)
from strands_durable.settings import Limits, current_limits
from strands_durable.store.keys import check_name

__all__ = [
    "ARTIFACT_NAMES",
    "PATTERN_NAMES",
    "LoadedSpec",
    "check_data_shape",
    "check_spec_size",
    "load_script_file",
    "load_spec_data",
    "load_spec_file",
    "load_spec_text",
    "parse_var_args",
]

SCHEMA_FILE = "strands-workflow.schema.json"
CLI_SOURCE = "command line"

# Names each pattern puts in its template contexts (strands-cli's executors, plus the
# aliases its schema descriptions promise). Generous on purpose: a name allowed here
# that a context lacks fails at render time; a name missing here rejects a valid spec.
_COMMON_NAMES = frozenset({"last_response", "hitl_response"})
PATTERN_NAMES: dict[str, frozenset[str]] = {
    name: _COMMON_NAMES | frozenset(names.split())
    for name, names in {
        "chain": "steps",
        "workflow": "tasks",
        "routing": "router steps router_response chosen_route router_agent",
        "parallel": "branches steps",
        "evaluator_optimizer": "draft evaluation iteration iterations iteration_index"
        " current_draft current_evaluation producer_response",
        "orchestrator_workers": "workers num_workers worker_count round_count tasks subtasks"
        " task_count orchestrator_response reduce_response writeup_response",
        "graph": "nodes terminal_node total_steps iteration_counts iteration"
        " execution_path current_node",
    }.items()
}
# Artifacts (`outputs.artifacts[].path/from`) also see these: strands-cli's artifact
# writer adds TRACE; the executors' final execution_context adds the rest (from
# "history" on: evaluator_optimizer's and routing's).
ARTIFACT_NAMES: frozenset[str] = frozenset(
    [
        "TRACE",
        "name",
        "timestamp",
        "execution_time",
        "duration_s",
        "cumulative_tokens",
        "session_id",
        "spec_name",
        "pattern_type",
        "history",
        "final_score",
        "current_score",
        "termination_reason",
        "last_evaluation",
        "min_score",
        "max_iters",
        "early_termination",
        "status",
    ]
)

_CONFIG_DEFS = {
    "chain": "chainConfig",
    "workflow": "workflowConfig",
    "routing": "routingConfig",
    "parallel": "parallelConfig",
    "evaluator_optimizer": "evaluatorOptimizerConfig",
    "orchestrator_workers": "orchestratorWorkersConfig",
    "graph": "graphConfig",
}
# Preferred discriminating keys when rewriting a two-branch oneOf (hitl steps, $ref agents).
_DISCRIMINATOR_KEYS = ("type", "$ref")
_TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})
_INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its original text, where it came from and its inputs."""

    spec: Spec
    text: str
    source: str
    spec_hash: str
    variables: dict[str, Any]


# --- public API --------------------------------------------------------------


def load_spec_file(
    path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    provider: str | None = None,
    script: ScriptConfig | None = None,
    limits: Limits | None = None,
) -> LoadedSpec:
    """Load the spec at `path` (YAML or JSON); see load_spec_text."""
    source = str(path)
    text = _read_text(Path(path), source, limits or current_limits())
    return load_spec_text(text, source, overrides, provider=provider, script=script,
                          limits=limits)


def load_spec_text(
    text: str,
    source: str = "<spec>",
    overrides: Mapping[str, Any] | None = None,
    *,
    provider: str | None = None,
    script: ScriptConfig | None = None,
    limits: Limits | None = None,
) -> LoadedSpec:
    """Load a spec from its text. `overrides` are `--var` values (they beat
    `inputs.values` and input defaults); `provider` replaces the runtime's and every
    agent's provider; `script` replaces `runtime.script`. The hash is of `text`."""
    limits = limits or current_limits()
    check_spec_size(len(_utf8(text, source, "")), source, limits)
    data = _parse_yaml(text, source, limits)
    return _load(data, text, source, overrides, provider, script, limits)


def load_spec_data(
    data: Mapping[str, Any],
    source: str = "<data>",
    overrides: Mapping[str, Any] | None = None,
    *,
    provider: str | None = None,
    script: ScriptConfig | None = None,
    limits: Limits | None = None,
) -> LoadedSpec:
    """Load an already parsed spec; its text and hash are of its canonical JSON."""
    limits = limits or current_limits()
    check_data_shape(data, source, "", limits)
    try:
        text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise SpecError(source, "", f"spec is not JSON-serialisable: {error}") from error
    check_spec_size(len(text.encode("utf-8")), source, limits)
    return _load(data, text, source, overrides, provider, script, limits)


def parse_var_args(items: Sequence[str], flag: str = "--var") -> dict[str, str]:
    """Parse `--var KEY=VALUE` arguments (split at the first '='; later ones win)."""
    variables: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SpecError(CLI_SOURCE, f"{flag} {item}", "expected KEY=VALUE")
        if not key.strip():
            raise SpecError(CLI_SOURCE, f"{flag} {item}", "empty name before '='")
        variables[key.strip()] = value.strip()
    return variables


def load_script_file(path: str | Path) -> ScriptConfig:
    """Load `scripted` provider rules: YAML with `delay_s` and `rules`."""
    source = str(path)
    limits = current_limits()
    data = _parse_yaml(_read_text(Path(path), source, limits), source, limits)
    if not isinstance(data, dict):
        raise SpecError(
            source,
            "",
            f"a script file must be a mapping with 'delay_s' and 'rules', got {_json_type(data)}",
        )
    return _script_config(data, source, "")


# --- reading and parsing -----------------------------------------------------


def _utf8(text: str, source: str, where: str) -> bytes:
    """`text` as UTF-8; a lone surrogate (JSON can carry one as \\ud800) is refused."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise SpecError(source, where, f"not valid Unicode text: {error.reason} at "
                        f"character {error.start}") from None


def check_spec_size(size: int, source: str, limits: Limits) -> None:
    if size > limits.max_spec_bytes:
        raise SpecError(source, "", f"the spec is {size:,} bytes; the limit is "
                        f"{limits.max_spec_bytes:,} (DURABLE_MAX_SPEC_BYTES)")


def check_data_shape(data: Any, source: str, path: str, limits: Limits) -> None:
    """Nesting depth, node count and characters of parsed data (a spec, variables),
    walked without recursion so any depth gets an answer, not a RecursionError."""
    nodes = chars = 0
    stack: list[tuple[Any, int, str]] = [(data, 0, path)]
    while stack:
        value, depth, where = stack.pop()
        nodes += 1
        if isinstance(value, str):
            chars += len(value)
            if not value.isascii():
                _utf8(value, source, where)
        elif isinstance(value, Mapping | list | tuple):
            if depth >= limits.max_spec_depth:
                raise SpecError(source, where, f"nested deeper than {limits.max_spec_depth} "
                                "levels (DURABLE_MAX_SPEC_DEPTH)")
            items = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, item in items:
                if isinstance(key, str):
                    chars += len(key)
                    if not key.isascii():
                        _utf8(key, source, where)
                part = f"[{key}]" if isinstance(key, int) else str(key)
                stack.append((item, depth + 1, _join_path(where, part)))
        if nodes > limits.max_spec_nodes:
            raise SpecError(source, path, f"more than {limits.max_spec_nodes:,} values "
                            "(DURABLE_MAX_SPEC_NODES)")
        if chars > limits.max_spec_expanded_bytes:
            raise SpecError(source, path, f"more than {limits.max_spec_expanded_bytes:,} "
                            "characters of text (DURABLE_MAX_SPEC_EXPANDED_BYTES)")


def _read_text(path: Path, source: str, limits: Limits) -> str:
    try:
        size = path.stat().st_size
    except OSError as error:
        raise SpecError(source, "", f"cannot read file: {error.strerror or error}") from error
    if path.is_file():  # a pipe or a device has no size to check before reading
        check_spec_size(size, source, limits)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(source, "", f"not UTF-8 text: {error}") from error
    except OSError as error:
        raise SpecError(source, "", f"cannot read file: {error.strerror or error}") from error


class _TooLarge(yaml.MarkedYAMLError):
    """The document is over one of the spec limits (reported without 'invalid YAML')."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys (PyYAML silently keeps the last one) and
    bounds the document while composing it: nesting depth, and nodes and characters
    counted with every alias expanded (an alias bomb is a few hundred bytes that
    expand to billions of nodes), and no alias inside the node it names."""

    def __init__(self, stream: str, limits: Limits) -> None:
        super().__init__(stream)
        self.limits = limits
        self._depth = 0
        self._nodes = 0
        self._chars = 0
        self._sizes: dict[int, tuple[int, int]] = {}  # id(node) -> expanded size

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()
        mark: Any = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                size = self._sizes.get(id(node))
                if size is None:
                    raise _TooLarge(None, None, f"alias *{event.anchor} is inside the node "
                                    "it refers to (a recursive alias)", mark)
                self._count(*size, mark)
            return super().compose_node(parent, index)
        nested = isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent)
        if nested:
            self._depth += 1
            if self._depth > self.limits.max_spec_depth:
                raise _TooLarge(None, None, f"nested deeper than {self.limits.max_spec_depth}"
                                " levels (DURABLE_MAX_SPEC_DEPTH)", event.start_mark)
        nodes, chars = self._nodes, self._chars
        text = event.value if isinstance(event, yaml.ScalarEvent) else ""
        self._count(1, len(text), event.start_mark)
        node = super().compose_node(parent, index)
        self._sizes[id(node)] = (self._nodes - nodes, self._chars - chars)
        if nested:
            self._depth -= 1
        return node

    def _count(self, nodes: int, chars: int, mark: Any) -> None:
        self._nodes += nodes
        self._chars += chars
        if self._nodes > self.limits.max_spec_nodes:
            raise _TooLarge(None, None, f"more than {self.limits.max_spec_nodes:,} values "
                            "with aliases expanded (DURABLE_MAX_SPEC_NODES)", mark)
        if self._chars > self.limits.max_spec_expanded_bytes:
            raise _TooLarge(None, None, f"more than {self.limits.max_spec_expanded_bytes:,} "
                            "characters of text with aliases expanded "
                            "(DURABLE_MAX_SPEC_EXPANDED_BYTES)", mark)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str | int | float | bool):
            continue  # complex keys: leave them to the schema
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _parse_yaml(text: str, source: str, limits: Limits) -> Any:
    """YAML (JSON text is parsed as JSON: YAML rejects the tabs JSON may indent with)."""
    if text.lstrip().startswith("{"):
        data = _parse_json(text, source, limits)
        check_data_shape(data, source, "", limits)
        return data
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text, limits)  # its reader checks the characters already
        data = loader.get_single_data()
    except _TooLarge as error:
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError(source, where, str(error.problem)) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f" ({error.context})" if error.context else ""
        raise SpecError(source, where, f"invalid YAML: {error.problem}{context}") from error
    except yaml.YAMLError as error:
        raise SpecError(source, "", f"invalid YAML: {error}") from error
    finally:
        if loader is not None:
            loader.dispose()
    # Composing bounded the expanded size; this also refuses text that is not valid
    # Unicode (a "\\ud800" escape decodes to a lone surrogate).
    check_data_shape(data, source, "", limits)
    return data


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _json_depth_problem(text: str, limits: Limits) -> tuple[int, int] | None:
    """(line, column) where JSON text nests deeper than the limit, else None (checked
    before parsing: the JSON parser recurses, and 5,000 levels overflow it)."""
    # Strings blanked to same-length filler keep every offset where it was.
    bare = _JSON_STRING.sub(lambda m: "_" * len(m.group()), text)
    depth = 0
    for match in _JSON_BRACKET.finditer(bare):
        depth += 1 if match.group() in "[{" else -1
        if depth > limits.max_spec_depth:
            at = match.start()
            line = text.count("\n", 0, at) + 1
            return line, at - (text.rfind("\n", 0, at) + 1) + 1
    return None


def _parse_json(text: str, source: str, limits: Limits) -> Any:
    deep = _json_depth_problem(text, limits)
    if deep is not None:
        raise SpecError(source, f"line {deep[0]}, column {deep[1]}",
                        f"nested deeper than {limits.max_spec_depth} levels "
                        "(DURABLE_MAX_SPEC_DEPTH)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno}, column {error.colno}"
        raise SpecError(source, where, f"invalid JSON: {error.msg}") from error


# --- the pipeline ------------------------------------------------------------


def _load(
    raw: Any,
    text: str,
    source: str,
    overrides: Mapping[str, Any] | None,
    provider: str | None,
    script: ScriptConfig | None,
    limits: Limits,
) -> LoadedSpec:
    if not isinstance(raw, Mapping):
        raise SpecError(
            source, "", f"a spec must be a mapping at the top level, got {_json_type(raw)}"
        )
    data: dict[str, Any] = copy.deepcopy(dict(raw))
    _apply_provider(data, provider)
    # runtime.script is our extension: the schema's runtime forbids unknown keys.
    spec_script = _take_script(data, source)
    _reject_agent_refs(data, source)
    _check_agent_ids(data, source)
    _validate_schema(data, source)
    _check_providers(data, source)
    if script is not None or spec_script is not None:
        data["runtime"]["script"] = script or spec_script
    spec = _to_model(data, source)
    _check_references(spec, source)
    variables = _resolve_variables(spec, overrides or {}, source)
    check_data_shape(variables, source, "variables", limits)
    _check_templates(spec, variables, source)
    spec_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return LoadedSpec(spec=spec, text=text, source=source, spec_hash=spec_hash, variables=variables)


def _apply_provider(data: dict[str, Any], provider: str | None) -> None:
    """`--provider` wins everywhere: an offline run must not reach a per-agent provider."""
    if provider is None:
        return
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        runtime["provider"] = provider
    agents = data.get("agents")
    if isinstance(agents, dict):
        for agent in agents.values():
            if isinstance(agent, dict) and "provider" in agent:
                agent["provider"] = provider


def _take_script(data: dict[str, Any], source: str) -> ScriptConfig | None:
    runtime = data.get("runtime")
    if not isinstance(runtime, dict) or "script" not in runtime:
        return None
    raw = runtime.pop("script")
    if not isinstance(raw, dict):
        raise SpecError(source, "runtime.script", f"expected object, got {_json_type(raw)}")
    return _script_config(raw, source, "runtime.script")


def _script_config(data: Mapping[str, Any], source: str, prefix: str) -> ScriptConfig:
    try:
        return ScriptConfig.model_validate(data)
    except ValidationError as error:
        raise _pydantic_error(error, source, prefix) from error


def _pydantic_error(error: ValidationError, source: str, prefix: str) -> SpecError:
    first = error.errors()[0]
    path = _join_path(prefix, _format_path(first["loc"]))
    problems = {"extra_forbidden": "unknown field", "missing": "missing required field"}
    problem = problems.get(first["type"], first["msg"])
    return SpecError(source, path, problem)


def _reject_agent_refs(data: dict[str, Any], source: str) -> None:
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return
    for agent_id, agent in agents.items():
        if isinstance(agent, dict) and "$ref" in agent:
            raise SpecError(
                source,
                f"agents.{agent_id}",
                "agent references ($ref) are not supported; define the agent inline "
                "with its 'prompt'",
            )


def _check_agent_ids(data: dict[str, Any], source: str) -> None:
    """An agent's id names its conversation's Redis key: bounded, no control characters."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return
    for agent_id in agents:
        try:
            check_name("agent id", str(agent_id))
        except InvalidId as exc:
            raise SpecError(source, "agents", str(exc)) from None


def _check_providers(data: dict[str, Any], source: str) -> None:
    _check_provider(data["runtime"]["provider"], "runtime.provider", source)
    for agent_id, agent in data["agents"].items():
        if "provider" in agent:
            _check_provider(agent["provider"], f"agents.{agent_id}.provider", source)


def _check_provider(provider: str, path: str, source: str) -> None:
    if provider not in PROVIDERS:
        raise SpecError(
            source,
            path,
            f"unsupported provider {provider!r}; supported: {', '.join(PROVIDERS)}",
        )


def _to_model(data: dict[str, Any], source: str) -> Spec:
    try:
        return Spec.model_validate(data)
    except ValidationError as error:  # the schema passed, so this is a typing gap
        raise _pydantic_error(error, source, "") from error


# --- JSON schema -------------------------------------------------------------


@lru_cache(maxsize=1)
def _shipped_schema() -> dict[str, Any]:
    schema_dir = resources.files("strands_durable.scheduler.spec").joinpath("schema")
    text = schema_dir.joinpath(SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@lru_cache(maxsize=1)
def _readable_schema() -> dict[str, Any]:
    """The shipped schema with oneOfs made decidable, and pattern.config left open."""
    schema: dict[str, Any] = _rewrite_one_of(copy.deepcopy(_shipped_schema()))
    schema["$defs"]["pattern"]["properties"]["config"] = {"type": "object"}
    return schema


def _validator_class(schema: Mapping[str, Any]) -> type[Validator]:
    cls: type[Validator] = validators.validator_for(schema, default=Draft202012Validator)
    return cls


@lru_cache(maxsize=1)
def _root_validator() -> Validator:
    schema = _readable_schema()
    return _validator_class(schema)(schema)


@lru_cache(maxsize=len(_CONFIG_DEFS))
def _config_validator(pattern_type: str) -> Validator:
    root = _readable_schema()
    schema = {
        "$schema": root.get("$schema"),
        "$defs": root["$defs"],
        "$ref": f"#/$defs/{_CONFIG_DEFS[pattern_type]}",
    }
    return _validator_class(root)(schema)


def _rewrite_one_of(node: Any) -> Any:
    """Replace each two-branch oneOf by if/then/else on what tells the branches apart.

    A oneOf failure reports every branch's errors at once; picking the branch first
    leaves one precise error. A oneOf of bare `required` lists (graph edges: `to` or
    `choose`) is dropped and checked in code with a clear message.
    """
    if isinstance(node, list):
        return [_rewrite_one_of(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _rewrite_one_of(value) for key, value in node.items()}
    branches = out.pop("oneOf", None)
    if branches is None:
        return out
    if all(set(branch) <= {"required"} for branch in branches):
        return out
    decided = _if_then_else(branches)
    if decided is None:
        out["oneOf"] = branches
        return out
    return {**out, **decided}


def _if_then_else(branches: list[dict[str, Any]]) -> dict[str, Any] | None:
    if len(branches) != 2:
        return None
    first, second = branches
    kind0, kind1 = first.get("type"), second.get("type")
    if isinstance(kind0, str) and isinstance(kind1, str) and kind0 != kind1:
        return {"if": {"type": kind0}, "then": first, "else": second}
    req0, req1 = set(first.get("required", [])), set(second.get("required", []))
    for key in (*_DISCRIMINATOR_KEYS, *sorted(req0 ^ req1)):
        if key in req0 - req1:
            return {"if": {"required": [key]}, "then": first, "else": second}
        if key in req1 - req0:
            return {"if": {"required": [key]}, "then": second, "else": first}
    return None


def _validate_schema(data: dict[str, Any], source: str) -> None:
    _raise_first(_root_validator(), data, source, "")
    pattern = data["pattern"]
    validator = _config_validator(pattern["type"])
    note = f" (pattern type {pattern['type']!r})"
    _raise_first(validator, pattern["config"], source, "pattern.config", note)


def _raise_first(
    validator: Validator, instance: Any, source: str, prefix: str, note: str = ""
) -> None:
    errors = list(validator.iter_errors(instance))
    if not errors:
        return
    error = _pick(errors)
    parts, problem = _describe(error)
    raise SpecError(source, _join_path(prefix, _format_path(parts)), problem + note)


def _pick(errors: list[SchemaError]) -> SchemaError:
    """One error: jsonschema's best match, but an unknown field beats a missing one at
    the same place (a typo `agnet:` causes both; the unknown field explains it)."""
    best = best_match(errors)
    if best is not None and best.validator == "required":
        for error in errors:
            if error.validator == "additionalProperties" and error.path == best.path:
                return error
    return best if best is not None else errors[0]


def _describe(error: SchemaError) -> tuple[list[str | int], str]:
    """The instance path of an error and a sentence for people."""
    parts: list[str | int] = list(error.absolute_path)
    kind, value, instance = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = [key for key in value if key not in instance]
        return parts, f"missing required field {missing[0]!r}"
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = sorted(key for key in instance if key not in allowed)[0]
        return [*parts, extra], f"unknown field{_hint(extra, allowed, list_all=True)}"
    return parts, _problem(str(kind), value, instance, error.message)


def _problem(kind: str, value: Any, instance: Any, message: str) -> str:
    if kind == "type":
        expected = " or ".join(value) if isinstance(value, list) else str(value)
        return f"expected {expected}, got {_json_type(instance)} {_short(instance)}"
    if kind == "enum":
        return f"must be one of: {', '.join(map(str, value))} (got {_short(instance)})"
    if kind == "const":
        return f"must be {value!r} (got {_short(instance)})"
    if kind in ("minItems", "minProperties"):
        noun = "item" if kind == "minItems" else "entry"
        return f"needs at least {value} {noun}{'' if value == 1 else 's'}"
    if kind == "minLength":
        return "must not be empty" if value == 1 else f"must be at least {value} characters"
    if kind == "pattern":
        return f"{_short(instance)} does not match the pattern {value}"
    if kind == "uniqueItems":
        return "contains duplicate items"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"must be {op[kind]} {value} (got {_short(instance)})"
    return message


# --- references between fields -----------------------------------------------


StepLike = AgentStep | HitlStep | WorkflowTask | AgentNode


def _step_sites(pattern: Pattern) -> Iterator[tuple[str, StepLike]]:
    """Every step-like item of the pattern (agent or HITL) with its field path."""
    base = "pattern.config"
    config = pattern.config
    if isinstance(config, ChainConfig):
        yield from _indexed(f"{base}.steps", config.steps)
    elif isinstance(config, WorkflowConfig):
        yield from _indexed(f"{base}.tasks", config.tasks)
    elif isinstance(config, RoutingConfig):
        yield from _optional(f"{base}.router.review_router", config.router.review_router)
        for name, route in config.routes.items():
            yield from _indexed(f"{base}.routes.{name}.then", route.then)
    elif isinstance(config, ParallelConfig):
        for i, branch in enumerate(config.branches):
            yield from _indexed(f"{base}.branches[{i}].steps", branch.steps)
        yield from _optional(f"{base}.reduce", config.reduce)
    elif isinstance(config, EvaluatorOptimizerConfig):
        yield from _optional(f"{base}.review_gate", config.review_gate)
    elif isinstance(config, OrchestratorWorkersConfig):
        yield from _optional(f"{base}.decomposition_review", config.decomposition_review)
        yield from _optional(f"{base}.reduce_review", config.reduce_review)
        yield from _optional(f"{base}.reduce", config.reduce)
        yield from _optional(f"{base}.writeup", config.writeup)
    elif isinstance(config, GraphConfig):
        for node_id, node in config.nodes.items():
            yield f"{base}.nodes.{node_id}", node


def _indexed(path: str, items: Iterable[StepLike]) -> Iterator[tuple[str, StepLike]]:
    for i, item in enumerate(items):
        yield f"{path}[{i}]", item


def _optional(path: str, item: StepLike | None) -> Iterator[tuple[str, StepLike]]:
    if item is not None:
        yield path, item


def _agent_refs(pattern: Pattern) -> Iterator[tuple[str, str]]:
    """(field path, agent id) for every place the pattern names an agent."""
    base = "pattern.config"
    config = pattern.config
    if isinstance(config, RoutingConfig):
        yield f"{base}.router.agent", config.router.agent
    elif isinstance(config, EvaluatorOptimizerConfig):
        yield f"{base}.producer", config.producer
        yield f"{base}.evaluator.agent", config.evaluator.agent
    elif isinstance(config, OrchestratorWorkersConfig):
        yield f"{base}.orchestrator.agent", config.orchestrator.agent
        yield f"{base}.worker_template.agent", config.worker_template.agent
    for path, step in _step_sites(pattern):
        if not isinstance(step, HitlStep):
            yield f"{path}.agent", step.agent


def _check_references(spec: Spec, source: str) -> None:
    for path, agent_id in _agent_refs(spec.pattern):
        if agent_id not in spec.agents:
            hint = _hint(agent_id, spec.agents)
            defined = ", ".join(spec.agents)
            raise SpecError(
                source, path, f"unknown agent {agent_id!r}{hint}; defined agents: {defined}"
            )
    config = spec.pattern.config
    if isinstance(config, WorkflowConfig):
        _check_workflow(config, source)
    elif isinstance(config, GraphConfig):
        _check_graph(config, source)
    elif isinstance(config, RoutingConfig) and not config.routes:
        raise SpecError(source, "pattern.config.routes", "needs at least one route")
    elif isinstance(config, ParallelConfig):
        _check_unique([b.id for b in config.branches], "pattern.config.branches", "branch", source)


def _check_unique(ids: list[str], path: str, noun: str, source: str) -> None:
    seen: set[str] = set()
    for i, item_id in enumerate(ids):
        if item_id in seen:
            raise SpecError(source, f"{path}[{i}].id", f"duplicate {noun} id {item_id!r}")
        seen.add(item_id)


def _check_workflow(config: WorkflowConfig, source: str) -> None:
    path = "pattern.config.tasks"
    ids = [task.id for task in config.tasks]
    _check_unique(ids, path, "task", source)
    for i, task in enumerate(config.tasks):
        for j, dep in enumerate(task.deps):
            if dep not in ids:
                hint = _hint(dep, ids)
                raise SpecError(source, f"{path}[{i}].deps[{j}]", f"unknown task {dep!r}{hint}")
    cycle = _find_cycle({task.id: task.deps for task in config.tasks})
    if cycle:
        raise SpecError(source, path, f"dependency cycle: {' -> '.join(cycle)}")


def _find_cycle(deps: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle in the dependency graph as [a, b, ..., a], or None (depth-first search)."""
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str] | None:
        if node in trail:
            return [*trail[trail.index(node) :], node]
        if node in done:
            return None
        for dep in deps.get(node, ()):
            found = visit(dep, [*trail, node])
            if found:
                return found
        done.add(node)
        return None

    for task_id in deps:
        found = visit(task_id, [])
        if found:
            return found
    return None


def _check_graph(config: GraphConfig, source: str) -> None:
    nodes = list(config.nodes)
    for i, edge in enumerate(config.edges):
        path = f"pattern.config.edges[{i}]"
        if (edge.to is None) == (edge.choose is None):
            raise SpecError(source, path, "an edge needs exactly one of 'to' or 'choose'")
        targets = [(f"{path}.from", edge.from_)]
        targets += [(f"{path}.to[{j}]", to) for j, to in enumerate(edge.to or [])]
        targets += [(f"{path}.choose[{k}].to", c.to) for k, c in enumerate(edge.choose or [])]
        for field, node_id in targets:
            if node_id not in config.nodes:
                hint = _hint(node_id, nodes)
                raise SpecError(
                    source, field, f"unknown node {node_id!r}{hint}; nodes: {', '.join(nodes)}"
                )


# --- variables -----------------------------------------------------------------


def _resolve_variables(spec: Spec, overrides: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Input defaults, then `inputs.values`, then overrides (typed where declared)."""
    inputs = spec.inputs or Inputs()
    variables: dict[str, Any] = {}
    for section in (inputs.required, inputs.optional):
        for name, declared in section.items():
            if declared.has_default:
                variables[name] = declared.default
    variables.update(inputs.values)
    for name, raw in overrides.items():
        variables[name] = _coerce(name, raw, inputs.declared(name), source)
    for name in inputs.required:
        if variables.get(name) is None:
            raise SpecError(
                source,
                f"inputs.required.{name}",
                f"required input {name!r} has no value; set it with --var {name}=VALUE",
            )
    return variables


def _coerce(name: str, raw: Any, declared: InputVarSpec | None, source: str) -> Any:
    if declared is None:
        return raw
    value = _typed(raw, declared.type)
    path = f"variables.{name}"
    if value is _INVALID:
        raise SpecError(source, path, f"{_short(raw)} is not a valid {declared.type}")
    if declared.enum is not None and value not in declared.enum:
        allowed = ", ".join(map(str, declared.enum))
        raise SpecError(source, path, f"must be one of: {allowed} (got {_short(raw)})")
    return value


_INVALID = object()


def _typed(raw: Any, kind: str) -> Any:
    """`raw` as the declared input type (strings from --var are parsed), or _INVALID."""
    if isinstance(raw, str) and kind != "string":
        return _parse_typed(raw.strip(), kind)
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    return raw if checks[kind](raw) else _INVALID


def _parse_typed(text: str, kind: str) -> Any:
    if kind in ("integer", "number") and _INTEGER.fullmatch(text):
        return int(text)
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            return _INVALID
        return number if math.isfinite(number) else _INVALID
    if kind == "boolean" and text.lower() in _TRUE_WORDS | _FALSE_WORDS:
        return text.lower() in _TRUE_WORDS
    if kind in ("array", "object"):
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return _INVALID
        return value if isinstance(value, list if kind == "array" else dict) else _INVALID
    return _INVALID


# --- templates -----------------------------------------------------------------


def _template_fields(pattern: Pattern) -> Iterator[tuple[str, str, frozenset[str], bool]]:
    """(path, template, the step's own vars, is a graph condition) for the pattern."""
    base = "pattern.config"
    config = pattern.config
    no_vars: frozenset[str] = frozenset()
    if isinstance(config, RoutingConfig) and config.router.input is not None:
        yield f"{base}.router.input", config.router.input, no_vars, False
    if isinstance(config, EvaluatorOptimizerConfig):
        if config.evaluator.input is not None:
            yield f"{base}.evaluator.input", config.evaluator.input, no_vars, False
        if config.revise_prompt is not None:
            yield f"{base}.revise_prompt", config.revise_prompt, no_vars, False
    for path, step in _step_sites(pattern):
        yield from _step_templates(path, step)
    if isinstance(config, GraphConfig):
        for i, edge in enumerate(config.edges):
            for k, choice in enumerate(edge.choose or []):
                yield f"{base}.edges[{i}].choose[{k}].when", choice.when, no_vars, True


def _step_templates(path: str, step: StepLike) -> Iterator[tuple[str, str, frozenset[str], bool]]:
    if isinstance(step, HitlStep):  # HitlTask and HitlGate too
        yield f"{path}.prompt", step.prompt, frozenset(), False
        if step.context_display is not None:
            yield f"{path}.context_display", step.context_display, frozenset(), False
        return
    step_vars = frozenset(step.vars) if isinstance(step, AgentStep) else frozenset()
    if step.input is not None:
        yield f"{path}.input", step.input, step_vars, False


def _check_templates(spec: Spec, variables: Mapping[str, Any], source: str) -> None:
    inputs = spec.inputs or Inputs()
    known = (
        set(variables)
        | set(inputs.required)
        | set(inputs.optional)
        | PATTERN_NAMES[spec.pattern.type]
    )
    fields = list(_template_fields(spec.pattern))
    # The context an agent's prompt renders in is the step's, whichever step that is.
    any_step_vars = set().union(*(step_vars for _, _, step_vars, _ in fields))
    for agent_id, agent in spec.agents.items():
        path = f"agents.{agent_id}.prompt"
        _check_template(agent.prompt, path, known | any_step_vars, False, source)
    for path, text, step_vars, condition in fields:
        _check_template(text, path, known | step_vars, condition, source)
    artifacts = spec.outputs.artifacts if spec.outputs else []
    for i, artifact in enumerate(artifacts):
        for field, text in (("path", artifact.path), ("from", artifact.from_)):
            path = f"outputs.artifacts[{i}].{field}"
            _check_template(text, path, known | ARTIFACT_NAMES, False, source)


def _check_template(text: str, path: str, known: set[str], condition: bool, source: str) -> None:
    try:
        names = (
            undeclared_condition_names(text, path) if condition else undeclared_names(text, path)
        )
    except TemplateError as error:
        raise SpecError(source, path, error.problem) from error
    unknown = sorted(names - known - KNOWN_GLOBALS)
    if unknown:
        name = unknown[0]
        raise SpecError(source, path, f"undefined template variable {name!r}{_hint(name, known)}")


# --- small helpers -------------------------------------------------------------


def _hint(name: str, candidates: Iterable[str], *, list_all: bool = False) -> str:
    """' (did you mean 'x'?)' for a near miss, or the allowed names when asked."""
    options = sorted(candidates)
    close = difflib.get_close_matches(name, options, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if list_all and options:
        return f" (allowed: {', '.join(options)})"
    return ""


def _format_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _join_path(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
