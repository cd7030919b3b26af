"""An MCP server for the tests, written with the `mcp` package: `python server.py` serves
stdio, `python server.py --http PORT` streamable HTTP at /mcp.

Tools: `add`, `echo`, `bump` (appends a line to $COUNTER_FILE per real execution, so a
test counts calls across processes), `whoami` (this process's pid: reuse and restart),
`env_keys` (the environment's variable names: what the server inherited) and
`seen_header` (the X-Test header of the current HTTP request).
"""

from __future__ import annotations

import argparse
import json
import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("durable-test-tools")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def bump(n: int) -> int:
    """Add one to n, recording the call."""
    path = os.environ.get("COUNTER_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps({"n": n, "pid": os.getpid()}) + "\n")
    return n + 1


@server.tool()
def whoami() -> str:
    """This server process's pid."""
    return str(os.getpid())


@server.tool()
def env_keys() -> str:
    """The names of this process's environment variables, sorted."""
    return ",".join(sorted(os.environ))


@server.tool()
def seen_header(ctx: Context) -> str:
    """The X-Test header of the HTTP request that called this tool."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None) or {}
    return str(headers.get("x-test", ""))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=0, help="serve streamable HTTP here")
    port = parser.parse_args().http
    if port:
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()


if __name__ == "__main__":
    main()
