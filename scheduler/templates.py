"""Jinja2 templates in a sandbox, with the filters and names strands-cli specs rely on.

One module-level environment serves every render: StrictUndefined (a typo fails loudly
instead of rendering an empty string), no autoescape (prompts are not HTML), and the
strands-cli custom filters (`truncate`, `tojson`, `title`, `regex_search`) replacing
Jinja's own where the semantics differ. Compiled templates are cached by source
text because the same step template renders once per step, session after session.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateSyntaxError, UndefinedError, meta, nodes
from jinja2.sandbox import SandboxedEnvironment, SecurityError

from sessions.errors import TemplateError

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


def _filter_truncate(value: Any, length: int = 100) -> str:
    """strands-cli semantics: cut to `length` chars, the last three being '...'."""
    text = str(value)
    if len(text) <= length:
        return text
    return text[: max(length - 3, 0)] + "..."


def _filter_tojson(value: Any, indent: int | None = None) -> str:
    # Plain JSON (Jinja's own tojson HTML-escapes, which garbles prompts).
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _filter_title(value: Any) -> str:
    return str(value).title()


def _filter_regex_search(value: Any, pattern: str) -> str:
    """First capture group of `pattern` in `value` (case-insensitive), else ''."""
    match = re.search(pattern, str(value), re.IGNORECASE)
    if match and match.groups():
        return match.group(1) or ""
    return ""


def _search(value: Any, pattern: str) -> bool:
    """strands-cli graph conditions use `x | search('re')` and `x is search('re')`."""
    return re.search(pattern, str(value)) is not None


def _build_environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True
    )
    env.filters.update(
        truncate=_filter_truncate,
        tojson=_filter_tojson,
        title=_filter_title,
        regex_search=_filter_regex_search,
        search=_search,
    )
    env.tests["search"] = _search
    # strands-cli's condition evaluator exposes these builtins; harmless in the sandbox.
    env.globals.update(
        len=len, str=str, int=int, float=float, bool=bool, list=list, tuple=tuple, set=set
    )
    return env


ENV: SandboxedEnvironment = _build_environment()

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


def _render_problem(error: Exception) -> str:
    if isinstance(error, SecurityError):
        return f"unsafe operation blocked by the template sandbox: {error}"
    if isinstance(error, UndefinedError):
        return f"undefined value in template: {error.message}"
    return f"template rendering failed: {type(error).__name__}: {error}"


def _clean(text: str) -> str:
    return unicodedata.normalize("NFC", _CONTROL_CHARS.sub("", text))


def render(template: str, context: Mapping[str, Any], where: str) -> str:
    """Render `template` with `context`; any failure is a TemplateError naming `where`."""
    compiled = _compiled(template, where)
    try:
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
    raise TemplateError(where, f"condition rendered {text.strip()!r}, not true or false")


def render_condition(expr: str, context: Mapping[str, Any], where: str) -> bool:
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
        return _truthy_text(render(source, context, where), where)
    try:
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


def undeclared_names(template: str, where: str = "template") -> set[str]:
    """Names `template` reads from its context (syntax errors raise TemplateError)."""
    _compiled(template, where)
    return set(meta.find_undeclared_variables(_parse(template)))


def undeclared_condition_names(expr: str, where: str = "condition") -> set[str]:
    """Like undeclared_names, for a graph `when` ("else" reads nothing)."""
    if expr.strip().lower() == "else":
        return set()
    return undeclared_names(condition_source(expr), where)
