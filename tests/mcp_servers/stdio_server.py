"""An MCP server for the pool's tests, written with the `mcp` package, serving stdio:
`python tests/mcp_servers/stdio_server.py [--counter-file PATH]`.

Tools: `add`, `echo`, `bump` (appends one line per real execution to COUNTER_FILE, the
argument or the variable, so a test counts executions across processes), `whoami` (this
process's pid: reuse and restart), `env_keys` (the names this process inherited) and
`header` (a header of the current HTTP request; empty over stdio).
`http_server.py` serves the same tools over streamable HTTP.
"""

from __future__ import annotations

import argparse
import json
import os

from mcp.server.mcpserver import Context, MCPServer


def build_server(counter_file: str | None = None) -> MCPServer:
    server = MCPServer("durable-pool-test-tools")

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
        """Add one to n, recording the call in COUNTER_FILE."""
        path = counter_file or os.environ.get("COUNTER_FILE")
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
        """The names of this process's environment variables, sorted, comma-separated."""
        return ",".join(sorted(os.environ))

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of one header of the HTTP request that called this tool."""
        request = getattr(ctx.request_context, "request", None)
        headers = getattr(request, "headers", None) or {}
        return str(headers.get(name.lower(), ""))

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--counter-file", default=None)
    build_server(parser.parse_args().counter_file).run()


if __name__ == "__main__":
    main()
