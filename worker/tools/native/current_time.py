"""current_time: the date and time now, as strands-cli gives it (iso, unix or human;
utc or the worker's local time)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.worker.tools.native._common import error, ok, run_tool

TOOL_SPEC = {
    "name": "current_time",
    "description": "Get the current date and time in various formats and timezones",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "format": {
                    "type": "string",
                    "enum": ["iso", "unix", "human"],
                    "default": "iso",
                    "description": "Output format: 'iso' (ISO 8601), 'unix' (timestamp), "
                                   "'human' (readable)",
                },
                "timezone": {
                    "type": "string",
                    "enum": ["utc", "local"],
                    "default": "utc",
                    "description": "Timezone: 'utc' or 'local' (default: utc)",
                },
            },
            "required": [],
        }
    },
}


def _now(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    form, zone = args.get("format", "iso"), args.get("timezone", "utc")
    if zone not in ("utc", "local"):
        return error(tool, f"Error: Invalid timezone '{zone}'. Use 'utc' or 'local'.")
    if form not in ("iso", "unix", "human"):
        return error(tool, f"Error: Invalid format '{form}'. Use 'iso', 'unix', or 'human'.")
    now = datetime.now(UTC) if zone == "utc" else datetime.now()
    if form == "iso":
        text = now.isoformat()
    elif form == "unix":
        text = str(int(now.timestamp()))
    else:
        text = now.strftime("%B %d, %Y at %I:%M:%S %p") + (" UTC" if zone == "utc" else "")
    return ok(tool, text)


def current_time(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """The current time in the requested format and timezone."""
    return run_tool(tool, _now)
