"""strands-cli's native tools, one module per name in strands_durable/tools.py.

Each is a Strands module-based tool (`TOOL_SPEC` and a function named like the module)
of our own: the same names and input schemas as strands-cli's, bounded, and confined by
the operator's tool policy (read at call time: `current_tool_policy()`).
"""

from __future__ import annotations

import importlib

from strands.tools.tools import PythonAgentTool
from strands.types.tools import AgentTool

from strands_durable.tools import NATIVE_TOOLS

__all__ = ["load_native"]


def load_native(name: str) -> AgentTool:
    """The native tool `name` (a short name from NATIVE_TOOLS) as a Strands tool."""
    if name not in NATIVE_TOOLS:
        raise ValueError(f"{name!r} is not a native tool; native tools are: "
                         f"{', '.join(NATIVE_TOOLS)}")
    module = importlib.import_module(f"{__name__}.{name}")
    return PythonAgentTool(name, module.TOOL_SPEC, getattr(module, name))
