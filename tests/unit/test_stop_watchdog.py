"""A worker whose stop overruns its bound exits, saying why and where it hung."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

from strands_durable.worker.stop_watchdog import EXIT_STOP_OVERRUN, StopWatchdog

HANGS_AFTER_STOP = textwrap.dedent("""
    import logging, threading
    from strands_durable.worker.stop_watchdog import StopWatchdog

    logging.basicConfig(level=logging.INFO)
    watchdog = StopWatchdog(grace_s=0.0, margin_s=0.2)
    watchdog.arm()
    watchdog.arm()  # a second signal does not restart the count

    def stuck_in_shutdown():
        threading.Event().wait()

    stuck_in_shutdown()
""")


def test_a_stop_that_overruns_exits_with_every_threads_stack() -> None:
    done = subprocess.run([sys.executable, "-c", HANGS_AFTER_STOP], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == EXIT_STOP_OVERRUN, done.stderr
    assert "worker still stopping 0s after the stop signal" in done.stderr
    assert "stuck_in_shutdown" in done.stderr  # the hung thread's stack, for the diagnosis


def test_a_stop_that_ends_in_time_is_not_held_by_the_watchdog() -> None:
    in_time = HANGS_AFTER_STOP.replace("StopWatchdog(grace_s=0.0, margin_s=0.2)",
                                       "StopWatchdog(grace_s=3600.0)").replace(
        "stuck_in_shutdown()\n", "print('stopped')\n")
    done = subprocess.run([sys.executable, "-c", in_time], capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "stopped"), done.stderr


def test_a_hang_that_holds_the_interpreter_is_cut_from_outside_it() -> None:
    # Catastrophic backtracking holds the GIL, as a hang in the interpreter's teardown
    # would: the Python timer cannot run, faulthandler's C thread still can.
    holds_gil = HANGS_AFTER_STOP.replace(
        "threading.Event().wait()",
        "import re; re.match(r'(a+)+$', 'a' * 64 + 'b')").replace(
        "margin_s=0.2)", "margin_s=0.2, final_margin_s=0.3)")
    done = subprocess.run([sys.executable, "-c", holds_gil], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "Timeout" in done.stderr and "stuck_in_shutdown" in done.stderr


def test_only_a_stop_signal_arms_it_not_an_arq_watch_reload() -> None:
    watchdog = StopWatchdog(grace_s=3600.0)
    try:
        watchdog.signalled(signal.SIGUSR1)  # `arq --watch` reloading: the process goes on
        assert not watchdog.armed
        watchdog.signalled(signal.SIGTERM)
        assert watchdog.armed
    finally:
        watchdog.disarm()
    assert not watchdog.armed
