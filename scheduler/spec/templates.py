"""Jinja2 templates in a sandbox, with the filters and names strands-cli specs rely on.

One module-level environment serves every render: StrictUndefined (a typo fails loudly
instead of rendering an empty string), no autoescape (prompts are not HTML), and the
strands-cli custom filters (`truncate`, `tojson`, `title`, `regex_search`) replacing
Jinja's own where the semantics differ. Compiled templates are cached by source
text because the same step template renders once per step, session after session.

What a template may touch is an allow-list (scheduler/render_guard.py holds the
bounds): data (strings, numbers, lists, mappings) and a few read-only methods of it,
the globals and filters below, and the `loop` variable. Nothing else has attributes:
not types, functions, macros or Jinja's own objects, so no route (`str.format`,
`|attr`, `cycler.__init__`, `self._TemplateReference__context`...) walks from a
template to Python internals and the process's environment.

Every render is bounded (see render_guard): its wall time (DURABLE_RENDER_TIMEOUT_S)
and the characters it produces or builds (DURABLE_MAX_RENDER_CHARS).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache, wraps
from typing import Any

import regex
from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.filters import make_attrgetter
from jinja2.runtime import Context, LoopContext, Macro, Undefined
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError
from jinja2.tests import TESTS as JINJA_TESTS
from jinja2.utils import pass_context
from jinja2.visitor import NodeTransformer

from strands_durable.errors import TemplateError
from strands_durable.scheduler.spec import render_guard
from strands_durable.scheduler.spec.render_guard import RenderLimitExceeded, budget, rendering
from strands_durable.settings import Limits

__all__ = [
    "ENV",
    "KNOWN_GLOBALS",
    "condition_source",
    "render",
    "render_condition",
    "undeclared_condition_names",
    "undeclared_names",
]

_TEMPLATE_CACHE_SIZE = 2048
# What a condition may render to when it is not a single expression.
_TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
_FALSE_WORDS = frozenset({"false", "0", "no", "off", "none", ""})
# strands-cli strips these from rendered text (keeps \t \n \r).
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f]")
# A condition written as one `{{ expression }}` (whitespace control allowed).
_WRAPPED = re.compile(r"\A\{\{-?(?P<inner>.*?)-?\}\}\Z", re.DOTALL)

# --- what a template may read ------------------------------------------------------

def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Read-only methods of the data a template sees; every other attribute is refused.
STR_METHODS = _names(
    "capitalize casefold count endswith find index isalnum isalpha isdecimal isdigit "
    "islower isnumeric isspace istitle isupper lower lstrip partition removeprefix "
    "removesuffix replace rfind rindex rpartition rsplit rstrip split splitlines "
    "startswith strip swapcase title upper")
MAPPING_METHODS = frozenset({"get", "items", "keys", "values"})
SEQUENCE_METHODS = frozenset({"count", "index"})
LOOP_ATTRIBUTES = _names(
    "changed cycle depth depth0 first index index0 last length nextitem previtem "
    "revindex revindex0")

# strands-cli's condition evaluator exposes these builtins; as callables only (a
# template cannot read their attributes, so `str.format` is out of reach).
_GLOBALS: dict[str, Callable[..., Any]] = {
    "len": len, "str": str, "int": int, "float": float, "bool": bool, "list": list,
    "tuple": tuple, "set": set,
}
# Jinja's filters a template may use (strands-cli's own are added below). Left out:
# those that walk attributes by name (attr, groupby), format (format, the % operator),
# multiply text by an argument (center, indent, wordwrap, batch, slice), or are no
# use for prompts (escape, safe, urlize, xmlattr, pprint, random, filesizeformat...).
_JINJA_FILTERS = _names(
    "abs capitalize count d default dictsort first float int items join last length "
    "list lower map max min reject rejectattr replace reverse round select selectattr "
    "sort string sum trim unique upper wordcount")
# Filters that only count, pick or reorder: their input is not turned into text.
_NOT_STRINGIFYING = _names(
    "count d default first last length list map max min reject rejectattr reverse "
    "select selectattr sort unique")
_MAX_JSON_INDENT = 16
_MAX_ROUND_DIGITS = 100


# --- strands-cli's filters ------------------------------------------------------------


def _filter_truncate(value: Any, length: int = 100) -> str:
    """strands-cli semantics: cut to `length` chars, the last three being '...'."""
    text = str(value)
    if len(text) <= length:
        return text
    return text[: max(length - 3, 0)] + "..."


def _filter_tojson(value: Any, indent: int | None = None) -> str:
    # Plain JSON (Jinja's own tojson HTML-escapes, which garbles prompts).
    if indent is not None and not 0 <= int(indent) <= _MAX_JSON_INDENT:
        raise SecurityError(f"tojson indent {indent} is out of range 0-{_MAX_JSON_INDENT}")
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _filter_title(value: Any) -> str:
    return str(value).title()


def _regex_search(pattern: str, text: str, flags: int = 0) -> Any:
    """A regex search that stops at the render's deadline (catastrophic backtracking
    in a spec's pattern is a denial of service like any other)."""
    try:
        return regex.search(pattern, text, flags, timeout=budget().seconds_left())
    except TimeoutError:
        budget().expired()
        raise


def _filter_regex_search(value: Any, pattern: str) -> str:
    """First capture group of `pattern` in `value` (case-insensitive), else ''."""
    match = _regex_search(pattern, str(value), regex.IGNORECASE)
    if match and match.groups():
        return str(match.group(1) or "")
    return ""


def _search(value: Any, pattern: str) -> bool:
    """strands-cli graph conditions use `x | search('re')` and `x is search('re')`."""
    return _regex_search(pattern, str(value)) is not None


# --- bounded versions of Jinja filters that can amplify ------------------------------


def _filter_replace(value: Any, old: str, new: str, count: int | None = None) -> str:
    text, old, new = str(value), str(old), str(new)
    render_guard.check_replace(text, old, new, count)
    return text.replace(old, new, -1 if count is None else count)


def _filter_join(value: Iterable[Any], d: str = "", attribute: str | int | None = None
                 ) -> str:
    items = list(value)
    if attribute is not None:
        items = list(map(make_attrgetter(ENV, attribute), items))
    parts = [render_guard.as_text(item, "join") for item in items]
    render_guard.check_size(sum(map(len, parts)) + max(len(parts) - 1, 0) * len(str(d)),
                            "join")
    return str(d).join(parts)


def _filter_sum(iterable: Iterable[Any], attribute: str | int | None = None,
                start: int | float = 0) -> int | float:
    items = list(iterable)
    if attribute is not None:
        items = list(map(make_attrgetter(ENV, attribute), items))
    total = start
    for item in [start, *items]:
        if isinstance(item, Undefined):
            str(item)  # StrictUndefined: raises its own error
        if not isinstance(item, int | float):
            raise SecurityError("sum adds numbers only")
    for item in items:
        total = render_guard.binop("+", total, item)
    return total


def _filter_round(value: float, precision: int = 0, method: str = "common") -> float:
    if not -_MAX_ROUND_DIGITS <= int(precision) <= _MAX_ROUND_DIGITS:
        raise SecurityError(f"round precision {precision} is out of range "
                            f"{-_MAX_ROUND_DIGITS}-{_MAX_ROUND_DIGITS}")
    result: float = JINJA_FILTERS["round"](value, precision, method)
    return result


_OWN_FILTERS: dict[str, Callable[..., Any]] = {
    "truncate": _filter_truncate,
    "tojson": _filter_tojson,
    "title": _filter_title,
    "regex_search": _filter_regex_search,
    "search": _search,
    "replace": _filter_replace,
    "join": _filter_join,
    "sum": _filter_sum,
    "round": _filter_round,
}


def _guarded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """The filter, with the render's clock checked and its input and output sized."""
    leading = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0
    stringifies = name not in _NOT_STRINGIFYING

    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        render_guard.tick()
        if stringifies and len(args) > leading:
            render_guard.check_weight(args[leading], f"the {name} filter's input")
        result = func(*args, **kwargs)
        render_guard.check_result(result, f"the {name} filter")
        return result

    return guarded


def _guarded_test(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        render_guard.tick()
        return func(*args, **kwargs)

    return guarded


# --- the environment -----------------------------------------------------------------


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


class DurableSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with an allow-list of attributes, and the guard's
    checks on every call, operator, loop iteration and output."""

    intercepted_binops = frozenset({"+", "-", "*", "/", "//", "%", "**"})

    def __init__(self) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False,
                         keep_trailing_newline=True, finalize=_finalize,
                         # No compile-time constant folding: it would call filters and
                         # operators outside any render's bounds.
                         optimized=False)
        self.globals.clear()
        self.globals.update(_GLOBALS)
        filters = {name: JINJA_FILTERS[name] for name in _JINJA_FILTERS}
        filters.update(_OWN_FILTERS)
        self.filters = {name: _guarded_filter(name, f) for name, f in filters.items()}
        tests: dict[str, Any] = dict(JINJA_TESTS)
        tests["search"] = _search
        self.tests = {name: _guarded_test(t) for name, t in tests.items()}

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


ENV: DurableSandbox = DurableSandbox()

# Names a template may use without the context providing them.
KNOWN_GLOBALS: frozenset[str] = frozenset(ENV.globals)


def _syntax_problem(error: TemplateSyntaxError) -> str:
    return f"template syntax error on line {error.lineno}: {error.message}"


@lru_cache(maxsize=_TEMPLATE_CACHE_SIZE)
def _compile(source: str) -> Template:
    # Compiling (not just parsing) also rejects unknown filters and tests.
    return ENV.from_string(source)


@lru_cache(maxsize=_TEMPLATE_CACHE_SIZE)
def _parse(source: str) -> nodes.Template:
    return ENV.parse(source)


def _compiled(source: str, where: str) -> Template:
    try:
        return _compile(source)
    except TemplateSyntaxError as error:
        raise TemplateError(where, _syntax_problem(error)) from error
    except (RecursionError, SyntaxError):
        # Jinja's parser and Python's compiler recurse: thousands of nested brackets
        # or blocks are a clear refusal, not a RecursionError traceback.
        raise TemplateError(where, "template nested too deeply to compile") from None


def _render_problem(error: Exception) -> str:
    if isinstance(error, RenderLimitExceeded):
        return str(error)
    if isinstance(error, SecurityError):
        return f"unsafe operation blocked by the template sandbox: {error}"
    if isinstance(error, UndefinedError):
        return f"undefined value in template: {error.message}"
    if isinstance(error, RecursionError):
        return "template rendering failed: recursion too deep"
    return f"template rendering failed: {type(error).__name__}: {error}"


def _clean(text: str) -> str:
    return unicodedata.normalize("NFC", _CONTROL_CHARS.sub("", text))


def render(template: str, context: Mapping[str, Any], where: str,
           limits: Limits | None = None, max_chars: int | None = None,
           max_chars_name: str = render_guard.RENDER_CHARS_NAME) -> str:
    """Render `template` with `context`; any failure is a TemplateError naming `where`,
    over a limit too (the message names the limit's DURABLE_* variable). `max_chars`
    replaces DURABLE_MAX_RENDER_CHARS as the budget (artifacts have their own)."""
    compiled = _compiled(template, where)
    try:
        with rendering(limits, max_chars, max_chars_name):
            rendered = compiled.render(dict(context))
    except Exception as error:  # the template author's fault whatever the type
        raise TemplateError(where, _render_problem(error)) from error
    return _clean(rendered)


def condition_source(expr: str) -> str:
    """The template text a graph `when` stands for: bare expressions get wrapped."""
    stripped = expr.strip()
    if "{{" in stripped or "{%" in stripped:
        return stripped
    return "{{ " + stripped + " }}"


def _is_single_expression(source: str) -> bool:
    """Whether the template is exactly one `{{ ... }}` and nothing else."""
    body = _parse(source).body
    if len(body) != 1 or not isinstance(body[0], nodes.Output):
        return False
    parts = body[0].nodes
    return len(parts) == 1 and not isinstance(parts[0], nodes.TemplateData)


def _truthy_text(text: str, where: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise TemplateError(where, f"condition rendered {text.strip()[:200]!r}, "
                               "not true or false")


def render_condition(expr: str, context: Mapping[str, Any], where: str,
                     limits: Limits | None = None) -> bool:
    """Evaluate a graph edge `when` ("{{ x >= 3 }}" or bare "x >= 3") to a bool.

    A single `{{ expression }}` is evaluated as a value and tested for truth (so
    StrictUndefined still fails loudly); any other template is rendered and its
    text read as true/false. "else" is always True.
    """
    if expr.strip().lower() == "else":
        return True
    source = condition_source(expr)
    _compiled(source, where)
    inner = _single_expression_text(source)
    if inner is None:
        return _truthy_text(render(source, context, where, limits), where)
    try:
        with rendering(limits):
            return bool(_expression(inner)(dict(context)))
    except Exception as error:  # the condition author's fault whatever the type
        raise TemplateError(where, _render_problem(error)) from error


def _single_expression_text(source: str) -> str | None:
    """The inside of a template that is exactly one `{{ expression }}`, else None."""
    match = _WRAPPED.match(source)
    if match is None or not _is_single_expression(source):
        return None
    return match.group("inner")


@lru_cache(maxsize=_TEMPLATE_CACHE_SIZE)
def _expression(inner: str) -> Any:
    return ENV.compile_expression(inner, undefined_to_none=False)


# Names Jinja itself puts in a template's scope.
_JINJA_OBJECTS = frozenset({"loop", "self", "caller", "varargs", "kwargs"})


def sandbox_problem(template: str) -> str | None:
    """What the sandbox would refuse in `template`, found without rendering it (so at
    load time, even in a step that renders later): a `__dunder__` name, an attribute of
    a global such as `str.format`, or a private one of Jinja's `loop` or `self`."""
    for node in _parse(template).find_all((nodes.Getattr, nodes.Getitem)):
        assert isinstance(node, nodes.Getattr | nodes.Getitem)
        if isinstance(node, nodes.Getattr):
            name: Any = node.attr
        elif isinstance(node.arg, nodes.Const):
            name = node.arg.value
        else:
            continue
        if isinstance(name, str) and name.startswith("__"):
            return (f"unsafe: {name!r} is not available in templates (templates read "
                    "data, not Python internals)")
        target = node.node
        if isinstance(target, nodes.Name) and target.name in _GLOBALS:
            return f"unsafe: {target.name}.{name} is not available in templates " \
                f"({target.name} may only be called)"
        if isinstance(target, nodes.Name) and target.name in _JINJA_OBJECTS \
                and isinstance(name, str) and name.startswith("_"):
            return f"unsafe: {target.name}.{name} is not available in templates"
    return None


def undeclared_names(template: str, where: str = "template") -> set[str]:
    """Names `template` reads from its context (syntax errors and what the sandbox
    would refuse raise TemplateError)."""
    _compiled(template, where)
    problem = sandbox_problem(template)
    if problem is not None:
        raise TemplateError(where, problem)
    return set(meta.find_undeclared_variables(_parse(template)))


def undeclared_condition_names(expr: str, where: str = "condition") -> set[str]:
    """Like undeclared_names, for a graph `when` ("else" reads nothing)."""
    if expr.strip().lower() == "else":
        return set()
    return undeclared_names(condition_source(expr), where)
