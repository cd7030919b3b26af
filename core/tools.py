"""The native tools, by name: strands-cli's registry of built-in tools (its
`strands_cli/tools/<name>.py` modules), the names a spec's `tools.python` and an
agent's `tools:` list may use without an import path.

Names only, no implementation: the scheduler and the API import this to check a spec;
the worker builds each from strands_durable/worker/tools/native/<name>.py.
"""

from __future__ import annotations

__all__ = ["LEGACY_MODULE_PREFIX", "LEGACY_TOOLS", "NATIVE_MODULE_PREFIX", "NATIVE_TOOLS",
           "native_name"]

NATIVE_TOOLS: tuple[str, ...] = (
    "calculator",
    "current_time",
    "duckduckgo_search",
    "file_read",
    "file_write",
    "grep",
    "head",
    "http_request",
    "python_exec",
    "search",
    "spec_verify",
    "tail",
    "tavily_search",
    "web_fetch",
)

# strands-cli's full form of a native tool: `strands_cli.tools.<name>`.
NATIVE_MODULE_PREFIX = "strands_cli.tools."
# strands-cli's legacy allowlist (before its native registry): the strands-agents-tools
# modules it still accepts, as `strands_tools.<name>` or `strands_tools.<name>.<name>`.
# It resolves them to its native tools, and so do we: the same tool, the same policy.
LEGACY_MODULE_PREFIX = "strands_tools."
LEGACY_TOOLS: tuple[str, ...] = ("file_read", "file_write", "http_request")


def native_name(reference: str) -> str | None:
    """The native tool a `tools.python` entry names (short id, strands-cli's full path,
    or a legacy `strands_tools` path), or None when it is an import path of someone
    else's tool."""
    if reference.startswith(LEGACY_MODULE_PREFIX):
        module, _, function = reference.removeprefix(LEGACY_MODULE_PREFIX).partition(".")
        legacy = module in LEGACY_TOOLS and function in ("", module)
        return module if legacy else None
    name = reference.removeprefix(NATIVE_MODULE_PREFIX)
    return name if name in NATIVE_TOOLS else None
