"""Crash points for recovery drills: end this process abruptly at an exact place in a
step's life, as a power cut or OOM kill would, so tests can prove that a crash at any
step boundary (or in the middle of a step) loses nothing and commits nothing twice.

`DURABLE_CRASH_AT=<point>:<n>` crashes at the n-th time this process reaches <point>:
- `after_gate`: the step was claimed and admitted, its agent call not yet made;
- `before_commit`: the agent call returned, its result not yet committed;
- `after_commit`: the step's result and next steps are committed.
Unset (the default), every check is a single comparison.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter

log = logging.getLogger("durable.worker")

POINTS = ("after_gate", "before_commit", "after_commit")
CRASH_EXIT_CODE = 137  # what a SIGKILLed process reports


class CrashPoints:
    def __init__(self, spec: str = "") -> None:
        self.point, self.nth = parse(spec) if spec else ("", 0)
        self.seen: Counter[str] = Counter()

    def reached(self, point: str) -> None:
        if point != self.point:
            return
        self.seen[point] += 1
        if self.seen[point] == self.nth:
            log.warning("crash point %s:%d reached; exiting now", point, self.nth)
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stdout.flush()
            os._exit(CRASH_EXIT_CODE)  # no cleanup, no ack, no hand-back: a real crash


def parse(spec: str) -> tuple[str, int]:
    point, _, count = spec.partition(":")
    if point not in POINTS or not count.isdigit() or int(count) < 1:
        raise ValueError(f"DURABLE_CRASH_AT={spec!r}: expected <point>:<n> with point one of "
                         f"{', '.join(POINTS)} and n >= 1")
    return point, int(count)
