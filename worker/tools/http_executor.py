"""A spec's http_executor as a Strands tool: the model calls a REST API by path.

As strands-cli's http_executor_factory: one tool named by the executor's id, taking
`method`, `path`, `json_data` and `headers_override` (and `params`, the query), and
describing the API from the executor's description, authentication info, response
format and common endpoints. Unlike it:
- the path stays under base_url (no other scheme, host, port or a path above base_url's);
- `${VAR}` in the executor's headers is read from the worker's environment only for
  variables the operator listed in DURABLE_TOOL_SECRETS, and no value is ever put in a
  result or an error (one that comes back in a response is masked as well);
- every request carries `Idempotency-Key`, the tool call's stable key, so the API can
  recognise a repeat after a worker crash;
- base_url goes through the network guard, redirects are not followed (strands-cli's
  client does not follow them either), the answer is cut at 1 MiB, and timeout_ms (at
  most DURABLE_TOOL_TIMEOUT_S) bounds the whole exchange.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from strands.types._events import ToolResultEvent
from strands.types.tools import AgentTool, ToolGenerator, ToolResult, ToolSpec, ToolUse

from strands_durable.settings import ToolPolicy
from strands_durable.spec.tools import ENV_REFERENCE, HttpExecutor
from strands_durable.worker.tools.context import INVOCATION_STATE_KEY, ToolCall, current_tool_call
from strands_durable.worker.tools.native._common import ToolArgError, error, headers_arg, ok
from strands_durable.worker.tools.net_guard import FetchFailed, ToolRefused, guarded_request

__all__ = ["build_http_executor", "join_path"]

SECRETS_SETTING = "DURABLE_TOOL_SECRETS"
METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
_MASK = "***"


def _description(executor: HttpExecutor) -> str:
    parts = [executor.description or f"HTTP executor for {executor.base_url}"]
    if executor.authentication_info:
        parts.append(f"\n\nAuthentication: {executor.authentication_info}")
    if executor.response_format:
        parts.append(f"\nResponse format: {executor.response_format}")
    if executor.common_endpoints:
        parts.append("\n\nCommon endpoints:")
        parts += [f"\n- {endpoint.get('method', 'GET')} {endpoint.get('path', '')}: "
                  f"{endpoint.get('description', '')}" for endpoint in executor.common_endpoints]
    return "".join(parts)


def _spec(executor: HttpExecutor) -> ToolSpec:
    properties = {
        "method": {"type": "string", "description": "HTTP method", "enum": METHODS,
                   "default": "GET"},
        "path": {"type": "string", "description": "Request path (relative to base URL)"},
        "json_data": {"type": "object",
                      "description": "Optional JSON body for POST/PUT requests"},
        "headers_override": {"type": "object",
                             "description": "Optional headers to merge with base headers"},
        "params": {"type": "object", "description": "Optional query parameters"},
    }
    return {"name": executor.id, "description": _description(executor),
            "inputSchema": {"json": {"type": "object", "properties": properties,
                                     "required": ["path"]}}}


def join_path(base_url: str, path: str) -> str:
    """base_url + path, as httpx's base_url does it; ToolRefused when the result would
    leave base_url: another scheme, host or port, or a path outside base_url's."""
    if not path:
        raise ToolArgError("Missing required 'path' parameter")
    if any(char in path for char in "\\\r\n\t\x00"):
        raise ToolRefused(f"refused: path {path!r} holds a backslash or control character")
    split = urlsplit(path)
    if split.scheme or split.netloc or path.startswith("//"):
        raise ToolRefused(f"refused: path {path!r} is not relative to the executor's "
                          "base_url; give only the path")
    base = httpx.URL(base_url)
    url = httpx.URL(base_url.rstrip("/") + "/" + path.lstrip("/"))
    prefix = base.path.rstrip("/") + "/"
    if (url.scheme, url.host, url.port) != (base.scheme, base.host, base.port) \
            or ".." in url.path.split("/") \
            or not (url.path + "/").startswith(prefix):
        raise ToolRefused(f"refused: path {path!r} leads outside the executor's base_url")
    return str(url)


class _HttpExecutorTool(AgentTool):
    def __init__(self, executor: HttpExecutor, policy: ToolPolicy,
                 environ: Mapping[str, str]) -> None:
        super().__init__()
        self._executor = executor
        self._policy = policy
        self._environ = environ
        self._spec = _spec(executor)

    @property
    def tool_name(self) -> str:
        return self._executor.id

    @property
    def tool_spec(self) -> ToolSpec:
        return self._spec

    @property
    def tool_type(self) -> str:
        return "http_executor"

    def _headers(self) -> tuple[dict[str, str], list[str]]:
        """The executor's headers with ${VAR} filled in, and the values filled in (to
        mask); ToolArgError naming the variable (never its value) when one may not be."""
        resolved: dict[str, str] = {}
        secrets: list[str] = []
        for header, template in self._executor.headers.items():
            for name in ENV_REFERENCE.findall(template):
                if name not in self._policy.secrets:
                    raise ToolArgError(
                        f"Error: header {header!r} of {self._executor.id!r} names ${{{name}}}, "
                        f"which the operator has not listed in {SECRETS_SETTING}")
                if not self._environ.get(name):
                    raise ToolArgError(f"Error: header {header!r} of {self._executor.id!r} "
                                       f"names ${{{name}}}, which is not set on this worker")
                secrets.append(self._environ[name])
            value = ENV_REFERENCE.sub(lambda m: self._environ[m.group(1)], template)
            if any(char in value for char in "\r\n\x00"):
                raise ToolArgError(f"Error: header {header!r} of {self._executor.id!r} "
                                   "holds a line break once its variables are filled in")
            resolved[header] = value
        return resolved, secrets

    def _request(self, tool_use: ToolUse, call: ToolCall | None,
                 secrets: list[str]) -> ToolResult:
        args = tool_use.get("input") or {}
        if not isinstance(args, dict):
            raise ToolArgError("Error: the tool input must be an object")
        method = str(args.get("method") or "GET").upper()
        if method not in METHODS:
            raise ToolArgError(f"Error: unsupported HTTP method {method!r}")
        params = args.get("params")
        if params is not None and not isinstance(params, dict):
            raise ToolArgError("Error: 'params' must be an object")
        url = join_path(self._executor.base_url, str(args.get("path") or ""))
        headers, secrets[:] = self._headers()
        headers.update(headers_arg(args, "headers_override"))
        if call is not None:
            headers["Idempotency-Key"] = call.idempotency_key
        reply = guarded_request(method, url, self._policy, headers=headers,
                                json=args.get("json_data"), params=params,
                                timeout_s=min(self._executor.timeout_ms / 1000,
                                              self._policy.tool_timeout_s))
        text = f"Status: {reply.status}\n\n{reply.body}"
        return (error if reply.status >= 400 else ok)(tool_use, text)

    def _call(self, tool_use: ToolUse, call: ToolCall | None) -> ToolResult:
        secrets: list[str] = []
        try:
            result = self._request(tool_use, call, secrets)
        except (ToolArgError, ToolRefused, FetchFailed) as exc:
            result = error(tool_use, str(exc))
        except Exception as exc:  # a tool reports, it does not raise into the agent loop
            result = error(tool_use, f"Error: {type(exc).__name__}: {exc}")
        return _masked(result, secrets)

    async def stream(self, tool_use: ToolUse, invocation_state: dict[str, Any],
                     **kwargs: Any) -> ToolGenerator:
        call = invocation_state.get(INVOCATION_STATE_KEY)
        if not isinstance(call, ToolCall):
            call = current_tool_call()
        yield ToolResultEvent(await asyncio.to_thread(self._call, tool_use, call))


def _masked(result: ToolResult, secrets: list[str]) -> ToolResult:
    """The result with every filled-in secret value masked, wherever it appears."""
    for block in result["content"]:
        text = block.get("text")
        if text is not None:
            for secret in secrets:
                text = text.replace(secret, _MASK)
            block["text"] = text
    return result


def build_http_executor(executor: HttpExecutor, policy: ToolPolicy,
                        environ: Mapping[str, str]) -> AgentTool:
    """The Strands tool for `executor`; the environment is read at call time."""
    return _HttpExecutorTool(executor, policy, environ)
