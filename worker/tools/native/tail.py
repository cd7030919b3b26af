"""tail: the last lines of a file in the files directory (DURABLE_TOOL_FILES_DIR),
numbered as in the file. Only the file's last `bytes_limit` bytes (at most 16 MiB) are
read for the lines; the lines before them are counted, not kept."""

from __future__ import annotations

import os
from collections import deque
from typing import Any, BinaryIO

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import error, int_arg, ok, run_tool, str_arg
from strands_durable.worker.tools.native._files import (
    MAX_SCAN_BYTES,
    confine,
    is_binary,
    open_regular,
)

TOOL_SPEC = {
    "name": "tail",
    "description": "Read the last N lines from a file. "
    "Useful for reading recent log entries or file endings without loading entire files. "
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
                    "description": "Number of lines to read from end (default: 10)",
                },
                "bytes_limit": {
                    "type": "integer",
                    "default": 10485760,
                    "description": "Maximum bytes to read (default: 10MB, for efficient "
                                   "tail on large files)",
                },
            },
            "required": ["path"],
        }
    },
}

MAX_LINES = 10_000
_COUNT_CHUNK = 1024 * 1024


def _lines_before(handle: BinaryIO, offset: int) -> int:
    """Newlines in the file's first `offset` bytes, counted in chunks (not kept)."""
    handle.seek(0)
    seen = 0
    while offset > 0:
        chunk = handle.read(min(_COUNT_CHUNK, offset))
        if not chunk:
            break
        seen += chunk.count(b"\n")
        offset -= len(chunk)
    return seen


def _tail(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    target = confine(str_arg(args, "path", ""), current_tool_policy())
    count = int_arg(args, "lines", 10, 1, MAX_LINES)
    limit = int_arg(args, "bytes_limit", 10 * 1024 * 1024, 1, MAX_SCAN_BYTES)
    with open_regular(target) as handle:
        if is_binary(handle):
            return error(tool, f"Binary file detected (cannot read as text): {target.shown}")
        size = os.fstat(handle.fileno()).st_size
        start = max(0, size - limit)
        first_number = _lines_before(handle, start) + 1
        # The window starts a whole line only at the file's start or after a newline.
        handle.seek(max(0, start - 1))
        whole = start == 0 or handle.read(1) == b"\n"
        handle.seek(start)
        data = handle.read(limit)
    lines = data.decode("utf-8", errors="replace").split("\n")
    if lines[-1] == "":
        lines.pop()
    if not whole and lines:
        lines.pop(0)  # the end of a line that began before the window
        first_number += 1
    numbered = deque(enumerate(lines, start=first_number), maxlen=count)
    if not numbered:
        return ok(tool, f"File is empty: {target.shown}")
    out = [f"Last {len(numbered)} line(s) from {target.shown}:\n"]
    if start > 0:
        out.append(f"[Note: only the last {limit} bytes of the file were read]\n")
    out += [f"{number:4d} | {line.rstrip()}" for number, line in numbered]
    return ok(tool, "\n".join(out))


def tail(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """The last lines of a file inside the files directory."""
    return run_tool(tool, _tail)
