"""file_write: write a file inside the files directory only (DURABLE_TOOL_FILES_DIR),
at most 1 MiB per call."""

from __future__ import annotations

import os
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import bool_arg, error, ok, run_tool, str_arg
from strands_durable.worker.tools.native._files import MAX_WRITE_BYTES, confine

TOOL_SPEC = {
    "name": "file_write",
    "description": "Write contents to a file on the filesystem",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "description": "Path to the file to write (relative or absolute)",
                },
                "content": {
                    "type": "string",
                    "description": "Content to write to the file",
                },
                "encoding": {
                    "type": "string",
                    "default": "utf-8",
                    "description": "File encoding (default: utf-8)",
                },
                "create_dirs": {
                    "type": "boolean",
                    "default": False,
                    "description": "Create parent directories if they don't exist "
                                   "(default: false)",
                },
            },
            "required": ["path", "content"],
        }
    },
}


def _encode(content: str, encoding: str) -> bytes:
    try:
        return content.encode(encoding)
    except LookupError:
        raise ValueError(f"Unknown encoding '{encoding}'") from None
    except UnicodeEncodeError as exc:
        raise ValueError(f"Failed to encode content with encoding '{encoding}': {exc}") from None


def _write(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    target = confine(str_arg(args, "path", ""), current_tool_policy())
    content = str_arg(args, "content")
    try:
        data = _encode(content, str_arg(args, "encoding", "utf-8"))
    except ValueError as exc:
        return error(tool, f"Error: {exc}")
    if len(data) > MAX_WRITE_BYTES:
        return error(tool, f"Error: the content is larger than {MAX_WRITE_BYTES} bytes")
    if target.path.is_dir():
        return error(tool, f"Error: Path is a directory, not a file: {target.shown}")
    if bool_arg(args, "create_dirs", False):
        # Inside the root: the confined path's parents below it are inside too.
        target.path.parent.mkdir(parents=True, exist_ok=True)
    elif not target.path.parent.is_dir():
        return error(tool, "Error: Parent directory does not exist. "
                           "Set 'create_dirs' to true to create it automatically.")
    # O_NOFOLLOW: a symlink swapped in after the check is refused, not written through;
    # O_NONBLOCK: a FIFO without a reader fails instead of hanging the call.
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
    fd = os.open(target.path, flags, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return ok(tool, f"Successfully wrote {len(content)} characters to {target.shown}")


def file_write(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Write a file inside the files directory."""
    return run_tool(tool, _write)
