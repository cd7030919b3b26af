"""A spec's `tools.python` entry, as a list of Strands tools.

References are import paths as strands-cli writes them: a native tool's name (or
`strands_cli.tools.<name>`), `pkg.mod.func` (a `@tool` function, or the function of a
module-based tool), `pkg.mod` (a TOOL_SPEC module, or a module of `@tool` functions)
and `pkg.mod:func`. Importing runs the module's code on the worker, so anything but a
native tool must lie under a prefix the operator listed in DURABLE_TOOL_MODULES; file
paths and relative imports are never loaded.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType
from typing import Any

from strands.tools.loader import load_tools_from_module
from strands.tools.tools import PythonAgentTool
from strands.types.tools import AgentTool

from strands_durable.settings import ToolPolicy
from strands_durable.tools import NATIVE_MODULE_PREFIX, NATIVE_TOOLS, native_name
from strands_durable.worker.tools.native import load_native

__all__ = ["ToolLoadError", "load_python_tool"]

MODULES_SETTING = "DURABLE_TOOL_MODULES"
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_REFERENCE = re.compile(rf"({_DOTTED})(?::([A-Za-z_][A-Za-z0-9_]*))?")


class ToolLoadError(Exception):
    """A python tool that cannot be loaded: not allowed, not importable, not a tool."""


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def _import(reference: str, module_path: str) -> ModuleType:
    try:
        return importlib.import_module(module_path)
    except Exception as exc:  # the module's own code may raise anything while importing
        raise ToolLoadError(f"python tool {reference!r}: cannot import {module_path!r} "
                            f"({_one_line(exc)})") from None


def _from_attribute(reference: str, module: ModuleType, name: str) -> list[AgentTool]:
    """`module.name` as a tool: a `@tool` function (or any Strands tool object), or the
    function of a module-based tool (the module's TOOL_SPEC)."""
    if not hasattr(module, name):
        raise ToolLoadError(f"python tool {reference!r}: module {module.__name__!r} "
                            f"has no attribute {name!r}")
    target: Any = getattr(module, name)
    if isinstance(target, AgentTool):
        return [target]
    spec = getattr(module, "TOOL_SPEC", None)
    if callable(target) and isinstance(spec, dict) and isinstance(spec.get("name"), str):
        return [PythonAgentTool(spec["name"], spec, target)]  # type: ignore[arg-type]
    raise ToolLoadError(f"python tool {reference!r} is neither a @tool function nor the "
                        "function of a module-based tool (a module with TOOL_SPEC)")


def _from_module(reference: str, module: ModuleType) -> list[AgentTool]:
    try:
        return load_tools_from_module(module, module.__name__.rsplit(".", 1)[-1])
    except (AttributeError, TypeError) as exc:
        raise ToolLoadError(f"python tool {reference!r}: {_one_line(exc)}") from None


def _is_missing(exc: ModuleNotFoundError, module_path: str) -> bool:
    """The module itself is missing (not something it imports)."""
    return exc.name is not None and (module_path == exc.name
                                     or module_path.startswith(exc.name + "."))


def _load_dotted(reference: str) -> list[AgentTool]:
    """`pkg.mod` (a module) or, failing that, `pkg.mod.func` (an attribute)."""
    try:
        return _from_module(reference, importlib.import_module(reference))
    except ModuleNotFoundError as exc:
        if "." not in reference or not _is_missing(exc, reference):
            raise ToolLoadError(f"python tool {reference!r}: cannot import it "
                                f"({_one_line(exc)})") from None
    except ToolLoadError:
        raise
    except Exception as exc:  # the module's own code may raise anything while importing
        raise ToolLoadError(f"python tool {reference!r}: cannot import it "
                            f"({_one_line(exc)})") from None
    module_path, name = reference.rsplit(".", 1)
    parent = _import(reference, module_path)
    if not hasattr(parent, name):
        raise ToolLoadError(f"python tool {reference!r}: cannot import it (no module "
                            f"{reference!r}, no attribute {name!r} in {module_path!r})")
    return _from_attribute(reference, parent, name)


def load_python_tool(reference: str, policy: ToolPolicy) -> list[AgentTool]:
    """The Strands tools a `tools.python` reference names; ToolLoadError, naming the
    reference (and DURABLE_TOOL_MODULES where that is the cause), when it cannot."""
    native = native_name(reference)
    if native is not None:
        return [load_native(native)]
    if reference.startswith(NATIVE_MODULE_PREFIX):
        raise ToolLoadError(f"python tool {reference!r} is not one of strands-cli's native "
                            f"tools ({', '.join(NATIVE_TOOLS)})")
    match = _REFERENCE.fullmatch(reference)
    if match is None:
        raise ToolLoadError(f"python tool {reference!r} is not an import path "
                            "(pkg.module, pkg.module.function or pkg.module:function)")
    if not policy.allows_module(reference):
        raise ToolLoadError(f"python tool {reference!r} is not allowed on this worker: the "
                            f"operator lists the import-path prefixes it may load in "
                            f"{MODULES_SETTING} (comma-separated)")
    module_path, name = match.group(1), match.group(2)
    if name is not None:
        return _from_attribute(reference, _import(reference, module_path), name)
    return _load_dotted(reference)
