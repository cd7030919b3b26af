"""Jinja2 templates in a sandbox, with the filters and names strands-cli specs rely on.

One module-level environment serves every render: StrictUndefined (a typo fails loudly
instead of rendering an empty string), no autoescape (prompts are not HTML), and the
strands-cli custom filters (`truncate`, `tojson`, `title`, `regex_search`) replacing
Jinja's own where the semantics differ. Compiled templates are cached by source
text because the same step template renders once per step, session after session.

What a template may touch is an allow-list: data (strings, numbers, lists, mappings)
and a few read-only methods of it, the globals and filters of template_filters.py, and
the `loop` variable; the sandbox that enforces it is sandbox.py. No route (`str.format`,
`|attr`, `cycler.__init__`, `self._TemplateReference__context`...) walks from a
template to Python internals and the process's environment.

Every render is bounded (see render_guard): its wall time (DURABLE_RENDER_TIMEOUT_S)
and the characters it produces or builds (DURABLE_MAX_RENDER_CHARS).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import Template, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.sandbox import SecurityError

from strands_durable.errors import TemplateError
from strands_durable.settings import Limits, current_limits
from strands_durable.spec import render_guard
from strands_durable.spec.render_guard import RenderLimitExceeded, rendering
from strands_durable.spec.sandbox import DurableSandbox
from strands_durable.spec.template_filters import GLOBALS

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
    if _is_literal(template, limits, max_chars):
        return _clean(template)
    compiled = _compiled(template, where)
    try:
        with rendering(limits, max_chars, max_chars_name):
            rendered = compiled.render(dict(context))
    except Exception as error:  # the template author's fault whatever the type
        raise TemplateError(where, _render_problem(error)) from error
    return _clean(rendered)


def _is_literal(template: str, limits: Limits | None, max_chars: int | None) -> bool:
    """Text with no template syntax renders as itself: no `{` (every Jinja delimiter
    opens with one), no `\r` and no trailing newline (Jinja rewrites both), within the
    character budget. Such text skips the compile (a long chain's inputs are all
    distinct: one compile per step) and the render."""
    budget = max_chars if max_chars is not None else (limits or current_limits()).max_render_chars
    return not ("{" in template or "\r" in template or template.endswith("\n")
                or len(template) > budget)


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
        if isinstance(target, nodes.Name) and target.name in GLOBALS:
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


def literal_indexes(template: str, name: str) -> list[int]:
    """The whole-number indexes `template` reads of `name` as literals (`steps[5]`,
    `steps[-1]`): what a spec's check can hold against what will exist. A template that
    does not parse has none here (undeclared_names says why it does not)."""
    try:
        tree = _parse(template)
    except (TemplateSyntaxError, RecursionError, SyntaxError):
        return []
    found = []
    for item in tree.find_all(nodes.Getitem):
        if not (isinstance(item.node, nodes.Name) and item.node.name == name):
            continue
        arg, sign = item.arg, 1
        if isinstance(arg, nodes.Neg):  # steps[-2] parses as -(2)
            arg, sign = arg.node, -1
        if isinstance(arg, nodes.Const) and type(arg.value) is int:
            found.append(sign * arg.value)
    return found


def undeclared_condition_names(expr: str, where: str = "condition") -> set[str]:
    """Like undeclared_names, for a graph `when` ("else" reads nothing)."""
    if expr.strip().lower() == "else":
        return set()
    return undeclared_names(condition_source(expr), where)
