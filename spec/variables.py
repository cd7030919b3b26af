"""A spec's input variables: defaults, then `inputs.values`, then the caller's values,
each typed as its input declares (text values are parsed: "3" for an integer)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from strands_durable.errors import SpecError
from strands_durable.spec.model import Inputs, InputVarSpec, Spec
from strands_durable.spec.problems import short
from strands_durable.spec.reading import utf8

__all__ = ["MAX_VARIABLES_BYTES", "check_variables_size", "resolve_variables"]

# A session's variables together, as JSON: what a submit's body can carry beside its spec.
# Resume, fork and a schedule's change put new values over the stored ones, so each checks
# the merged whole: merges repeated cannot grow a session or a schedule past it.
MAX_VARIABLES_BYTES = 256 * 1024

_TRUE_WORDS = frozenset({"true", "yes", "on", "1"})
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})
_INTEGER = re.compile(r"[+-]?[0-9]+")


def resolve_variables(spec: Spec, overrides: Mapping[str, Any], source: str) -> dict[str, Any]:
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
                f"required input {name!r} has no value; give it one among the variables",
            )
    check_variables_size(variables, source)
    return variables


def check_variables_size(variables: Mapping[str, Any], source: str) -> None:
    """Past MAX_VARIABLES_BYTES, or text that is not Unicode (a lone surrogate: a byte of
    a command-line argument that was not UTF-8), a SpecError naming the variable."""
    try:
        size = len(json.dumps(variables, default=str, ensure_ascii=False).encode())
    except UnicodeEncodeError:  # which variable: the SpecError names it
        for name, value in variables.items():
            utf8(json.dumps({name: value}, default=str, ensure_ascii=False), source,
                 f"variables.{ascii(name)[1:-1]}")
        raise
    if size > MAX_VARIABLES_BYTES:
        raise SpecError(source, "variables", f"{size:,} bytes as JSON, with the values "
                        f"already stored; the limit is {MAX_VARIABLES_BYTES:,} bytes")


def _coerce(name: str, raw: Any, declared: InputVarSpec | None, source: str) -> Any:
    if declared is None:
        return raw
    value = _typed(raw, declared.type)
    path = f"variables.{name}"
    if value is _INVALID:
        raise SpecError(source, path, f"{short(raw)} is not a valid {declared.type}")
    if declared.enum is not None and value not in declared.enum:
        allowed = ", ".join(map(str, declared.enum))
        raise SpecError(source, path, f"must be one of: {allowed} (got {short(raw)})")
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


