"""When a step consumer counts as dead, for fast failover (pure; the I/O is in
store/failover.py and worker/failover.py).

Every consumer beats on each shard it reads, from a thread of its own, every
`failover_beat_ms`: it writes a number that changes with each beat. An observer (every
worker's beat thread, and the scheduler's leader) reads the beats on each tick and keeps,
per consumer, the number it saw last and when, on its own monotonic clock, it saw it
change. A consumer whose number has not changed for `failover_missed_beats` beats of
watching is silent: the observer asks Redis to declare it dead, and the script does so
only if the number is still the one the observer saw (any beat since wins).

Judging by the observer's clock and by a change of number, never by timestamps written
by another host, makes the rule immune to clock skew between hosts and to a Redis clock
that jumps. An observer that could not watch continuously (its own tick came late, or
Redis did not answer) starts over for that shard: it never declares anyone dead from a
window it did not see, so a Redis outage or a stalled observer declares nobody dead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

# The consumer that a dead one's entries wait under until a worker takes them: a name
# no process takes (process names are [A-Za-z0-9._-] only: store/fleet.py).
HOLDER = "~orphans"
KEEP_DECLARATIONS_MS = 3_600_000  # `durable workers` shows a declaration for an hour


@dataclass(frozen=True)
class LivenessRule:
    beat_s: float
    missed_beats: int

    @classmethod
    def of(cls, beat_ms: int, missed_beats: int) -> LivenessRule:
        return cls(beat_ms / 1000, missed_beats)

    @property
    def dead_after_s(self) -> float:
        """Silence (as an observer watches it) after which a consumer is dead."""
        return self.beat_s * self.missed_beats

    @property
    def max_gap_s(self) -> float:
        """An observer whose ticks on a shard are further apart than this did not watch
        in between: it starts over there. Two beats, and at most half the silence."""
        return min(2 * self.beat_s, self.dead_after_s / 2)


def declaration_detail(silent_s: float, by: str) -> str:
    """The detail of a worker_declared_dead event."""
    return (f"no beat for {silent_s:.1f}s: declared dead by {by}; the step runs again on "
            "another worker")


@dataclass(frozen=True)
class Silent:
    """A consumer that an observer saw silent long enough to declare it dead."""

    consumer: str
    seq: str  # its beat number as the observer saw it last (the declaration's check)
    silent_s: float


@dataclass
class BeatWatch:
    """One observer's view of the beats on each shard it watches."""

    rule: LivenessRule
    # (shard, consumer) -> (beat number seen, when it was first seen with that number)
    _seen: dict[tuple[int, str], tuple[str, float]] = field(default_factory=dict)
    _last_tick: dict[int, float] = field(default_factory=dict)

    def observe(self, shard: int, beats: Mapping[str, str], now: float,
                ignore: Iterable[str] = ()) -> list[Silent]:
        """Take in the shard's beats read at `now` (monotonic seconds): the consumers
        silent for the rule's window, longest silent first (`ignore`d ones never)."""
        last = self._last_tick.get(shard)
        continuous = last is not None and now - last <= self.rule.max_gap_s
        self._last_tick[shard] = now
        for key in [k for k in self._seen if k[0] == shard and k[1] not in beats]:
            del self._seen[key]  # stopped, or declared dead: nothing to watch
        skip = set(ignore)
        silent = []
        for consumer, seq in beats.items():
            seen = self._seen.get((shard, consumer))
            since = seen[1] if continuous and seen is not None and seen[0] == seq else now
            self._seen[(shard, consumer)] = (seq, since)
            if consumer not in skip and now - since >= self.rule.dead_after_s:
                silent.append(Silent(consumer, seq, now - since))
        return sorted(silent, key=lambda s: -s.silent_s)

    def forget(self, shard: int, consumer: str) -> None:
        """After a declaration (ours or not): whatever it beats next is new to us."""
        self._seen.pop((shard, consumer), None)

    def lost_sight(self, shard: int) -> None:
        """The observer could not read the shard: what it saw before no longer counts."""
        self._last_tick.pop(shard, None)


@dataclass(frozen=True)
class Declaration:
    """A consumer declared dead on one shard, as declare_dead.lua recorded it (and
    claim_orphans.lua and beat.lua updated it)."""

    consumer: str
    at_ms: int  # Redis's clock
    by: str  # the worker or scheduler that declared it
    silent_ms: int  # how long the declarer saw no beat
    entries: int  # pending entries taken from it
    reruns: int  # of which a worker has taken to run again
    rerun_first_ms: int | None
    rerun_last_ms: int | None
    revived_ms: int | None  # it beat again afterwards (it was alive after all: a zombie)
    ids: tuple[str, ...] = ()  # the first entries taken

    @property
    def last_beat_ms(self) -> int:
        """About when it was last heard of (Redis's clock, the declarer's silence)."""
        return self.at_ms - self.silent_ms

    @classmethod
    def parse(cls, consumer: str, raw: str) -> Declaration | None:
        try:
            d: dict[str, Any] = json.loads(raw)
            ids = d.get("ids")
            return cls(consumer, int(d["at_ms"]), str(d.get("by", "")),
                       int(d.get("silent_ms") or 0), int(d.get("entries") or 0),
                       int(d.get("reruns") or 0), _opt_int(d.get("rerun_first_ms")),
                       _opt_int(d.get("rerun_last_ms")), _opt_int(d.get("revived_ms")),
                       tuple(str(i) for i in ids) if isinstance(ids, list) else ())
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def _opt_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


@dataclass(frozen=True)
class DeathInfo:
    """A worker's declarations on every shard, as `durable workers` and the console show
    them: when, by whom, after how much silence, and how long its steps waited."""

    at_ms: int
    by: str
    silent_s: float
    steps: int  # entries taken from it on every shard
    rerun: int  # of which run again by now
    rerun_after_s: tuple[float, float] | None  # first and last re-run, from its last beat
    revived: bool  # it beat again after it was declared dead

    def text(self) -> str:
        """'after 3.1s silent, by w-2; 4/4 steps re-run 3.3-3.9s after its last beat'."""
        said = f"after {self.silent_s:.1f}s silent, by {self.by}"
        if self.steps:
            said += f"; {self.rerun}/{self.steps} steps re-run"
            if self.rerun_after_s is not None:
                first, last = self.rerun_after_s
                span = f"{first:.1f}s" if round(first, 1) == round(last, 1) \
                    else f"{first:.1f}-{last:.1f}s"
                said += f" {span} after its last beat"
        return said + ("; it came back (its steps' results were dropped)"
                       if self.revived else "")


def death_info(declarations: Iterable[Declaration]) -> DeathInfo | None:
    """One worker's declarations (one per shard) as one line; None if it has none."""
    found = sorted(declarations, key=lambda d: d.at_ms)
    if not found:
        return None
    first = found[0]
    starts = [d.rerun_first_ms - d.last_beat_ms for d in found if d.rerun_first_ms]
    ends = [d.rerun_last_ms - d.last_beat_ms for d in found if d.rerun_last_ms]
    span = (min(starts) / 1000, max(ends) / 1000) if starts and ends else None
    return DeathInfo(at_ms=first.at_ms, by=first.by, silent_s=first.silent_ms / 1000,
                     steps=sum(d.entries for d in found), rerun=sum(d.reruns for d in found),
                     rerun_after_s=span, revived=any(d.revived_ms for d in found))
