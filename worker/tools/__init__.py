"""Tools for agents: what a spec's `tools:` section builds on a worker (native tools,
python import paths, MCP servers, http_executors), and the tool-call context."""
