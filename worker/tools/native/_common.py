"""Shared by the native tools: results, the model's arguments, and the one place an
exception becomes an error result (never a traceback)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.worker.tools.net_guard import FetchFailed, ToolRefused
from strands_durable.worker.tools.results import error_result

__all__ = [
    "MAX_OUTPUT_CHARS",
    "ToolArgError",
    "bool_arg",
    "cap_text",
    "error",
    "headers_arg",
    "int_arg",
    "ok",
    "ok_json",
    "run_tool",
    "str_arg",
]

# What one tool result may hand back to the model (characters of text).
MAX_OUTPUT_CHARS = 256 * 1024


class ToolArgError(ValueError):
    """An argument the model got wrong; the message tells it what to change."""


def ok(tool: ToolUse, text: str) -> ToolResult:
    return {"toolUseId": tool.get("toolUseId", ""), "status": "success",
            "content": [{"text": text}]}


def ok_json(tool: ToolUse, payload: Any) -> ToolResult:
    return {"toolUseId": tool.get("toolUseId", ""), "status": "success",
            "content": [{"json": payload}]}


error = error_result  # the native tools' short name for it


def cap_text(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[truncated: the output is longer than {limit} characters]"


def _inputs(tool: ToolUse) -> dict[str, Any]:
    args = tool.get("input") or {}
    if not isinstance(args, dict):
        raise ToolArgError("Error: the tool input must be an object")
    return args


def str_arg(args: dict[str, Any], name: str, default: str | None = None) -> str:
    value = args.get(name, default)
    if value is None:
        raise ToolArgError(f"Error: '{name}' parameter is required")
    if not isinstance(value, str):
        raise ToolArgError(f"Error: '{name}' must be a string")
    return value


def int_arg(args: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer of at least `low`; larger than `high` is lowered to `high` (a bound of
    this worker, not the model's mistake)."""
    value = args.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolArgError(f"Error: '{name}' must be an integer")
    if value < low:
        raise ToolArgError(f"Error: '{name}' must be at least {low}")
    return min(value, high)


def bool_arg(args: dict[str, Any], name: str, default: bool) -> bool:
    value = args.get(name, default)
    if not isinstance(value, bool):
        raise ToolArgError(f"Error: '{name}' must be true or false")
    return value


def headers_arg(args: dict[str, Any], name: str = "headers") -> dict[str, str]:
    value = args.get(name) or {}
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ToolArgError(f"Error: '{name}' must be an object of header names to values")
    return {key: str(item) for key, item in value.items()}


def run_tool(tool: ToolUse, body: Callable[[ToolUse, dict[str, Any]], ToolResult]
             ) -> ToolResult:
    """`body(tool, args)`, its failures as error results the model can read."""
    try:
        return body(tool, _inputs(tool))
    except (ToolArgError, ToolRefused, FetchFailed) as exc:
        return error(tool, str(exc))
    except OSError as exc:
        # strerror only: the full message would show the worker's own paths.
        return error(tool, f"Error: {exc.strerror or type(exc).__name__}")
    except Exception as exc:  # a tool reports, it does not raise into the agent loop
        return error(tool, f"Error: {type(exc).__name__}: {exc}")
