"""Budgets (runtime.budgets): pure checks of a session's spend against its limits.

Exceeding one pauses the session with the reason; `durable resume --set
budgets.max_tokens=N` raises a limit and continues.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scheduler.spec import Spec

BUDGET_NAMES = ("max_tokens", "max_steps", "max_duration_s")


@dataclass(frozen=True)
class Spend:
    tokens: int
    steps: int
    duration_s: float


def limits(spec: Spec, overrides: Mapping[str, int]) -> dict[str, int]:
    """The limits in force: the spec's budgets with operator overrides on top."""
    budgets = spec.runtime.budgets
    found: dict[str, int] = {}
    for name in BUDGET_NAMES:
        value = overrides.get(name, getattr(budgets, name, None) if budgets else None)
        if value is not None:
            found[name] = int(value)
    return found


def exceeded(spend: Spend, in_force: Mapping[str, int]) -> str | None:
    """The reason the spend is over a limit, or None."""
    checks = (("max_tokens", spend.tokens, "tokens"), ("max_steps", spend.steps, "steps"),
              ("max_duration_s", spend.duration_s, "seconds"))
    for name, used, unit in checks:
        limit = in_force.get(name)
        if limit is not None and used > limit:
            shown = f"{used:.0f}" if isinstance(used, float) else str(used)
            return (f"budget {name} exceeded: {shown} {unit} used, limit {limit} "
                    f"(raise it with `durable resume SID --set budgets.{name}=N`)")
    return None
