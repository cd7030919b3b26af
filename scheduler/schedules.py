"""Schedules' decisions, pure (no Redis, no clock of their own): is a cron expression, a
time zone, a jitter, an overlap policy, a catch-up window acceptable; which ticks of a
schedule fall between the last tick handled and now, which of them fire and which are
skipped as outside the catch-up window; what the overlap policy does with them given
whether the previous run is still going. scheduler/schedule_clock.py does the I/O.

Ticks are instants (epoch ms). croniter walks the schedule in its time zone, so DST is
the zone's: a wall time that does not exist (spring forward) fires at the first moment
after it; a wall time that happens twice (fall back) fires once for an expression with a
fixed hour, and each real hour for one whose hour field is `*` or `*/n`, as Vixie cron.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterError

from strands_durable.errors import InvalidInput

MAX_CRON_CHARS = 120
MAX_TIMEZONE_CHARS = 64
MAX_JITTER_S = 3_600
DEFAULT_CATCHUP_S = 300
MIN_CATCHUP_S = 1
MAX_CATCHUP_S = 366 * 86_400
MAX_TICKS_PER_ROUND = 1_000  # ticks one round walks at most; the next round goes on
MAX_YEARS_BETWEEN = 5  # a cron that never matches (Feb 30) fails fast, not after 50 years
_RANDOM = re.compile(r"[RrHh](\(|/|$)")  # croniter's R(...) and H(...): not the same twice
ALIASES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


class InvalidSchedule(InvalidInput):
    """A schedule's option is not acceptable; the message names it and what it takes."""

    code = "invalid_schedule"

    def __init__(self, option: str, problem: str) -> None:
        self.option = option
        self.problem = problem
        super().__init__(f"{option}: {problem}")

    def details(self) -> dict[str, object]:
        return {"option": self.option}


class Overlap(StrEnum):
    """What a tick does while the schedule's previous run is still going."""

    SKIP = "skip"  # the tick is skipped
    BUFFER_ONE = "buffer_one"  # one tick waits for the run to end; later ones are skipped
    CANCEL_OTHER = "cancel_other"  # the running one is cancelled, the tick starts
    ALLOW = "allow"  # the tick starts anyway


class Action(StrEnum):
    START = "start"
    SKIP = "skip"
    BUFFER = "buffer"
    CANCEL_THEN_START = "cancel_then_start"


def _shown(value: str, limit: int = 40) -> str:
    return repr(value[:limit]) + ("..." if len(value) > limit else "")


# -- checks ----------------------------------------------------------------------------
def check_cron(expr: str) -> str:
    """A 5-field cron expression (minute hour day month weekday), a 6th field of
    seconds, or an alias (@hourly, @daily, ...); one that never matches is refused."""
    text = " ".join(expr.split()) if isinstance(expr, str) else ""
    if not text or len(text) > MAX_CRON_CHARS or not text.isprintable():
        raise InvalidSchedule("--cron", f"{_shown(str(expr))} is not a cron expression "
                              f"(1 to {MAX_CRON_CHARS} printable characters)")
    if not (text in ALIASES or len(text.split()) in (5, 6)):
        raise InvalidSchedule("--cron", f"{_shown(text)}: expected 5 fields (minute hour "
                              "day month weekday), 6 (then seconds) or an alias such as "
                              "@hourly")
    if any(_RANDOM.match(part) for field in text.split() for part in field.split(",")):
        raise InvalidSchedule("--cron", f"{_shown(text)}: random (R) and hashed (H) fields "
                              "are not supported: every scheduler replica must compute the "
                              "same ticks")
    try:
        croniter(text, datetime(2026, 1, 1, tzinfo=ZoneInfo("UTC")),
                 max_years_between_matches=MAX_YEARS_BETWEEN).get_next(datetime)
    except CroniterError as exc:
        problem = "never matches" if "find next" in str(exc) else str(exc)[:120]
        raise InvalidSchedule("--cron", f"{_shown(text)}: {problem}") from None
    except (ValueError, TypeError, OverflowError, KeyError, IndexError) as exc:
        raise InvalidSchedule("--cron", f"{_shown(text)}: {str(exc)[:120]}") from None
    return text


def check_timezone(name: str) -> str:
    """An IANA time zone name (Europe/Paris, UTC)."""
    ok = (isinstance(name, str) and 0 < len(name) <= MAX_TIMEZONE_CHARS
          and name.isprintable() and ".." not in name and not name.startswith("/"))
    try:
        if ok:
            ZoneInfo(name)
            return name
    except (ZoneInfoNotFoundError, ValueError, OSError):
        pass
    raise InvalidSchedule("--timezone", f"{_shown(str(name))} is not a known time zone "
                          "(an IANA name such as UTC or Europe/Paris)")


def check_overlap(value: str) -> Overlap:
    try:
        return Overlap(value)
    except ValueError:
        raise InvalidSchedule("--overlap", f"{_shown(str(value))}: expected one of "
                              f"{', '.join(Overlap)}") from None


def check_seconds(option: str, value: int, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidSchedule(option, f"{value!r}: expected a whole number of seconds "
                              f"from {low} to {high}")
    return value


# -- ticks -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Timing:
    """What decides a schedule's ticks (the stored schedule's fields)."""

    name: str
    cron: str
    timezone: str
    jitter_s: int = 0
    catchup_window_s: int = DEFAULT_CATCHUP_S


def _fixed_hour(cron: str) -> bool:
    """Whether the expression's hour field names hours (then a fall-back repeat of a wall
    time is not a new tick)."""
    parts = cron.split()
    if len(parts) < 5:
        return cron not in ("@hourly",)
    return not (parts[1] == "*" or parts[1].startswith("*/"))


def ticks_after(timing: Timing, after_ms: int, until_ms: int | None = None,
                limit: int = MAX_TICKS_PER_ROUND) -> list[int]:
    """The schedule's ticks strictly after `after_ms`, up to `until_ms` (inclusive) and
    at most `limit` of them, in order."""
    tz = ZoneInfo(timing.timezone)
    start = datetime.fromtimestamp(after_ms / 1000, tz)
    walk = croniter(timing.cron, start, max_years_between_matches=MAX_YEARS_BETWEEN)
    fixed = _fixed_hour(timing.cron)
    last_wall = start.replace(tzinfo=None)
    found: list[int] = []
    while len(found) < limit:
        try:
            moment: datetime = walk.get_next(datetime)
        except CroniterError:
            break
        tick = round(moment.timestamp() * 1000)
        if until_ms is not None and tick > until_ms:
            break
        wall = moment.replace(tzinfo=None)
        if fixed and wall <= last_wall:
            continue  # the repeated wall hour of a fall back: fired already
        last_wall = wall
        if tick > after_ms:
            found.append(tick)
    return found


def next_fire_times(timing: Timing, now_ms: int, count: int = 5) -> list[int]:
    """The next `count` ticks after `now_ms`, each with its jitter added."""
    return [t + jitter_ms(timing.name, t, timing.jitter_s)
            for t in ticks_after(timing, now_ms, limit=count)]


def jitter_ms(name: str, tick_ms: int, jitter_s: int) -> int:
    """The delay of a tick: in [0, jitter_s) seconds, the same for every replica (a
    digest of the schedule's name and the tick), so any leader fires it at one time."""
    if jitter_s <= 0:
        return 0
    return zlib.crc32(f"{name}\0{tick_ms}".encode()) % (jitter_s * 1000)


@dataclass(frozen=True)
class TickPlan:
    """One round's reading of a schedule: ticks due to fire (in order), ticks skipped
    as too late (the newest `kept` of them), how many more were skipped, and the last
    tick handled after the round (the cursor)."""

    fire: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    skipped_more: int = 0
    cursor: int = 0


def plan_ticks(timing: Timing, cursor_ms: int, now_ms: int, kept: int = 50) -> TickPlan:
    """The ticks after `cursor_ms` that are due by `now_ms` (their jitter passed): those
    due within the catch-up window fire, older ones are skipped. A tick whose jitter has
    not passed stops the walk (it and those after wait for a later round)."""
    window_ms = timing.catchup_window_s * 1000
    fire: list[int] = []
    skipped: list[int] = []
    cursor = cursor_ms
    for tick in ticks_after(timing, cursor_ms, until_ms=now_ms):
        due = tick + jitter_ms(timing.name, tick, timing.jitter_s)
        if due > now_ms:
            break
        (skipped if now_ms - due > window_ms else fire).append(tick)
        cursor = tick
    return TickPlan(fire=fire, skipped=skipped[-kept:] if kept else [],
                    skipped_more=max(0, len(skipped) - kept), cursor=cursor)


# -- overlap ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    tick_ms: int
    action: Action
    reason: str = ""


def decide_overlap(policy: Overlap, ticks: list[int], previous_active: bool,
                   buffered: bool) -> list[Decision]:
    """What each tick of a round does, in order: `previous_active` says whether the
    schedule's latest run is still going (running or paused), `buffered` whether a tick
    already waits for it. A tick started in this round counts as going for the next."""
    if policy == Overlap.ALLOW:
        return [Decision(t, Action.START) for t in ticks]
    if policy == Overlap.CANCEL_OTHER:
        # Each would cancel the one before: only the newest starts.
        return ([Decision(t, Action.SKIP, "superseded by a later tick") for t in ticks[:-1]]
                + [Decision(t, Action.CANCEL_THEN_START) for t in ticks[-1:]])
    decisions: list[Decision] = []
    active = previous_active
    for tick in ticks:
        if not active:
            decisions.append(Decision(tick, Action.START))
            active = True
        elif policy == Overlap.BUFFER_ONE and not buffered:
            decisions.append(Decision(tick, Action.BUFFER, "waits for the previous run"))
            buffered = True
        else:
            decisions.append(Decision(tick, Action.SKIP, "the previous run is still going"))
    return decisions
