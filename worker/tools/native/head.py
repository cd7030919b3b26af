"""head: the first lines of a file in the files directory (DURABLE_TOOL_FILES_DIR),
numbered, within a byte limit of at most 1 MiB."""

from __future__ import annotations

from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import error, int_arg, ok, run_tool, str_arg
from strands_durable.worker.tools.native._files import (
    MAX_READ_BYTES,
    confine,
    is_binary,
    open_regular,
)

TOOL_SPEC = {
    "name": "head",
    "description": "Read the first N lines from a file. "
    "Useful for previewing file contents or reading headers without loading entire files. "
    "Cross-platform pure Python implementation.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to file to read (relative or absolute)",
                },
                "lines": {
                    "type": "integer",
                    "default": 10,
                    "description": "Number of lines to read from start (default: 10)",
                },
                "bytes_limit": {
                    "type": "integer",
                    "default": 1048576,
                    "description": "Maximum bytes to read (default: 1MB, prevents loading "
                                   "huge files)",
                },
            },
            "required": ["path"],
        }
    },
}

MAX_LINES = 10_000


def _head(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    target = confine(str_arg(args, "path", ""), current_tool_policy())
    count = int_arg(args, "lines", 10, 1, MAX_LINES)
    limit = int_arg(args, "bytes_limit", MAX_READ_BYTES, 1, MAX_READ_BYTES)
    lines: list[str] = []
    cut = False
    with open_regular(target) as handle:
        if is_binary(handle):
            return error(tool, f"Binary file detected (cannot read as text): {target.shown}")
        used = 0
        while len(lines) < count:
            # readline(n): a file without newlines is still read only up to the limit.
            raw = handle.readline(limit - used + 1)
            if not raw:
                break
            if used + len(raw) > limit:
                cut = True
                break
            used += len(raw)
            lines.append(raw.decode("utf-8", errors="replace").rstrip())
    if not lines and not cut:
        return ok(tool, f"File is empty: {target.shown}")
    out = [f"First {len(lines)} line(s) from {target.shown}:\n"]
    out += [f"{number:4d} | {line}" for number, line in enumerate(lines, start=1)]
    if cut:
        out.append(f"\n[Truncated: byte limit ({limit} bytes) reached]")
    return ok(tool, "\n".join(out))


def head(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """The first lines of a file inside the files directory."""
    return run_tool(tool, _head)
