"""The time a worker stamps on steps and events: the text now_iso writes, from the
millisecond clock (core/models.py), exactly as `datetime.isoformat` writes it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from strands_durable.models import iso_of_ms, now_iso, now_ms

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def as_datetime_writes_it(ms: int) -> str:
    moment = EPOCH + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_every_millisecond_is_written_as_datetime_writes_it() -> None:
    edges = [0, 1, 999, 1000, 59_999, 60_000, 951_782_399_999, 951_782_400_000,  # 2000-02-29
             1_795_694_364_816, 4_102_444_799_999, 253_402_300_799_999]
    chosen = random.Random(7)
    spread = [chosen.randrange(0, 4_102_444_800_000) for _ in range(20_000)]
    # Milliseconds of one second in a row, then the next: the kept second moves on.
    run = [1_795_694_364_000 + i for i in range(2_500)]
    for ms in edges + spread + run + edges[::-1]:
        assert iso_of_ms(ms) == as_datetime_writes_it(ms), ms


def test_now_is_the_clock_read_once() -> None:
    before = now_ms()
    text = now_iso()
    after = now_ms()
    stamped = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert text.endswith("Z") and len(text) == len("2026-11-26T12:00:00.123Z")
    assert before <= (stamped - EPOCH) // timedelta(milliseconds=1) <= after
