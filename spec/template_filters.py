"""What a template may read and call: the read-only methods of data, the globals, and
the filters (Jinja's safe ones and strands-cli's own, with its semantics), each wrapped
so the render guard checks the clock and sizes its input and output
(spec/render_guard.py; the sandbox that uses these is sandbox.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any

import regex
from jinja2 import Environment
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.filters import make_attrgetter
from jinja2.runtime import Undefined
from jinja2.sandbox import SecurityError
from jinja2.utils import pass_environment

from strands_durable.spec import render_guard
from strands_durable.spec.render_guard import budget

__all__ = [
    "GLOBALS",
    "JINJA_FILTER_NAMES",
    "LOOP_ATTRIBUTES",
    "MAPPING_METHODS",
    "OWN_FILTERS",
    "SEQUENCE_METHODS",
    "STR_METHODS",
    "guarded_filter",
    "guarded_test",
    "search",
]


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
GLOBALS: dict[str, Callable[..., Any]] = {
    "len": len, "str": str, "int": int, "float": float, "bool": bool, "list": list,
    "tuple": tuple, "set": set,
}
# Jinja's filters a template may use (strands-cli's own are added below). Left out:
# those that walk attributes by name (attr, groupby), format (format, the % operator),
# multiply text by an argument (center, indent, wordwrap, batch, slice), or are no
# use for prompts (escape, safe, urlize, xmlattr, pprint, random, filesizeformat...).
JINJA_FILTER_NAMES = _names(
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


def search(value: Any, pattern: str) -> bool:
    """strands-cli graph conditions use `x | search('re')` and `x is search('re')`."""
    return _regex_search(pattern, str(value)) is not None


# --- bounded versions of Jinja filters that can amplify ------------------------------


def _filter_replace(value: Any, old: str, new: str, count: int | None = None) -> str:
    text, old, new = str(value), str(old), str(new)
    render_guard.check_replace(text, old, new, count)
    return text.replace(old, new, -1 if count is None else count)


@pass_environment
def _filter_join(env: Environment, value: Iterable[Any], d: str = "",
                 attribute: str | int | None = None) -> str:
    items = list(value)
    if attribute is not None:
        items = list(map(make_attrgetter(env, attribute), items))
    parts = [render_guard.as_text(item, "join") for item in items]
    render_guard.check_size(sum(map(len, parts)) + max(len(parts) - 1, 0) * len(str(d)),
                            "join")
    return str(d).join(parts)


@pass_environment
def _filter_sum(env: Environment, iterable: Iterable[Any], attribute: str | int | None = None,
                start: int | float = 0) -> int | float:
    items = list(iterable)
    if attribute is not None:
        items = list(map(make_attrgetter(env, attribute), items))
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


OWN_FILTERS: dict[str, Callable[..., Any]] = {
    "truncate": _filter_truncate,
    "tojson": _filter_tojson,
    "title": _filter_title,
    "regex_search": _filter_regex_search,
    "search": search,
    "replace": _filter_replace,
    "join": _filter_join,
    "sum": _filter_sum,
    "round": _filter_round,
}


def guarded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
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


def guarded_test(func: Callable[..., Any]) -> Callable[..., Any]:
    @wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        render_guard.tick()
        return func(*args, **kwargs)

    return guarded


