"""A spec against the shipped JSON schema, with readable messages.

Each two-branch `oneOf` is rewritten into an if/then/else on its discriminating key (a
oneOf failure reports every branch's errors at once; picking the branch first leaves
one precise error), and `pattern.config` is validated against the config of the
declared pattern type (the pattern's `schema_def`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError as SchemaError
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator

from strands_durable.errors import SpecError
from strands_durable.patterns import PATTERNS
from strands_durable.spec.problems import format_path, hint, join_path, json_type, short

__all__ = ["SCHEMA_FILE", "validate_schema"]

SCHEMA_FILE = "strands-workflow.schema.json"
# Preferred discriminating keys when rewriting a two-branch oneOf (hitl steps, $ref agents).
_DISCRIMINATOR_KEYS = ("type", "$ref")


@lru_cache(maxsize=1)
def _shipped_schema() -> dict[str, Any]:
    schema_dir = resources.files("strands_durable.spec").joinpath("schema")
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


@lru_cache(maxsize=len(PATTERNS))
def _config_validator(pattern_type: str) -> Validator:
    root = _readable_schema()
    schema = {
        "$schema": root.get("$schema"),
        "$defs": root["$defs"],
        "$ref": f"#/$defs/{PATTERNS[pattern_type].schema_def}",
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


def validate_schema(data: dict[str, Any], source: str) -> None:
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
    raise SpecError(source, join_path(prefix, format_path(parts)), problem + note)


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
        return [*parts, extra], f"unknown field{hint(extra, allowed, list_all=True)}"
    return parts, _problem(str(kind), value, instance, error.message)


def _problem(kind: str, value: Any, instance: Any, message: str) -> str:
    if kind == "type":
        expected = " or ".join(value) if isinstance(value, list) else str(value)
        return f"expected {expected}, got {json_type(instance)} {short(instance)}"
    if kind == "enum":
        return f"must be one of: {', '.join(map(str, value))} (got {short(instance)})"
    if kind == "const":
        return f"must be {value!r} (got {short(instance)})"
    if kind in ("minItems", "minProperties"):
        noun = "item" if kind == "minItems" else "entry"
        return f"needs at least {value} {noun}{'' if value == 1 else 's'}"
    if kind == "minLength":
        return "must not be empty" if value == 1 else f"must be at least {value} characters"
    if kind == "pattern":
        return f"{short(instance)} does not match the pattern {value}"
    if kind == "uniqueItems":
        return "contains duplicate items"
    if kind in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
        return f"must be {op[kind]} {value} (got {short(instance)})"
    return message


