"""web_fetch: a web page over http(s), through the network guard (every redirect hop
checked, at most 5), cut at 1 MiB; as HTML, or as markdown where markdownify is
installed (strands-cli's optional dependency)."""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import (
    bool_arg,
    error,
    headers_arg,
    int_arg,
    ok_json,
    run_tool,
    str_arg,
)
from strands_durable.worker.tools.net_guard import guarded_request

TOOL_SPEC = {
    "name": "web_fetch",
    "description": "Fetch static web pages over HTTP/HTTPS and optionally convert the main "
                   "content to markdown.",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "HTTP or HTTPS URL to fetch.",
                },
                "timeout": {
                    "type": "integer",
                    "default": 10,
                    "minimum": 1,
                    "description": "Request timeout in seconds.",
                },
                "headers": {
                    "type": "object",
                    "description": "Optional HTTP headers to include with the request.",
                    "additionalProperties": {"type": "string"},
                },
                "mode": {
                    "type": "string",
                    "enum": ["html", "markdown"],
                    "default": "html",
                    "description": "Response processing mode.",
                },
                "include_raw_html": {
                    "type": "boolean",
                    "default": False,
                    "description": "Include the raw HTML when returning markdown output.",
                },
            },
            "required": ["url"],
        }
    },
}

DEFAULT_HEADERS = {
    "User-Agent": "strands-durable-web-fetch",
    "Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    "Accept-Language": "en-US,en;q=0.9",
}


def _markdown(html: str) -> str:
    module = importlib.import_module("markdownify")
    return str(module.markdownify(html, heading_style="ATX", strip=["script", "style"])).strip()


def _fetch(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    policy = current_tool_policy()
    url = str_arg(args, "url", "").strip()
    if not url:
        return error(tool, "No URL provided.")
    mode = str_arg(args, "mode", "html").lower()
    if mode not in ("html", "markdown"):
        return error(tool, f"Unsupported mode '{mode}'. Use 'html' or 'markdown'.")
    if mode == "markdown" and importlib.util.find_spec("markdownify") is None:
        return error(tool, "markdownify dependency is not available.")
    include_raw = bool_arg(args, "include_raw_html", False)
    timeout_s = int_arg(args, "timeout", 10, 1, max(1, int(policy.tool_timeout_s)))
    reply = guarded_request("GET", url, policy, headers={**DEFAULT_HEADERS, **headers_arg(args)},
                            timeout_s=timeout_s, follow_redirects=True)
    if mode == "html":
        return ok_json(tool, {"status": reply.status, "url": reply.url,
                              "headers": reply.headers, "body": reply.body})
    payload: dict[str, Any] = {"status": reply.status, "url": reply.url,
                               "markdown": _markdown(reply.body)}
    if include_raw:
        payload["raw_html"] = reply.body
    return ok_json(tool, payload)


def web_fetch(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Fetch a web page within the network policy."""
    return run_tool(tool, _fetch)
