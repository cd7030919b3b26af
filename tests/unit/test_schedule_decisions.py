"""Schedules' pure decisions (scheduler/schedules.py): cron, time zones and DST, the
catch-up window, jitter, the overlap policies, and hostile input refused clearly."""

from __future__ import annotations

import itertools
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from strands_durable.errors import InvalidId, InvalidInput
from strands_durable.scheduler.schedules import (
    Action,
    InvalidSchedule,
    Overlap,
    Timing,
    check_cron,
    check_overlap,
    check_seconds,
    check_timezone,
    decide_overlap,
    jitter_ms,
    next_fire_times,
    plan_ticks,
    ticks_after,
)
from strands_durable.store.keys import check_schedule_name
from strands_durable.store.schedules import idempotency_key

UTC = ZoneInfo("UTC")


def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
       tz: str = "UTC") -> int:
    return int(datetime(year, month, day, hour, minute, second,
                        tzinfo=ZoneInfo(tz)).timestamp() * 1000)


def wall(tick: int, tz: str) -> str:
    return datetime.fromtimestamp(tick / 1000, ZoneInfo(tz)).isoformat()


def test_hourly_ticks_are_strictly_after_the_cursor() -> None:
    timing = Timing("t", "0 * * * *", "UTC")
    start = ms(2026, 1, 1, 10)
    assert ticks_after(timing, start, limit=3) == [ms(2026, 1, 1, h) for h in (11, 12, 13)]


def test_a_sixth_field_is_seconds() -> None:
    timing = Timing("t", "* * * * * */2", "UTC")
    start = ms(2026, 1, 1, 10)
    assert ticks_after(timing, start, limit=3) == [start + 2000, start + 4000, start + 6000]


def test_spring_forward_fires_a_missing_wall_time_once_after_the_gap() -> None:
    tz = "Europe/Berlin"
    timing = Timing("t", "30 2 * * *", tz)
    ticks = ticks_after(timing, ms(2026, 3, 28, 0, tz=tz), limit=3)
    assert [wall(t, tz) for t in ticks] == [
        "2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_fall_back_fires_a_fixed_time_once() -> None:
    tz = "Europe/Berlin"
    timing = Timing("t", "30 2 * * *", tz)
    ticks = ticks_after(timing, ms(2026, 10, 24, 0, tz=tz), limit=3)
    assert [wall(t, tz) for t in ticks] == [
        "2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]


def test_fall_back_fires_an_hourly_schedule_every_real_hour() -> None:
    tz = "Europe/Berlin"
    timing = Timing("t", "0 * * * *", tz)
    ticks = ticks_after(timing, ms(2026, 10, 25, 0, 30, tz=tz), limit=4)
    assert [b - a for a, b in itertools.pairwise(ticks)] == [3_600_000] * 3
    assert wall(ticks[1], tz) == "2026-10-25T02:00:00+02:00"
    assert wall(ticks[2], tz) == "2026-10-25T02:00:00+01:00"


def test_a_time_zone_moves_the_ticks() -> None:
    start = ms(2026, 6, 1)
    paris = ticks_after(Timing("t", "0 9 * * *", "Europe/Paris"), start, limit=1)
    assert paris == [ms(2026, 6, 1, 7)]  # 09:00 CEST is 07:00 UTC


def test_on_time_ticks_fire_and_the_cursor_moves_to_the_last_handled() -> None:
    timing = Timing("t", "* * * * * *", "UTC", catchup_window_s=60)
    start = ms(2026, 1, 1)
    plan = plan_ticks(timing, start, start + 3_500)
    assert plan.fire == [start + 1000, start + 2000, start + 3000]
    assert plan.skipped == [] and plan.cursor == start + 3000
    assert plan_ticks(timing, plan.cursor, start + 3_500).fire == []


def test_ticks_older_than_the_catch_up_window_are_skipped_newer_ones_fire() -> None:
    timing = Timing("t", "0 * * * *", "UTC", catchup_window_s=2 * 3600 + 60)
    cursor = ms(2026, 1, 1, 0)
    plan = plan_ticks(timing, cursor, ms(2026, 1, 1, 5, 30))
    assert plan.skipped == [ms(2026, 1, 1, h) for h in (1, 2, 3)]
    assert plan.fire == [ms(2026, 1, 1, 4), ms(2026, 1, 1, 5)]
    assert plan.cursor == ms(2026, 1, 1, 5)


def test_skipped_ticks_kept_are_bounded_and_the_rest_counted() -> None:
    timing = Timing("t", "* * * * *", "UTC", catchup_window_s=1)
    cursor = ms(2026, 1, 1)
    plan = plan_ticks(timing, cursor, cursor + 200 * 60_000 + 30_000, kept=50)
    assert len(plan.skipped) == 50 and plan.skipped_more == 150 and plan.fire == []
    assert plan.cursor == cursor + 200 * 60_000


def test_a_long_downtime_is_walked_in_bounded_rounds() -> None:
    timing = Timing("t", "* * * * * *", "UTC", catchup_window_s=10)
    cursor = ms(2026, 1, 1)
    plan = plan_ticks(timing, cursor, cursor + 86_400_000)  # a day of per-second ticks
    assert plan.cursor == cursor + 1000 * 1000  # one round walks 1,000 ticks at most
    assert plan.fire == []


@pytest.mark.parametrize("name", ["a", "nightly", "x" * 40])
def test_jitter_is_bounded_and_the_same_for_every_replica(name: str) -> None:
    tick = ms(2026, 1, 1, 3)
    delays = {jitter_ms(name, tick + n * 60_000, 30) for n in range(200)}
    assert all(0 <= d < 30_000 for d in delays) and len(delays) > 100
    assert jitter_ms(name, tick, 30) == jitter_ms(name, tick, 30)
    assert jitter_ms(name, tick, 0) == 0


def test_a_jittered_tick_waits_for_its_delay() -> None:
    timing = Timing("j", "0 * * * *", "UTC", jitter_s=600)
    tick = ms(2026, 1, 1, 1)
    delay = jitter_ms("j", tick, 600)
    assert plan_ticks(timing, tick - 1, tick + delay - 1).fire == []
    assert plan_ticks(timing, tick - 1, tick + delay).fire == [tick]
    assert next_fire_times(timing, tick - 1, 1) == [tick + delay]


def test_skip_starts_only_when_nothing_runs() -> None:
    busy = decide_overlap(Overlap.SKIP, [1, 2], previous_active=True, buffered=False)
    assert [d.action for d in busy] == [Action.SKIP, Action.SKIP]
    idle = decide_overlap(Overlap.SKIP, [1, 2], previous_active=False, buffered=False)
    assert [d.action for d in idle] == [Action.START, Action.SKIP]


def test_buffer_one_keeps_one_tick_waiting() -> None:
    busy = decide_overlap(Overlap.BUFFER_ONE, [1, 2], previous_active=True, buffered=False)
    assert [d.action for d in busy] == [Action.BUFFER, Action.SKIP]
    full = decide_overlap(Overlap.BUFFER_ONE, [1], previous_active=True, buffered=True)
    assert [d.action for d in full] == [Action.SKIP]
    idle = decide_overlap(Overlap.BUFFER_ONE, [1, 2, 3], previous_active=False, buffered=False)
    assert [d.action for d in idle] == [Action.START, Action.BUFFER, Action.SKIP]


def test_cancel_other_starts_only_the_newest_tick() -> None:
    decisions = decide_overlap(Overlap.CANCEL_OTHER, [1, 2, 3], True, False)
    assert [d.action for d in decisions] == [Action.SKIP, Action.SKIP,
                                             Action.CANCEL_THEN_START]


def test_allow_starts_every_tick() -> None:
    decisions = decide_overlap(Overlap.ALLOW, [1, 2], True, True)
    assert [d.action for d in decisions] == [Action.START, Action.START]


@pytest.mark.parametrize("cron", [
    "", "   ", "x", "* * *", "* * * * * * *", "99 * * * *", "*/0 * * * *",
    "0 0 30 2 *", "1-1000000 * * * *", "* * * * *\n* * * * *", "\x00 * * * *",
    "* " * 200, "@reboot", "0 0 * * MON-XYZ", "L L L L L",
    "R * * * *", "*/5 * * * * R", "H * * * *", "H(0-29) * * * *", "0 r * * *", "0,R * * * *",
])
def test_hostile_crons_are_refused_naming_the_option(cron: str) -> None:
    with pytest.raises(InvalidSchedule) as caught:
        check_cron(cron)
    assert str(caught.value).startswith("--cron: ") and len(str(caught.value)) < 400
    assert isinstance(caught.value, InvalidInput)


@pytest.mark.parametrize("cron", ["0 * * * *", "*/5 9-17 * * MON-FRI", "@daily",
                                  "0 0 * MAR,APR THU", "0 0 L * *",
                                  "0 0 29 2 *", "  0   *  * * *  ", "*/2 * * * * *"])
def test_good_crons_pass(cron: str) -> None:
    assert check_cron(cron) == " ".join(cron.split())


@pytest.mark.parametrize("tz", ["", "Mars/Olympus", "../../etc/passwd", "/etc/localtime",
                                "UTC\x00", "x" * 500, "Europe/../UTC"])
def test_unknown_time_zones_are_refused(tz: str) -> None:
    with pytest.raises(InvalidSchedule, match=r"--timezone: .* not a known time zone"):
        check_timezone(tz)


def test_known_time_zones_pass() -> None:
    assert check_timezone("Europe/Paris") == "Europe/Paris"
    assert check_timezone("UTC") == "UTC"


def test_overlap_and_seconds_are_checked() -> None:
    assert check_overlap("buffer_one") is Overlap.BUFFER_ONE
    with pytest.raises(InvalidSchedule, match="--overlap: 'sometimes': expected one of"):
        check_overlap("sometimes")
    with pytest.raises(InvalidSchedule, match="--jitter"):
        check_seconds("--jitter", -1, 0, 3600)
    with pytest.raises(InvalidSchedule, match="--jitter"):
        check_seconds("--jitter", True, 0, 3600)


@pytest.mark.parametrize("name", ["", "-x", "a b", "a:b", "a{b}", "x" * 65, "é", "a\n"])
def test_hostile_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidId):
        check_schedule_name(name)


def test_the_idempotency_key_names_the_schedule_and_the_tick() -> None:
    assert idempotency_key("nightly", 1_700_000_000_000) == "schedule:nightly:1700000000000"
    assert idempotency_key("n", 5, manual=True) == "schedule:n:manual:5"
