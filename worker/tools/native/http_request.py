"""http_request: one HTTP request the model describes, through the network guard
(public addresses only, unless DURABLE_TOOL_HTTP_ALLOW says otherwise), its answer cut
at 1 MiB. As in strands-cli, redirects are returned, not followed, and any status is a
successful call (the model reads the status)."""

from __future__ import annotations

import json
from typing import Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.worker.tools.native._common import (
    error,
    headers_arg,
    int_arg,
    ok,
    run_tool,
    str_arg,
)
from strands_durable.worker.tools.net_guard import guarded_request

TOOL_SPEC = {
    "name": "http_request",
    "description": "Make HTTP requests (GET, POST, PUT, DELETE) with optional headers and body",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "url": {
                    "type": "string",
                    "description": "URL to make the request to",
                },
                "method": {
                    "type": "string",
                    "enum": ["GET", "POST", "PUT", "DELETE"],
                    "default": "GET",
                    "description": "HTTP method (default: GET)",
                },
                "headers": {
                    "type": "object",
                    "description": "HTTP headers as key-value pairs",
                },
                "body": {
                    "type": "string",
                    "description": "Request body (for POST/PUT)",
                },
                "timeout": {
                    "type": "integer",
                    "default": 30,
                    "description": "Request timeout in seconds (default: 30)",
                },
            },
            "required": ["url"],
        }
    },
}

METHODS = ("GET", "POST", "PUT", "DELETE")


def _request(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    policy = current_tool_policy()
    url = str_arg(args, "url", "").strip()
    if not url:
        return error(tool, "Error: 'url' parameter is required")
    method = str_arg(args, "method", "GET").upper()
    if method not in METHODS:
        return error(tool, f"Error: Unsupported HTTP method: {method}")
    body = args.get("body")
    if body is not None and not isinstance(body, str):
        return error(tool, "Error: 'body' must be a string")
    timeout_s = int_arg(args, "timeout", 30, 1, max(1, int(policy.tool_timeout_s)))
    reply = guarded_request(method, url, policy, headers=headers_arg(args),
                            content=body if method in ("POST", "PUT") else None,
                            timeout_s=timeout_s)
    text = (f"Status: {reply.status}\n\nHeaders:\n{json.dumps(reply.headers, indent=2)}"
            f"\n\nBody:\n{reply.body}")
    return ok(tool, text)  # the body is already cut at the guard's byte cap


def http_request(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Make an HTTP request within the network policy."""
    return run_tool(tool, _request)
