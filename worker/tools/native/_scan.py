"""Pattern search over a file's lines for grep and search: the model's regex runs with a
time budget (the `regex` module's timeout), so a catastrophic pattern ends as an error."""

from __future__ import annotations

import time
from typing import Any

import regex

from strands_durable.worker.tools.native._common import ToolArgError

__all__ = ["MAX_MATCHES", "SEARCH_BUDGET_S", "Scan", "compile_pattern"]

MAX_MATCHES = 1000
SEARCH_BUDGET_S = 10.0
MAX_PATTERN_CHARS = 1000


def compile_pattern(text: str, ignore_case: bool, literal: bool = False) -> Any:
    if not text:
        raise ToolArgError("No search pattern provided")
    if len(text) > MAX_PATTERN_CHARS:
        raise ToolArgError(f"The pattern is longer than {MAX_PATTERN_CHARS} characters")
    try:
        return regex.compile(regex.escape(text) if literal else text,
                             regex.IGNORECASE if ignore_case else 0)
    except regex.error as exc:
        raise ToolArgError(f"Invalid regex pattern: {exc}") from None


class Scan:
    """One search's time budget, shared by every match call it makes."""

    def __init__(self, pattern: Any, budget_s: float) -> None:
        self.pattern = pattern
        self._deadline = time.monotonic() + budget_s
        self._budget_s = budget_s

    def _left(self) -> float:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def _timed(self, call: Any, *args: Any) -> Any:
        try:
            return call(*args, timeout=self._left())
        except TimeoutError:
            raise ToolArgError(f"The search took longer than {self._budget_s:g} s; "
                               "simplify the pattern") from None

    def matching(self, lines: list[str], limit: int) -> list[int]:
        """Indices of the first `limit` lines the pattern matches."""
        found: list[int] = []
        for index, line in enumerate(lines):
            if self._timed(self.pattern.search, line) is not None:
                found.append(index)
                if len(found) >= limit:
                    break
        return found

    def highlight(self, line: str) -> str:
        return str(self._timed(self.pattern.sub, lambda m: f">>>{m.group()}<<<", line))
