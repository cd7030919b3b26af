"""Strands' per-call overheads that buy nothing here, removed without changing what
Strands does.

The tracer: Strands' `Tracer` JSON-encodes the whole conversation into span events on every agent
call, cycle and model call, even when the span does not record (an untraced session:
our provider samples it out, `ParentBased(ALWAYS_OFF)`), which was about 0.5 ms of a
step. `LeanTracer` skips exactly that work when, and only when, the span does not
record; a recording span gets Strands' own methods unchanged (the trace artifact and
OTLP export see the same spans and events as before).

Plugin discovery: every Agent makes two plugins (its model's and its delegation's), and
each walks its class's whole MRO with getattr and a predicate, twice (hooks and tools),
about 7% of a one-turn step's CPU. Which attributes match is the class's, so the names
are found once per class and each instance binds just those.

The tools directory: every Agent scans the working directory's `./tools/` for tool
modules, also when it is not to load them (`load_tools_from_directory`, off here): a
stat per step, and a walk of that folder per step for a worker started beside one. Only
an Agent that loads from it scans it now.

The copies: Strands deep-copies the whole conversation twice per model call
(`_normalize_messages`, and the model middleware's context) with `copy.deepcopy`,
whose per-object bookkeeping was a third of a step's CPU. For plain data (dicts,
lists, strings, numbers: what messages are) a pickle round trip makes the same deep
copy, aliasing included, several times faster; anything else goes to copy.deepcopy.
"""

from __future__ import annotations

import copy
import io
import pickle
import types
from collections.abc import Callable
from typing import Any

import strands.event_loop.event_loop as strands_event_loop
import strands.event_loop.streaming as strands_streaming
import strands.plugins.multiagent_plugin as strands_multiagent_plugin
import strands.plugins.plugin as strands_plugin
import strands.telemetry.tracer as strands_tracer
from opentelemetry.trace import Span
from strands.hooks.registry import HookCallback
from strands.telemetry.tracer import Tracer
from strands.tools.decorator import DecoratedFunctionTool
from strands.tools.registry import ToolRegistry


def _recording(span: Span | None) -> bool:
    return span is not None and span.is_recording()


class LeanTracer(Tracer):
    def _add_event_messages(self, span: Span, messages: Any) -> None:
        if _recording(span):
            super()._add_event_messages(span, messages)

    def _add_system_prompt_event(self, span: Span, system_prompt: str | None = None,
                                 system_prompt_content: list[Any] | None = None) -> None:
        if _recording(span):
            super()._add_system_prompt_event(span, system_prompt, system_prompt_content)

    # It only adds attributes and events to the span before ending it, and ending a
    # span that does not record is a no-op (Strands' own `_end_span` returns first).
    def end_agent_span(self, span: Span, response: Any = None,
                       error: Exception | None = None) -> None:
        if _recording(span):
            super().end_agent_span(span, response, error)


class _NotPlain(Exception):
    pass


class _PlainPickler(pickle.Pickler):
    # Called for every object that is not an exact builtin (dict, list, str, int,
    # float, bytes, tuple, None, bool ...): those are the only ones it may copy.
    def reducer_override(self, obj: Any) -> Any:
        raise _NotPlain


def plain_deepcopy(obj: Any, memo: dict[int, Any] | None = None) -> Any:
    """copy.deepcopy, by a pickle round trip when `obj` is plain data throughout."""
    if memo is None and type(obj) in (list, dict):
        buffer = io.BytesIO()
        try:
            _PlainPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(obj)
        except (_NotPlain, pickle.PicklingError, RecursionError):
            pass
        else:
            return pickle.loads(buffer.getbuffer())
    return copy.deepcopy(obj, memo)


def _is_hook(bound: object) -> bool:  # strands.plugins._discovery.discover_hooks's
    return hasattr(bound, "_hook_event_types") and callable(bound)


def _is_tool(bound: object) -> bool:  # and discover_tools's
    return isinstance(bound, DecoratedFunctionTool)


_NAMES: dict[tuple[type, Callable[[object], bool]], tuple[str, ...]] = {}


def _discovered(instance: object, predicate: Callable[[object], bool]) -> list[Any]:
    """Strands' _discover_methods (the MRO walked in reverse, a child's attribute
    winning), its matching names remembered per class."""
    names = _NAMES.get((type(instance), predicate))
    if names is None:
        found: list[str] = []
        seen: set[str] = set()
        for cls in reversed(type(instance).__mro__):
            for name in cls.__dict__:
                if name in seen:
                    continue
                seen.add(name)
                try:
                    bound = getattr(instance, name)
                except Exception:  # as Strands: an attribute that fails is no method
                    continue
                if predicate(bound):
                    found.append(name)
        names = _NAMES[type(instance), predicate] = tuple(found)
    return [getattr(instance, name) for name in names]


def discover_hooks(instance: object, plugin_name: str) -> list[HookCallback]:
    return _discovered(instance, _is_hook)


def discover_tools(instance: object, plugin_name: str) -> list[DecoratedFunctionTool]:
    return _discovered(instance, _is_tool)


_INITIALIZE_TOOLS = ToolRegistry.initialize_tools


def initialize_tools(self: ToolRegistry, load_tools_from_directory: bool = False) -> None:
    """Strands' own when it loads from `./tools/`; else only what it does besides
    scanning that folder for modules it would then skip."""
    if load_tools_from_directory:
        _INITIALIZE_TOOLS(self, load_tools_from_directory)
    else:
        self.tool_config = None


# What Strands' two modules see as `copy`: the module, its deepcopy replaced.
_COPY = types.SimpleNamespace(**{**{name: getattr(copy, name) for name in copy.__all__},
                                 "deepcopy": plain_deepcopy})


def install() -> None:
    """Make Strands' process-wide tracer a LeanTracer and its per-call copies plain
    ones (once; Strands reads the tracer back through `get_tracer()` on every agent,
    event loop and tool call)."""
    if not isinstance(strands_tracer._tracer_instance, LeanTracer):
        strands_tracer._tracer_instance = LeanTracer()  # type: ignore[assignment]
    strands_event_loop.copy = _COPY  # type: ignore[assignment]
    strands_streaming.copy = _COPY  # type: ignore[assignment]
    strands_plugin.discover_hooks = discover_hooks
    ToolRegistry.initialize_tools = initialize_tools  # type: ignore[method-assign]
    strands_plugin.discover_tools = discover_tools
    strands_multiagent_plugin.discover_hooks = discover_hooks
