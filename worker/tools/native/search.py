"""search: lines of a file in the files directory (DURABLE_TOOL_FILES_DIR) holding a
text or regex, each match marked >>>so<<<; the first 16 MiB of the file, at most 1000
matches, the pattern under a time budget."""

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
    "name": "search",
    "description": "Search for keyword or regex pattern in a file and return matching lines "
    "with line numbers. Simpler than grep - no context lines, just direct matches. "
    "Useful for finding specific content quickly. "
    "Cross-platform pure Python implementation.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query (plain text or regex)"},
                "path": {
                    "type": "string",
                    "description": "Path to file to search (relative or absolute)",
                },
                "is_regex": {
                    "type": "boolean",
                    "default": False,
                    "description": "Treat query as regex pattern (default: false, plain text)",
                },
                "ignore_case": {
                    "type": "boolean",
                    "default": True,
                    "description": "Perform case-insensitive search (default: true)",
                },
                "max_matches": {
                    "type": "integer",
                    "default": 50,
                    "description": "Maximum number of matches to return (default: 50)",
                },
            },
            "required": ["query", "path"],
        }
    },
}


def _search(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    policy = current_tool_policy()
    query = str_arg(args, "query", "")
    if not query:
        return error(tool, "No search query provided")
    if not str_arg(args, "path", ""):
        return error(tool, "No file path provided")
    pattern = compile_pattern(query, bool_arg(args, "ignore_case", True),
                              literal=not bool_arg(args, "is_regex", False))
    target = confine(str_arg(args, "path", ""), policy)
    limit = int_arg(args, "max_matches", 50, 1, MAX_MATCHES)
    with open_regular(target) as handle:
        if is_binary(handle):
            return error(tool, f"Binary file detected (cannot search): {target.shown}")
        lines, cut = read_lines(handle, MAX_SCAN_BYTES)
    scan = Scan(pattern, min(SEARCH_BUDGET_S, policy.tool_timeout_s))
    matches = scan.matching(lines, limit)
    if not matches:
        out = [f"No matches found for '{query}' in {target.shown}"]
    else:
        out = [f"Found {len(matches)} match(es) for '{query}' in {target.shown}:\n"]
        out += [f"{index + 1:4d} | {scan.highlight(lines[index].rstrip())}"
                for index in matches]
    if len(matches) >= limit:
        out.append(f"\n(Showing first {limit} matches only)")
    if cut:
        out.append(f"\n[Note: only the first {MAX_SCAN_BYTES} bytes of the file were searched]")
    return ok(tool, cap_text("\n".join(out)))


def search(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Search a file inside the files directory for a text or regex."""
    return run_tool(tool, _search)
