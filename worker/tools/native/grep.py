"""grep: lines of a file in the files directory (DURABLE_TOOL_FILES_DIR) that match a
regex, with context lines; the first 16 MiB of the file, at most 1000 matches, the
pattern under a time budget."""

from __future__ import annotations

from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import (
    bool_arg,
    cap_text,
    error,
    int_arg,
    ok,
    run_tool,
    str_arg,
)
from strands_durable.worker.tools.native._files import (
    MAX_SCAN_BYTES,
    confine,
    is_binary,
    open_regular,
    read_lines,
)
from strands_durable.worker.tools.native._scan import (
    MAX_MATCHES,
    SEARCH_BUDGET_S,
    Scan,
    compile_pattern,
)

TOOL_SPEC = {
    "name": "grep",
    "description": "Search for regex pattern in a file and return matching lines with context. "
    "Useful for finding specific content without loading entire files. "
    "Cross-platform pure Python implementation.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "description": "Regular expression pattern to search for",
                },
                "path": {
                    "type": "string",
                    "description": "Path to file to search (relative or absolute)",
                },
                "context_lines": {
                    "type": "integer",
                    "default": 3,
                    "description": "Number of context lines before and after each match "
                                   "(default: 3)",
                },
                "ignore_case": {
                    "type": "boolean",
                    "default": False,
                    "description": "Perform case-insensitive search (default: false)",
                },
                "max_matches": {
                    "type": "integer",
                    "default": 100,
                    "description": "Maximum number of matches to return (default: 100)",
                },
            },
            "required": ["pattern", "path"],
        }
    },
}

MAX_CONTEXT_LINES = 50


def _render(lines: list[str], matches: list[int], context: int, shown: str) -> list[str]:
    out = [f"Found {len(matches)} match(es) in {shown}:\n"]
    for index in matches:
        out.append(f"\n--- Match at line {index + 1} ---")
        for near in range(max(0, index - context), min(len(lines), index + context + 1)):
            mark = ">" if near == index else " "
            out.append(f"{mark} {near + 1:4d} | {lines[near].rstrip()}")
    return out


def _grep(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    policy = current_tool_policy()
    pattern_text = str_arg(args, "pattern", "")
    if not str_arg(args, "path", ""):
        return error(tool, "No file path provided")
    pattern = compile_pattern(pattern_text, bool_arg(args, "ignore_case", False))
    target = confine(str_arg(args, "path", ""), policy)
    context = int_arg(args, "context_lines", 3, 0, MAX_CONTEXT_LINES)
    limit = int_arg(args, "max_matches", 100, 1, MAX_MATCHES)
    with open_regular(target) as handle:
        if is_binary(handle):
            return error(tool, f"Binary file detected (cannot search): {target.shown}")
        lines, cut = read_lines(handle, MAX_SCAN_BYTES)
    scan = Scan(pattern, min(SEARCH_BUDGET_S, policy.tool_timeout_s))
    matches = scan.matching(lines, limit)
    if not matches:
        out = [f"No matches found for pattern '{pattern_text}' in {target.shown}"]
    else:
        out = _render(lines, matches, context, target.shown)
    if len(matches) >= limit:
        out.append(f"\n(Showing first {limit} matches only)")
    if cut:
        out.append(f"\n[Note: only the first {MAX_SCAN_BYTES} bytes of the file were searched]")
    return ok(tool, cap_text("\n".join(out)))


def grep(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Search a file inside the files directory for a regex, with context lines."""
    return run_tool(tool, _grep)
