"""The bounds of one template render: a deadline and a character budget.

Jinja compiles a template to Python, so a render can only be stopped from inside: the
sandbox (spec/sandbox.py) routes every call, arithmetic operator, loop
iteration, `~` concatenation, filter and `{{ output }}` through this module, which
checks the clock and sizes what is about to be built *before* building it.

Why that is a hard bound and not only a cooperative one: between two checks a
render executes one of those operations, and each is refused up front when its
result would be larger than DURABLE_MAX_RENDER_CHARS characters (or an integer
larger than MAX_INT_BITS bits, e.g. `9**(9**7)`). Every value a template holds was
built by a checked operation or came from the (bounded) spec and step results, so
one operation costs time linear in a bounded size, and a render ends within one
such operation of DURABLE_RENDER_TIMEOUT_S. Regular expressions from a spec run with
the remaining time as their own timeout (the `regex` module's), since one search can
backtrack for minutes. Literal text inside a loop is counted per iteration, because
Jinja writes it out with no hook of its own.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2.runtime import Undefined
from jinja2.sandbox import SecurityError

from strands_durable.settings import Limits, current_limits

# Integers a template computes stay under this many bits (about 19,700 digits).
MAX_INT_BITS = 65_536
# A value of unknown kind (a function, a macro) counts as this many characters.
_OTHER_WEIGHT = 64

_BINOPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow,
}


class RenderLimitExceeded(Exception):
    """A render went over DURABLE_RENDER_TIMEOUT_S or DURABLE_MAX_RENDER_CHARS."""


class LoopBudgetSpent(BaseException):
    """A render inside `on_the_loop` ran past the loop's short budget: the worker plans
    that commit again in a thread, under the render's own limits. A BaseException, so
    that no handler takes it for the template's fault (a TemplateError fails the
    session)."""


RENDER_CHARS_NAME = "DURABLE_MAX_RENDER_CHARS"


@dataclass
class Budget:
    limits: Limits
    deadline: float
    max_chars: int
    max_chars_name: str = RENDER_CHARS_NAME  # what a refusal names
    emitted: int = 0
    on_loop: bool = False  # the deadline is the event loop's budget, not the render's

    def tick(self) -> None:
        if time.monotonic() > self.deadline:
            self.expired()

    def expired(self) -> None:
        if self.on_loop:
            raise LoopBudgetSpent
        raise RenderLimitExceeded(
            f"template rendering took longer than {self.limits.render_timeout_s:g} s "
            "(DURABLE_RENDER_TIMEOUT_S) and was stopped")

    def seconds_left(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)


_BUDGET: ContextVar[Budget | None] = ContextVar("durable_render_budget", default=None)
_LOOP_UNTIL: ContextVar[float | None] = ContextVar("durable_loop_until", default=None)


@contextmanager
def on_the_loop(seconds: float) -> Iterator[None]:
    """Renders inside the block (on an event loop) stop with LoopBudgetSpent once
    `seconds` have passed; their own limits hold as ever within that."""
    token = _LOOP_UNTIL.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _LOOP_UNTIL.reset(token)


@contextmanager
def rendering(limits: Limits | None = None, max_chars: int | None = None,
              max_chars_name: str = RENDER_CHARS_NAME) -> Iterator[Budget]:
    """The bounds of one render, for whatever renders inside the block: the limits'
    deadline (or the event loop's budget, when it comes first), and their character
    budget unless `max_chars` (named by `max_chars_name`) replaces it."""
    limits = limits or current_limits()
    deadline = time.monotonic() + limits.render_timeout_s
    loop_until, on_loop = _LOOP_UNTIL.get(), False
    if loop_until is not None and loop_until < deadline:
        deadline, on_loop = loop_until, True
    active = Budget(limits, deadline,
                    limits.max_render_chars if max_chars is None else max_chars,
                    max_chars_name, on_loop=on_loop)
    token = _BUDGET.set(active)
    try:
        yield active
    finally:
        _BUDGET.reset(token)


def budget() -> Budget:
    active = _BUDGET.get()
    if active is None:
        raise RuntimeError("a template was evaluated outside templates.render()")
    return active


def tick() -> None:
    budget().tick()


def _too_large(size: int, what: str) -> RenderLimitExceeded:
    active = budget()
    return RenderLimitExceeded(
        f"{what} would be {size:,} characters; the limit is {active.max_chars:,} "
        f"({active.max_chars_name})")


def check_size(size: int, what: str) -> None:
    if size > budget().max_chars:
        raise _too_large(size, what)


def emit(chars: int) -> None:
    """Count characters the render writes out."""
    active = budget()
    active.emitted += chars
    if active.emitted > active.max_chars:
        raise _too_large(active.emitted, "the rendered text")


def weight(value: Any, limit: int) -> int:
    """About how many characters `value` becomes as text; stops counting past `limit`.
    Shared references count each time (a list of one string a million times weighs
    a million strings), which is what printing it would cost."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += item.bit_length() // 3 + 2
        elif isinstance(item, float):
            total += 24
        elif isinstance(item, Undefined):
            continue
        elif isinstance(item, Mapping):
            total += 2 + 4 * len(item)
            for key, val in item.items():
                stack.append(key)
                stack.append(val)
        elif isinstance(item, Collection):
            total += 2 + 2 * len(item)
            stack.extend(item)
        else:
            total += _OTHER_WEIGHT
        if total > limit:
            return total
    return total


def check_weight(value: Any, what: str) -> None:
    limit = budget().max_chars
    size = weight(value, limit)
    if size > limit:
        raise _too_large(size, what)


def as_text(value: Any, what: str) -> str:
    """`value` as text, refused before conversion when the text would be too large."""
    if isinstance(value, str):
        return value
    if isinstance(value, Undefined):
        return str(value)  # StrictUndefined raises its own error
    check_weight(value, what)
    text = str(value)
    check_size(len(text), what)
    return text


def check_result(result: Any, what: str) -> None:
    if isinstance(result, str | list | tuple):
        check_size(len(result), what)
    elif isinstance(result, int) and result.bit_length() > MAX_INT_BITS:
        raise _too_large_int(what)


def _too_large_int(what: str) -> SecurityError:
    return SecurityError(f"{what} would be an integer over {MAX_INT_BITS} bits")


def check_replace(text: str, old: str, new: str, count: int | None) -> None:
    occurrences = text.count(old)
    if count is not None and count >= 0:
        occurrences = min(occurrences, count)
    check_size(len(text) + occurrences * (len(new) - len(old)), "replace")


# Callables that turn their argument into a new text or collection.
_CONVERTERS: frozenset[Any] = frozenset({str, list, tuple, set})


def check_call(func: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> None:
    """Size what a call would build, before it runs."""
    if func in _CONVERTERS:
        for arg in args:
            check_weight(arg, f"{func.__name__}()")
        return
    owner = getattr(func, "__self__", None)
    if isinstance(owner, str) and getattr(func, "__name__", "") == "replace" and len(args) >= 2:
        count = args[2] if len(args) > 2 else kwargs.get("count")
        check_replace(owner, str(args[0]), str(args[1]),
                      count if isinstance(count, int) else None)


def _repeat_size(seq: Any, times: Any) -> int | None:
    """Size of `seq * times` for text or a list; None when that is not what it is."""
    if not isinstance(times, int) or isinstance(seq, int | float):
        return None
    if isinstance(seq, str):
        return len(seq) * max(times, 0)
    if isinstance(seq, list | tuple):
        return weight(seq, budget().max_chars) * max(times, 0)
    return None


def binop(op: str, left: Any, right: Any) -> Any:
    """`left op right`, refused when the result would be over the limits."""
    tick()
    if op == "%" and isinstance(left, str):
        raise SecurityError("the % operator does not format text in templates; "
                            "join text with ~")
    if op == "*":
        size = _repeat_size(left, right)
        if size is None:
            size = _repeat_size(right, left)
        if size is not None:
            check_size(size, "the product")
        elif isinstance(left, int) and isinstance(right, int) \
                and left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise _too_large_int("the product")
    elif op == "**" and isinstance(left, int) and isinstance(right, int) \
            and right > 0 and abs(left) > 1 \
            and right * (abs(left).bit_length() - 1) > MAX_INT_BITS:
        raise _too_large_int("the power")
    elif op == "+":
        if isinstance(left, str) and isinstance(right, str):
            check_size(len(left) + len(right), "the sum")
        elif isinstance(left, list | tuple) and isinstance(right, list | tuple):
            limit = budget().max_chars
            check_size(weight(left, limit) + weight(right, limit), "the sum")
    result = _BINOPS[op](left, right)
    check_result(result, f"the result of {op}")
    return result


def guarded_iter(iterable: Any, text_per_item: int) -> Iterator[Any]:
    """A loop's items, each one checking the clock and counting the literal text the
    loop body writes for it."""
    active = budget()
    for item in iterable:
        active.tick()
        if text_per_item:
            emit(text_per_item)
        yield item
