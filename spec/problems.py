"""Small pieces of the loader's error messages: field paths, value descriptions, and
the "did you mean" hint. Shared by the loader and the patterns' own checks."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

__all__ = ["format_path", "hint", "join_path", "json_type", "short"]


def hint(name: str, candidates: Iterable[str], *, list_all: bool = False) -> str:
    """' (did you mean 'x'?)' for a near miss, or the allowed names when asked."""
    options = sorted(candidates)
    close = difflib.get_close_matches(name, options, n=1)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if list_all and options:
        return f" (allowed: {', '.join(options)})"
    return ""


def format_path(parts: Iterable[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{shown_key(part)}" if text else shown_key(part)
    return text


def shown_key(key: Any, limit: int = 60) -> str:
    """A spec's key as a message shows it: escaped when it is not printable (a terminal's
    escape codes), and shortened (a key may be any length)."""
    text = str(key)
    return clipped(text if text.isprintable() else ascii(text)[1:-1], limit)


def join_path(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def json_type(value: Any) -> str:
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


def short(value: Any, limit: int = 60) -> str:
    return clipped(repr(value), limit)


def clipped(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with "..." when longer."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
