"""tavily_search: Tavily's web search, as plain HTTPS to its API with the worker's
TAVILY_API_KEY (the one variable meant for this tool; it never appears in a result).
Through the network guard, cut at 1 MiB, within the tool timeout."""

from __future__ import annotations

import json
import os
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import (
    bool_arg,
    error,
    ok_json,
    run_tool,
)
from strands_durable.worker.tools.net_guard import FetchFailed, guarded_request

TOOL_SPEC = {
    "name": "tavily_search",
    "description": "Search the web using Tavily AI-powered search. Returns optimized results "
                   "with relevance scores and optional AI-generated answers. Requires "
                   "TAVILY_API_KEY environment variable.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Search query string",
                },
                "max_results": {
                    "type": "integer",
                    "default": 5,
                    "description": "Maximum number of results to return (1-20)",
                    "minimum": 1,
                    "maximum": 20,
                },
                "include_answer": {
                    "type": "boolean",
                    "default": False,
                    "description": "Include AI-generated answer based on search results",
                },
            },
            "required": ["query"],
        }
    },
}

API_URL = "https://api.tavily.com/search"
KEY_VARIABLE = "TAVILY_API_KEY"
TIMEOUT_S = 30.0


def _failure(status: int, body: str) -> str:
    if status in (401, 403):
        return f"Authentication failed (HTTP {status}). Verify your {KEY_VARIABLE} is valid."
    if status in (429, 432, 433):
        return f"Rate limit or quota exceeded (HTTP {status}). Check your usage at https://app.tavily.com"
    return f"Search failed (HTTP {status}): {body[:500]}"


def _search(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    query = args.get("query", "")
    if not isinstance(query, str) or not query.strip():
        return error(tool, "No search query provided")
    max_results = args.get("max_results", 5)
    if isinstance(max_results, bool) or not isinstance(max_results, int) \
            or not 1 <= max_results <= 20:
        return error(tool, f"max_results must be between 1 and 20, got: {max_results}")
    include_answer = bool_arg(args, "include_answer", False)
    key = os.environ.get(KEY_VARIABLE, "")
    if not key:
        return error(tool, f"{KEY_VARIABLE} environment variable not set on this worker. "
                           "Get an API key at https://app.tavily.com")
    policy = current_tool_policy()
    try:
        reply = guarded_request(
            "POST", API_URL, policy, headers={"Authorization": f"Bearer {key}"},
            json={"query": query.strip(), "max_results": max_results,
                  "include_answer": include_answer},
            timeout_s=min(TIMEOUT_S, policy.tool_timeout_s))
    except FetchFailed as exc:
        return error(tool, str(exc).replace(key, "***"))
    if reply.status >= 400:
        return error(tool, _failure(reply.status, reply.body).replace(key, "***"))
    try:
        payload = json.loads(reply.body)
    except ValueError:
        return error(tool, "Search failed: the answer is not JSON"
                     + (" (it was cut at the size limit)" if reply.truncated else ""))
    return ok_json(tool, payload)


def tavily_search(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Search the web with Tavily."""
    return run_tool(tool, _search)
