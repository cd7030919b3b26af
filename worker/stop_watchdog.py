"""A bound on a worker's stop: once told to stop, it is gone within
DURABLE_SHUTDOWN_GRACE_S plus a margin, whatever hangs.

Running steps get the grace period to commit (worker/consumer.py); what is left after
that is cancelled and stays pending for another worker, so nothing is lost by exiting.
A stop that overruns (a task that ignores its cancellation, a library's exit handler
waiting on something) would otherwise hold the process until the orchestrator's SIGKILL,
without a word on why. The watchdog writes every thread's stack to stderr first, so the
overrun can be diagnosed, then exits 70 (EX_SOFTWARE).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys
import threading

log = logging.getLogger("durable.worker")

STOP_MARGIN_S = 10.0  # beyond the grace period: cancelling and handing back steps
EXIT_STOP_OVERRUN = 70
FINAL_MARGIN_S = 5.0


class StopWatchdog:
    def __init__(self, grace_s: float, margin_s: float = STOP_MARGIN_S,
                 final_margin_s: float = FINAL_MARGIN_S) -> None:
        self.limit_s = grace_s + margin_s
        self.final_margin_s = final_margin_s
        self._timer: threading.Timer | None = None

    def signalled(self, sig: object) -> None:
        """Arm on a signal that stops the process: SIGTERM or SIGINT, not the SIGUSR1 of
        `arq --watch` reloading the worker in the same process."""
        if sig in (signal.SIGTERM, signal.SIGINT):
            self.arm()

    @property
    def armed(self) -> bool:
        return self._timer is not None

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            faulthandler.cancel_dump_traceback_later()
            self._timer = None

    def arm(self) -> None:
        """Start counting (the first stop signal; later ones change nothing)."""
        if self._timer is not None:
            return
        # A daemon thread: a stop that ends in time exits without waiting for it.
        self._timer = threading.Timer(self.limit_s, self._overrun)
        self._timer.daemon = True
        self._timer.start()
        # The last resort, from a C thread that needs no GIL: a hang in the interpreter's
        # own teardown (after the last Python code ran) is cut too, stacks first, exit 1.
        faulthandler.dump_traceback_later(self.limit_s + self.final_margin_s, exit=True)

    def _overrun(self) -> None:
        log.critical("worker still stopping %.0fs after the stop signal "
                     "(DURABLE_SHUTDOWN_GRACE_S + %.0fs): exiting now; running steps stay "
                     "pending for another worker; the threads' stacks follow",
                     self.limit_s, STOP_MARGIN_S)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        logging.shutdown()
        os._exit(EXIT_STOP_OVERRUN)
