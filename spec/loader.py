"""Load a strands-cli workflow spec: parse, validate, cross-check, resolve variables.

Every failure is a SpecError naming the source, the field path and the problem, in
this order: the spec limits and YAML syntax (reading.py), top-level shape, agent ids
and `$ref` agents (agents.py), the shipped JSON schema (schema_check.py), supported
providers, references between fields (cross_checks.py, asking the pattern), input
variables (variables.py), then a static check of every template against the names
available where it renders.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from strands_durable.errors import SpecError
from strands_durable.settings import Limits, current_limits
from strands_durable.spec.agent_refs import reject_agent_refs, resolve_agent_refs
from strands_durable.spec.agents import (
    apply_provider,
    check_agent_ids,
    check_providers,
)
from strands_durable.spec.cross_checks import check_references, check_templates
from strands_durable.spec.env_secrets import apply_env_secrets
from strands_durable.spec.model import Spec, SpecCapacity
from strands_durable.spec.problems import format_path, join_path, json_type
from strands_durable.spec.provider_hosts import check_provider_hosts
from strands_durable.spec.reading import (
    check_data_shape,
    check_spec_size,
    parse_yaml,
    read_text,
    utf8,
)
from strands_durable.spec.schema_check import validate_schema
from strands_durable.spec.script import ScriptConfig
from strands_durable.spec.security import check_security
from strands_durable.spec.skills import attach_skills
from strands_durable.spec.telemetry import check_telemetry
from strands_durable.spec.tool_checks import check_tools
from strands_durable.spec.variables import resolve_variables

__all__ = [
    "LoadedSpec",
    "check_data_shape",
    "check_spec_size",
    "load_script_file",
    "load_spec_data",
    "load_spec_file",
    "load_spec_text",
    "parse_var_args",
]

CLI_SOURCE = "command line"


@dataclass(frozen=True)
class LoadedSpec:
    """A validated spec with its original text, where it came from and its inputs."""

    spec: Spec
    text: str
    source: str
    spec_hash: str
    variables: dict[str, Any]


# --- public API --------------------------------------------------------------


def shown_path(path: str | Path) -> str:
    """A path as text a session can store and print: a byte of the name that is not UTF-8
    (the OS hands it over as a lone surrogate) written as its escape, `\\xff`."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def load_spec_file(
    path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    provider: str | None = None,
    script: ScriptConfig | None = None,
    limits: Limits | None = None,
) -> LoadedSpec:
    """Load the spec at `path` (YAML or JSON); see load_spec_text. Agent references
    (`$ref`) are resolved relative to it."""
    source = shown_path(path)
    limits = limits or current_limits()
    text = read_text(Path(path), source, limits)
    check_spec_size(len(utf8(text, source, "")), source, limits)
    data = parse_yaml(text, source, limits)
    return _load(data, text, source, overrides, provider, script, limits,
                 spec_path=Path(path))


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
    check_spec_size(len(utf8(text, source, "")), source, limits)
    data = parse_yaml(text, source, limits)
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
    source = shown_path(path)
    limits = current_limits()
    data = parse_yaml(read_text(Path(path), source, limits), source, limits)
    if not isinstance(data, dict):
        raise SpecError(
            source,
            "",
            f"a script file must be a mapping with 'delay_s' and 'rules', got {json_type(data)}",
        )
    return _script_config(data, source, "")


# --- the pipeline ------------------------------------------------------------


def _load(
    raw: Any,
    text: str,
    source: str,
    overrides: Mapping[str, Any] | None,
    provider: str | None,
    script: ScriptConfig | None,
    limits: Limits,
    spec_path: Path | None = None,
) -> LoadedSpec:
    if not isinstance(raw, Mapping):
        raise SpecError(
            source, "", f"a spec must be a mapping at the top level, got {json_type(raw)}"
        )
    data: dict[str, Any] = copy.deepcopy(dict(raw))
    refs_digest = ""
    if spec_path is None:
        reject_agent_refs(data, source)
    else:
        refs_digest = resolve_agent_refs(data, spec_path, source, limits)
        if refs_digest:
            check_data_shape(data, source, "", limits)
    apply_provider(data, provider)
    # runtime.script is our extension: the schema's runtime forbids unknown keys.
    spec_script = _take_script(data, source)
    capacity = _take_capacity(data, source)  # runtime.capacity too
    check_agent_ids(data, source)
    validate_schema(data, source)
    apply_env_secrets(data, source)
    check_providers(data, source)
    if script is not None or spec_script is not None:
        data["runtime"]["script"] = script or spec_script
    if capacity is not None:
        data["runtime"]["capacity"] = capacity
    spec, refs_digest = attach_skills(_to_model(data, source), spec_path, source, limits,
                                      refs_digest)
    check_references(spec, source)
    check_tools(spec, source)
    check_telemetry(spec, source)
    check_provider_hosts(spec, source)
    check_security(spec, source)
    variables = resolve_variables(spec, overrides or {}, source)
    check_data_shape(variables, source, "variables", limits)
    check_templates(spec, variables, source)
    # A referenced agent is part of the spec: a change to it changes the hash.
    hashed = text + (f"\0{refs_digest}" if refs_digest else "")
    spec_hash = hashlib.sha256(hashed.encode("utf-8")).hexdigest()
    return LoadedSpec(spec=spec, text=text, source=source, spec_hash=spec_hash, variables=variables)


def _take_script(data: dict[str, Any], source: str) -> ScriptConfig | None:
    runtime = data.get("runtime")
    if not isinstance(runtime, dict) or "script" not in runtime:
        return None
    raw = runtime.pop("script")
    if not isinstance(raw, dict):
        raise SpecError(source, "runtime.script", f"expected object, got {json_type(raw)}")
    return _script_config(raw, source, "runtime.script")


def _take_capacity(data: dict[str, Any], source: str) -> SpecCapacity | None:
    runtime = data.get("runtime")
    if not isinstance(runtime, dict) or "capacity" not in runtime:
        return None
    raw = runtime.pop("capacity")
    if not isinstance(raw, dict):
        raise SpecError(source, "runtime.capacity", f"expected object, got {json_type(raw)}")
    for name in raw:
        if name not in SpecCapacity.model_fields:
            shown = repr(str(name)[:64]) + ("..." if len(str(name)) > 64 else "")
            raise SpecError(source, "runtime.capacity", f"unknown field {shown}; expected "
                            "rpm, tpm or in_flight (each a positive integer) or "
                            "wait_counts_toward_duration (true or false)")
    try:
        return SpecCapacity.model_validate(raw)
    except ValidationError as error:
        raise _pydantic_error(error, source, "runtime.capacity") from error


def _script_config(data: Mapping[str, Any], source: str, prefix: str) -> ScriptConfig:
    try:
        return ScriptConfig.model_validate(data)
    except ValidationError as error:
        raise _pydantic_error(error, source, prefix) from error


def _pydantic_error(error: ValidationError, source: str, prefix: str) -> SpecError:
    first = error.errors()[0]
    path = join_path(prefix, format_path(first["loc"]))
    problems = {"extra_forbidden": "unknown field", "missing": "missing required field"}
    problem = problems.get(first["type"], first["msg"])
    return SpecError(source, path, problem)


def _to_model(data: dict[str, Any], source: str) -> Spec:
    try:
        return Spec.model_validate(data)
    except ValidationError as error:  # the schema passed, so this is a typing gap
        raise _pydantic_error(error, source, "") from error


