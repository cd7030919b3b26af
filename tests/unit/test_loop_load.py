"""The event loop's idle clock (worker/loop_load.py), on real asyncio loops: time spent
waiting in the selector is idle, time spent running callbacks is busy."""

from __future__ import annotations

import asyncio
import time

from strands_durable.worker.loop_load import BusyGauge, watch_idle


async def test_a_loop_waiting_on_a_timer_is_idle_and_one_running_python_is_busy() -> None:
    clock = watch_idle(asyncio.get_running_loop())
    assert clock is not None
    gauge = BusyGauge(clock)
    await asyncio.sleep(0.3)  # nothing to run: the loop waits in select()
    share, busy_s = gauge.sample()
    assert share < 0.5 and busy_s < 0.15
    spin_until = time.monotonic() + 0.1
    while time.monotonic() < spin_until:  # the loop runs this callback throughout
        pass
    share, busy_s = gauge.sample()
    assert share == 1.0 and busy_s >= 0.1


async def test_callbacks_ready_to_run_are_not_idle() -> None:
    clock = watch_idle(asyncio.get_running_loop())
    assert clock is not None
    before = clock.idle_s
    for _ in range(2000):  # yields with work always ready: select(0) each time
        await asyncio.sleep(0)
    assert clock.idle_s - before < 0.05


async def test_the_clock_is_installed_once_per_loop() -> None:
    loop = asyncio.get_running_loop()
    clock = watch_idle(loop)
    select = loop._selector.select  # type: ignore[attr-defined]
    assert watch_idle(loop) is clock
    assert loop._selector.select is select  # type: ignore[attr-defined]


def test_a_loop_without_a_selector_gives_no_reading() -> None:
    class NoSelector(asyncio.AbstractEventLoop):
        pass

    assert watch_idle(NoSelector()) is None


def test_separate_loops_have_separate_clocks() -> None:
    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        assert watch_idle(first) is not watch_idle(second)
    finally:
        first.close()
        second.close()
