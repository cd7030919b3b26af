"""The Jinja sandbox every template renders in: an allow-list of attributes (data and
a few read-only methods of it, nothing else), and the render guard's checks on every
call, operator, loop iteration and output (spec/render_guard.py).

Nothing but data has attributes: not types, functions, macros or Jinja's own objects,
so no route (`str.format`, `|attr`, `cycler.__init__`,
`self._TemplateReference__context`...) walks from a template to Python internals.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.runtime import Context, LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from jinja2.tests import TESTS as JINJA_TESTS
from jinja2.utils import missing, pass_context
from jinja2.visitor import NodeTransformer

from strands_durable.spec import render_guard
from strands_durable.spec.problems import short
from strands_durable.spec.template_filters import (
    GLOBALS,
    JINJA_FILTER_NAMES,
    LOOP_ATTRIBUTES,
    MAPPING_METHODS,
    OWN_FILTERS,
    SEQUENCE_METHODS,
    STR_METHODS,
    guarded_filter,
    guarded_test,
    search,
)

__all__ = ["DurableSandbox"]


class _Bounds(NodeTransformer):
    """Rewrites a parsed template so loops and `~` go through the render guard: each
    loop iteration checks the clock and counts the loop body's literal text (which
    Jinja emits without any hook), each concatenation is sized before it is built."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise TemplateSyntaxError("recursive loops are not available in templates",
                                      node.lineno)
        self.generic_visit(node)
        text = sum(len(data.data) for data in _own_literal_text(node.body))
        iterable: Any = node.iter
        node.iter = _guard_call("durable_iter", [iterable, nodes.Const(text)], node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _guard_call("durable_concat", list(node.nodes), node.lineno)

    # A literal may hold one value many times (`[a, a, a, ...]`, level upon level): its
    # size is checked as if each were a copy, since that is what `==`, `in`, hashing
    # or sorting it walk, in one operation no deadline can interrupt.
    def visit_List(self, node: nodes.List) -> nodes.Node:
        self.generic_visit(node)
        return _guard_call("durable_literal", [node], node.lineno)

    def visit_Dict(self, node: nodes.Dict) -> nodes.Node:
        self.generic_visit(node)
        return _guard_call("durable_literal", [node], node.lineno)

    def visit_Tuple(self, node: nodes.Tuple) -> nodes.Node:
        self.generic_visit(node)
        if node.ctx != "load":  # an assignment target (`{% set a, b = ... %}`)
            return node
        return _guard_call("durable_literal", [node], node.lineno)


def _own_literal_text(body: Sequence[nodes.Node]) -> Iterator[nodes.TemplateData]:
    """Literal text a loop body emits itself (inner loops and macros count their own)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, nodes.TemplateData):
            yield node
        elif not isinstance(node, nodes.For | nodes.Macro | nodes.CallBlock):
            stack.extend(node.iter_child_nodes())


def _guard_call(name: str, args: list[nodes.Expr], lineno: int) -> nodes.Call:
    target = nodes.EnvironmentAttribute(name, lineno=lineno)
    return nodes.Call(target, args, [], None, None, lineno=lineno)


@pass_context
def _finalize(_context: Context, value: Any) -> str:
    """Every `{{ expression }}` output: sized before it becomes text, then counted."""
    if isinstance(value, Undefined):
        return str(value)  # StrictUndefined raises its own error
    text = render_guard.as_text(value, "output")
    render_guard.emit(len(text))
    return text


class ExplainedUndefined(StrictUndefined):
    """StrictUndefined whose message says what is there instead of naming a Python class:
    `steps[5]` of two steps, `branches.nope` of branches a and b. An object may say it
    itself (`undefined_message(name)`, as a chain's step history does)."""

    __slots__ = ()

    @property
    def _undefined_message(self) -> str:
        found, name = self._undefined_obj, self._undefined_name
        if self._undefined_hint or found is missing:
            return super()._undefined_message
        explain = getattr(type(found), "undefined_message", None)
        if callable(explain):
            return str(explain(found, name))
        asked = short(name)
        if isinstance(found, Mapping):
            keys = sorted(str(key)[:40] for key in found)
            shown = ", ".join(keys[:20]) + (", ..." if len(keys) > 20 else "")
            return f"no {asked} here (there is: {shown or 'nothing'})"
        if isinstance(found, Sequence) and not isinstance(found, str) \
                and isinstance(name, int):
            return f"no item {name} here (there are {len(found)})"
        return f"a {type(found).__name__} has no attribute {asked}"


class DurableSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with an allow-list of attributes, and the guard's
    checks on every call, operator, loop iteration and output."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self) -> None:
        # keep_trailing_newline=False, Jinja's default as in strands-cli: an `input: |`
        # block renders without its last newline there, so here too.
        super().__init__(undefined=ExplainedUndefined, autoescape=False,
                         keep_trailing_newline=False, finalize=_finalize,
                         # No compile-time constant folding: it would call filters and
                         # operators outside any render's bounds.
                         optimized=False)
        self.globals.clear()
        self.globals.update(GLOBALS)
        filters = {name: JINJA_FILTERS[name] for name in JINJA_FILTER_NAMES}
        filters.update(OWN_FILTERS)
        self.filters = {name: guarded_filter(name, f) for name, f in filters.items()}
        tests: dict[str, Any] = dict(JINJA_TESTS)
        tests["search"] = search
        self.tests = {name: guarded_test(t) for name, t in tests.items()}

    # Attribute and item access: data only --------------------------------------------
    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, Undefined):
            return super().getattr(obj, attribute)
        render_guard.tick()
        if isinstance(obj, Mapping):
            if attribute in MAPPING_METHODS:
                return getattr(obj, attribute)
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                if attribute.startswith("__"):
                    return self.unsafe_undefined(obj, attribute)
                return self.undefined(obj=obj, name=attribute)
        allowed = _allowed_attributes(obj)
        if attribute in allowed:
            return getattr(obj, attribute)
        if allowed or isinstance(obj, Sequence):
            if attribute.startswith("_") or hasattr(obj, attribute):
                return self.unsafe_undefined(obj, attribute)
            return self.undefined(obj=obj, name=attribute)
        return self.unsafe_undefined(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        if isinstance(obj, Undefined):
            return super().getitem(obj, argument)
        render_guard.tick()
        if isinstance(obj, Mapping | Sequence):
            try:
                return obj[argument]
            except (TypeError, LookupError):
                if isinstance(argument, str):
                    return self.getattr(obj, argument)
                return self.undefined(obj=obj, name=argument)
        return self.unsafe_undefined(obj, str(argument))

    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        # Only reached through Jinja's own helpers; the same allow-list as getattr.
        return attr in MAPPING_METHODS if isinstance(obj, Mapping) \
            else attr in _allowed_attributes(obj)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        # Refused on the spot, not as an Undefined that `is defined` or a list's repr
        # would quietly swallow.
        raise SecurityError(f"access to attribute {attribute!r} of a "
                            f"{type(obj).__name__!r} value is not allowed in templates")

    def wrap_str_format(self, value: Any) -> None:
        return None  # str.format and format_map are not on the allow-list at all

    # Calls and operators: bounded ----------------------------------------------------
    def call(__self, __context: Context, __obj: Any, *args: Any,
             **kwargs: Any) -> Any:
        render_guard.tick()
        if not __self.is_safe_callable(__obj):
            raise SecurityError(f"{__obj!r} is not safely callable")
        render_guard.check_call(__obj, args, kwargs)
        if isinstance(__obj, Macro) and (__obj.catch_varargs or __obj.catch_kwargs):
            # Extra arguments become the macro's `varargs` / `kwargs`: a new value, as
            # large as a literal of them would be.
            render_guard.check_weight((args, kwargs), f"the arguments of {__obj.name}()")
        result = __context.call(__obj, *args, **kwargs)
        render_guard.check_result(result, "a call")
        return result

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        return render_guard.binop(operator, left, right)

    # The guard's entry points in rewritten templates (see _Bounds).
    @staticmethod
    def durable_iter(iterable: Any, text_per_item: int) -> Iterator[Any]:
        return render_guard.guarded_iter(iterable, text_per_item)

    @staticmethod
    def durable_literal(value: Any) -> Any:
        render_guard.tick()
        render_guard.check_weight(value, "the literal")
        return value

    @staticmethod
    def durable_concat(*parts: Any) -> str:
        texts = [render_guard.as_text(part, "~") for part in parts]
        render_guard.check_size(sum(map(len, texts)), "~")
        return "".join(texts)

    def _generate(self, source: nodes.Template, name: str | None, filename: str | None,
                  defer_init: bool = False) -> str:
        tree = _Bounds().visit(source)
        tree.set_environment(self)
        return super()._generate(tree, name, filename, defer_init)


def _allowed_attributes(obj: Any) -> frozenset[str]:
    if isinstance(obj, str):
        return STR_METHODS
    if isinstance(obj, LoopContext):
        return LOOP_ATTRIBUTES
    if isinstance(obj, Sequence):
        return SEQUENCE_METHODS
    return frozenset()

