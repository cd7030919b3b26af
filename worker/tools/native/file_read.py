"""file_read: a file's text, from the files directory only (DURABLE_TOOL_FILES_DIR),
at most 1 MiB of it."""

from __future__ import annotations

import codecs
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import error, ok, run_tool, str_arg
from strands_durable.worker.tools.native._files import MAX_READ_BYTES, confine, open_regular

TOOL_SPEC = {
    "name": "file_read",
    "description": "Read the contents of a file from the filesystem",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to the file to read (relative or absolute)",
                },
                "encoding": {
                    "type": "string",
                    "default": "utf-8",
                    "description": "File encoding (default: utf-8)",
                },
            },
            "required": ["path"],
        }
    },
}


def _read(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    target = confine(str_arg(args, "path", ""), current_tool_policy())
    encoding = str_arg(args, "encoding", "utf-8")
    try:
        decoder = codecs.getincrementaldecoder(encoding)()
    except LookupError:
        return error(tool, f"Error: Unknown encoding '{encoding}'")
    with open_regular(target) as handle:
        data = handle.read(MAX_READ_BYTES + 1)
    truncated = len(data) > MAX_READ_BYTES
    try:
        # A cut file may end inside a character: not final, so that is no error.
        text = decoder.decode(data[:MAX_READ_BYTES], final=not truncated)
    except (UnicodeDecodeError, TypeError) as exc:
        return error(tool, f"Error: Failed to decode file with encoding '{encoding}': {exc}")
    if truncated:
        text += f"\n[truncated: {target.shown} is longer than {MAX_READ_BYTES} bytes]"
    return ok(tool, text)


def file_read(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Read a file inside the files directory."""
    return run_tool(tool, _read)
