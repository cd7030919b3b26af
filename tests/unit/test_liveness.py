"""The pure rule of fast failover (store/liveness.py): who is dead, judged by one
observer's own clock and a beat number that changes, and the declarations as
`durable workers` shows them."""

from __future__ import annotations

import json

from strands_durable.store.fleet import worker_infos
from strands_durable.store.liveness import (
    HOLDER,
    BeatWatch,
    Declaration,
    LivenessRule,
    death_info,
    declaration_detail,
)

RULE = LivenessRule.of(500, 6)  # the defaults: a beat every 0.5 s, dead after 3 s


def watch_ticks(watch: BeatWatch, beats_at: list[tuple[float, dict[str, str]]],
                shard: int = 0) -> list[list[str]]:
    return [[s.consumer for s in watch.observe(shard, beats, now, ignore=("me",))]
            for now, beats in beats_at]


def test_the_default_rule() -> None:
    assert RULE.dead_after_s == 3.0
    assert RULE.max_gap_s == 1.0  # two beats, at most half the silence
    assert LivenessRule.of(100, 2).max_gap_s == 0.1


def test_a_consumer_whose_beat_stops_changing_is_silent_after_the_window() -> None:
    watch = BeatWatch(RULE)
    ticks = [(t / 2, {"w": "7", "me": str(t)}) for t in range(8)]  # 0 .. 3.5 s, one beat
    silent = watch_ticks(watch, ticks)
    assert silent[:6] == [[]] * 6 and silent[6:] == [["w"], ["w"]]
    found = watch.observe(0, {"w": "7"}, 3.6)[0]
    assert (found.consumer, found.seq, round(found.silent_s, 1)) == ("w", "7", 3.6)


def test_every_beat_starts_the_window_again() -> None:
    watch = BeatWatch(RULE)
    ticks = [(t / 2, {"w": str(t // 5)}) for t in range(20)]  # a new beat every 2.5 s
    assert watch_ticks(watch, ticks) == [[]] * 20


def test_an_observer_that_did_not_watch_continuously_starts_over() -> None:
    watch = BeatWatch(RULE)
    assert watch_ticks(watch, [(0.0, {"w": "1"}), (0.5, {"w": "1"})]) == [[], []]
    # Its own tick came 1.5 s late (a stalled observer): 3.5 s have passed, not seen.
    assert watch_ticks(watch, [(2.0, {"w": "1"}), (3.5, {"w": "1"})]) == [[], []]
    assert watch_ticks(watch, [(4.5, {"w": "1"}), (5.5, {"w": "1"}), (6.5, {"w": "1"})]) == [
        [], [], ["w"]]


def test_a_lost_sight_of_the_shard_starts_over_there_only() -> None:
    watch = BeatWatch(RULE)
    for now in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5):
        watch.observe(0, {"w": "1"}, now)
        watch.observe(1, {"v": "1"}, now)
    watch.lost_sight(0)  # Redis did not answer for shard 0
    assert watch.observe(0, {"w": "1"}, 3.0) == []
    assert [s.consumer for s in watch.observe(1, {"v": "1"}, 3.0)] == ["v"]


def test_gone_ignored_and_forgotten_consumers() -> None:
    watch = BeatWatch(RULE)
    for now in (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0):
        silent = watch.observe(0, {"me": "1", "w": "1", HOLDER: "1"}, now,
                               ignore=("me", HOLDER))
    assert [s.consumer for s in silent] == ["w"]
    watch.forget(0, "w")  # declared: the same number again is a new beat to watch
    assert watch.observe(0, {"w": "1"}, 3.5) == []
    # A consumer that left the hash (stopped, or declared by another) is forgotten.
    watch.observe(0, {}, 4.0)
    assert watch.observe(0, {"w": "1"}, 4.5) == []


def test_the_longest_silent_comes_first() -> None:
    watch = BeatWatch(RULE)
    watch.observe(0, {"a": "1"}, 0.0)
    watch.observe(0, {"a": "1", "b": "1"}, 0.5)
    for now in (1.0, 1.5, 2.0, 2.5, 3.0):
        watch.observe(0, {"a": "1", "b": "1"}, now)
    assert [s.consumer for s in watch.observe(0, {"a": "1", "b": "1"}, 3.5)] == ["a", "b"]


def declaration(consumer: str, **fields: object) -> Declaration:
    record = {"at_ms": 10_000, "by": "w-2", "silent_ms": 3_000, "entries": 2, "reruns": 0,
              "ids": {}, **fields}
    parsed = Declaration.parse(consumer, json.dumps(record))
    assert parsed is not None
    return parsed


def test_declarations_as_workers_shows_them() -> None:
    assert Declaration.parse("w", "not json") is None
    one = declaration("w-1", reruns=2, rerun_first_ms=10_400, rerun_last_ms=10_900)
    assert (one.last_beat_ms, one.ids) == (7_000, ())  # Lua's empty array is {}
    info = death_info([one, declaration("w-1", at_ms=10_100, entries=1, reruns=1,
                                        rerun_first_ms=10_200, rerun_last_ms=10_200)])
    assert info is not None and (info.steps, info.rerun, info.rerun_after_s) == (
        3, 3, (3.1, 3.9))
    assert info.text() == "after 3.0s silent, by w-2; 3/3 steps re-run 3.1-3.9s after its " \
                          "last beat"
    quiet = death_info([declaration("w-1", entries=0, revived_ms=12_000)])
    assert quiet is not None
    assert quiet.text() == "after 3.0s silent, by w-2; it came back (its steps' results " \
                           "were dropped)"
    assert death_info([]) is None
    assert declaration_detail(3.04, "w-2") == ("no beat for 3.0s: declared dead by w-2; "
                                               "the step runs again on another worker")


def test_workers_declared_dead_are_not_alive_and_the_holder_is_listed_only_holding() -> None:
    now = 100_000
    beats = {"w-1": json.dumps({"last_seen_ms": now - 1_000}),
             "w-3": json.dumps({"last_seen_ms": now - 1_000})}
    pending = [{"w-1": (0, 5), HOLDER: (0, 9)}]
    infos = {w.consumer: w for w in worker_infos(
        beats, pending, now, 15, [declaration("w-1"), declaration("w-3", revived_ms=99_000)])}
    assert set(infos) == {"w-1", "w-3"}
    assert not infos["w-1"].alive and infos["w-1"].declared_dead is not None
    assert infos["w-3"].alive  # it beat again after its declaration
    held = worker_infos({}, [{HOLDER: (2, 9)}], now, 15)
    assert [(w.consumer, w.pending) for w in held] == [(HOLDER, 2)]
