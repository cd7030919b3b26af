"""Budgets (runtime.budgets): pure checks of a session's spend against its limits.

Exceeding one pauses the session with the reason; `durable resume --set
budgets.max_tokens=N` raises a limit and continues. Tokens and time are known only once
spent, so they pause once over the limit; steps are counted before they run, so
max_steps pauses once reached (N steps run, never N + 1). A graph has a step budget even
without one in the spec: strands-cli's 100, its guard against endless loops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from strands_durable.patterns import pattern_for
from strands_durable.spec.model import Spec

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
    # A pattern may bound its steps without budgets.max_steps (graph: strands-cli's 100).
    default_max_steps = pattern_for(spec.pattern.type).default_max_steps
    if default_max_steps is not None:
        found.setdefault("max_steps", default_max_steps)
    return found


def exceeded(spend: Spend, in_force: Mapping[str, int]) -> str | None:
    """The reason the spend is over a limit, or None."""
    checks = (("max_tokens", spend.tokens, "tokens"), ("max_steps", spend.steps, "steps"),
              ("max_duration_s", spend.duration_s, "seconds"))
    for name, used, unit in checks:
        limit = in_force.get(name)
        if limit is None:
            continue
        # A step budget is checked before the next step runs: reaching it stops that one.
        steps = name == "max_steps"
        if used >= limit if steps else used > limit:
            shown = f"{used:.0f}" if isinstance(used, float) else str(used)
            verb = "reached" if steps else "exceeded"
            return (f"budget {name} {verb}: {shown} {unit} used, limit {limit} "
                    f"(resume with a higher budgets.{name})")
    return None
