"""Tolerant JSON extraction from an LLM reply (pure; no I/O).

Tried in order, as strands-cli's router/evaluator/orchestrator parsers do (and a
little more forgiving): the whole reply as JSON; the body of each ``` fence
(```json or plain); then every `{` or `[` in the reply, left to right, decoding
the JSON value that starts there (so the first balanced object/array that parses
wins, whatever prose surrounds it). `kind` narrows what counts as a hit (e.g. a
dict for a router reply, so a "[1]" citation in the prose is skipped).
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ["extract_json"]

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\r?\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
# What the bracket-by-bracket search may read in all: this many times the reply, plus a
# little for short replies.
_SCAN_FACTOR = 8
_SCAN_MINIMUM = 65_536


def _fits(value: Any, kind: type | tuple[type, ...] | None) -> bool:
    return kind is None or isinstance(value, kind)


def _loads(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return False, None


def extract_json(text: str, *, kind: type | tuple[type, ...] | None = None) -> Any:
    """The JSON value in `text` (of type `kind`, when given); ValueError if none."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("the reply is empty")
    stripped = text.strip()
    ok, value = _loads(stripped)
    if ok and _fits(value, kind):
        return value
    for match in _FENCE.finditer(text):
        lang = match.group(1).lower()
        if lang and lang not in ("json", "jsonc", "json5"):
            continue
        ok, value = _loads(match.group(2).strip())
        if ok and _fits(value, kind):
            return value
    # Each try reads from its bracket to where the value ends or breaks, so a reply of
    # nothing but brackets ("[[[[...", '{"a":{"a":...') would cost its length squared:
    # minutes of CPU for a megabyte. The tries share a budget of characters read.
    budget = _SCAN_FACTOR * len(text) + _SCAN_MINIMUM
    for match in re.finditer(r"[{\[]", text):
        start = match.start()
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as error:
            budget -= max(error.pos - start, 1)
        except RecursionError:
            budget -= sys.getrecursionlimit()  # about as deep as it read
        else:
            if _fits(value, kind):
                return value
            budget -= end - start
        if budget < 0:
            break
    wanted = "JSON" if kind is None else f"JSON {_kind_name(kind)}"
    raise ValueError(f"no {wanted} found in the reply")


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)
