"""duckduckgo_search: web or news search through the `ddgs` package, as strands-cli
does it; where `ddgs` is not installed (it is not a dependency here), an error result
says so."""

from __future__ import annotations

import importlib
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.worker.tools.native._common import error, ok_json, run_tool

TOOL_SPEC = {
    "name": "duckduckgo_search",
    "description": "Search DuckDuckGo for text results or news. Supports automatic backend "
                   "fallback for resilience.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Search query string"},
                "search_type": {
                    "type": "string",
                    "enum": ["text", "news"],
                    "default": "text",
                    "description": "Type of search to perform (text or news)",
                },
                "max_results": {
                    "type": "integer",
                    "default": 10,
                    "description": "Maximum number of results to return (1-50)",
                    "minimum": 1,
                    "maximum": 50,
                },
                "region": {
                    "type": "string",
                    "default": "us-en",
                    "description": "Region/language code (e.g., us-en, uk-en, cn-zh)",
                },
                "safesearch": {
                    "type": "string",
                    "enum": ["on", "moderate", "off"],
                    "default": "moderate",
                    "description": "SafeSearch filter level",
                },
                "timelimit": {
                    "type": "string",
                    "enum": ["d", "w", "m", "y"],
                    "description": "Time limit for results (d=day, w=week, m=month, y=year)",
                },
            },
            "required": ["query"],
        }
    },
}

MISSING = ("duckduckgo_search needs the 'ddgs' package, which is not installed on this "
           "worker (the operator installs it with: pip install ddgs)")


def _options(args: dict[str, Any], max_results: int) -> dict[str, Any]:
    options = {"region": str(args.get("region", "us-en")),
               "safesearch": str(args.get("safesearch", "moderate")),
               "max_results": max_results, "backend": "auto"}
    if args.get("timelimit") in ("d", "w", "m", "y"):
        options["timelimit"] = args["timelimit"]
    return options


def _search(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    query = args.get("query", "")
    if not isinstance(query, str) or not query.strip():
        return error(tool, "No search query provided")
    max_results = args.get("max_results", 10)
    if isinstance(max_results, bool) or not isinstance(max_results, int) \
            or not 1 <= max_results <= 50:
        return error(tool, f"max_results must be between 1 and 50, got: {max_results}")
    search_type = args.get("search_type", "text")
    if search_type not in ("text", "news"):
        return error(tool, f"Invalid search_type: {search_type}")
    try:
        ddgs = importlib.import_module("ddgs")
    except ImportError:
        return error(tool, MISSING)
    with ddgs.DDGS() as client:
        found = getattr(client, search_type)(query.strip(), **_options(args, max_results))
        results = list(found)[:max_results]
    return ok_json(tool, {"query": query.strip(), "search_type": search_type,
                          "result_count": len(results), "results": results})


def duckduckgo_search(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Search DuckDuckGo (needs the ddgs package)."""
    return run_tool(tool, _search)
