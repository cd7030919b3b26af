"""The bounded render stage: where a submitted spec is loaded and planned (its first
templates rendered), in a few processes of its own and never on the API's event loop.

Not in threads: a CPU-bound render in a thread holds the GIL, and the loop waits for it
between every read and write (8 clients submitting heavy templates took /healthz p99 from
5 ms to 1.2 s with the 4 threads this replaces; bench/submit_render.py measures it). Not
unbounded either: at most DURABLE_API_RENDER_WORKERS specs are worked on at once and
DURABLE_API_RENDER_QUEUE more wait; past that a request is refused at once with
`Overloaded` (503, Retry-After), before anything touched Redis.

The processes belong to this process, not to one app: an app's lifespan may run many
times (tests do) and a process costs about a second to start. The bound is the app's.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import math
import multiprocessing
import os
import select
import signal
import threading
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from strands_durable import provider_policy
from strands_durable import settings as settings_module
from strands_durable.api.errors import ApiError, domain_error
from strands_durable.errors import DurableError, Overloaded
from strands_durable.settings import current_limits

log = logging.getLogger("durable.api")

A = TypeVar("A")
R = TypeVar("R")

# How much lower the stage's processes run than the API's (os.nice: 0 to 19).
RENDER_NICENESS = 10
# By (workers, preload): a stage is given processes that imported what its work needs.
_pools: dict[tuple[int, tuple[str, ...]], ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


# -- in the stage's process ----------------------------------------------------------
@dataclass(frozen=True)
class _Done(Generic[R]):
    value: R


@dataclass(frozen=True)
class _Refused:
    """An error for the client, as plain data: the domain errors' own classes do not
    survive pickling (their __init__ takes other arguments than their message), and
    one that fails to unpickle would break the whole pool."""

    status: int
    code: str
    message: str
    details: Any
    headers: dict[str, str] | None


@dataclass(frozen=True)
class _Crashed:
    problem: str
    traceback: str


def _adopt(environ: Mapping[str, str]) -> None:
    """Take the API's environment as it is now: the limits and policies read once from
    it (settings' current_* caches) are the API's, also when they changed after this
    process started (a test's, or a setting the API read late)."""
    if environ == os.environ:
        return
    os.environ.clear()
    os.environ.update(environ)
    for module in (settings_module, provider_policy):
        for name, value in vars(module).items():
            if name.startswith("current_") and hasattr(value, "cache_clear"):
                value.cache_clear()


def _run_here(work: Callable[[A], R], arg: A, environ: dict[str, str]
              ) -> _Done[R] | _Refused | _Crashed:
    _adopt(environ)
    try:
        return _Done(work(arg))
    except ApiError as exc:
        return _Refused(exc.status, exc.code, exc.message, exc.details, exc.headers)
    except DurableError as exc:
        api = domain_error(exc)
        return _Refused(api.status, api.code, api.message, api.details, api.headers)
    except Exception as exc:  # a bug: its story goes to the API's log, not the client
        return _Crashed(f"{type(exc).__name__}: {exc}", traceback.format_exc())


def _ready() -> int:
    return os.getpid()


def _end_with(api_pid: int) -> None:
    """Exit when the API's process does. A pool's processes otherwise outlive an API
    killed -9 (or out of memory) for ever: each waits on a call queue whose write end it
    holds itself, so it never reads an end of file, and the resource tracker waits on
    them in turn. Watched through a pidfd (told at once), or by polling where the kernel
    has none."""
    if os.getppid() != api_pid:  # it died while this process started
        os._exit(0)
    try:
        pidfd = os.pidfd_open(api_pid)
    except (AttributeError, OSError):
        pidfd = None

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])
        else:
            while os.getppid() == api_pid:
                threading.Event().wait(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="render-stage-parent", daemon=True).start()


def _prepare_process(api_pid: int, preload: tuple[str, ...]) -> None:
    """Renders yield the CPU to the API's own process (and Redis) when the machine is
    busy: a full stage is CPU-bound on every worker, and /healthz must still answer.
    What the renders import is imported first, at the API's priority: a second of
    imports at niceness 10 on a busy machine took a first submit 8 s (10 busy loops on
    2 cores), and 30 s on a loaded CI machine.
    Ctrl-C in a terminal reaches the whole process group: it is the API's to handle (its
    shutdown ends these processes), not a traceback from each of them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for module in preload:
        importlib.import_module(module)
    with contextlib.suppress(OSError):  # not allowed here: run at the API's priority
        os.nice(RENDER_NICENESS)
    _end_with(api_pid)


# -- in the API's process ------------------------------------------------------------
def _pool(workers: int, preload: tuple[str, ...]) -> ProcessPoolExecutor:
    with _pools_lock:
        pool = _pools.get((workers, preload))
        if pool is None:
            # spawn, not fork: the API's process has threads (and locks they may hold).
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=_prepare_process,
                                       initargs=(os.getpid(), preload))
            _pools[(workers, preload)] = pool
        return pool


def _discard(workers: int, preload: tuple[str, ...], pool: ProcessPoolExecutor) -> None:
    """Forget a broken pool (a process of it died); the next request starts a new one."""
    with _pools_lock:
        if _pools.get((workers, preload)) is pool:
            del _pools[(workers, preload)]
    pool.shutdown(wait=False, cancel_futures=True)


def retry_after_s() -> int:
    """A slot frees within about one render's time limit."""
    return max(1, math.ceil(current_limits().render_timeout_s))


class RenderStage:
    """Runs `work(arg)` in the stage's processes, at most `workers` at once and `queue`
    more waiting; `Overloaded` beyond. A request that goes away leaves its slot taken
    until its process has finished with it, so going away frees nothing early."""

    def __init__(self, workers: int, queue: int, preload: tuple[str, ...] = ()) -> None:
        self.workers = workers
        self.queue = queue
        self.preload = preload  # modules the work needs, imported as a process starts
        self._warming: list[Future[int]] = []
        self._taken = 0
        self._lock = threading.Lock()  # released from the pool's own thread

    @property
    def taken(self) -> int:
        """Requests running or waiting in the stage."""
        return self._taken

    def start(self) -> None:
        """Start the processes now rather than on the first submit (about a second each);
        nothing waits for them."""
        pool = _pool(self.workers, self.preload)
        try:
            self._warming = [pool.submit(_ready) for _ in range(self.workers)]
        except BrokenProcessPool:  # a process of it died since: start a new one
            _discard(self.workers, self.preload, pool)
            self.start()

    async def warmed(self) -> None:
        """Once the processes `start` began have started (what a first submit would wait
        for otherwise); BrokenProcessPool if one died."""
        await asyncio.gather(*(asyncio.wrap_future(f) for f in self._warming))

    def pids(self) -> list[int]:
        """The stage's process ids (for tests and operators)."""
        pool = _pools.get((self.workers, self.preload))
        processes = getattr(pool, "_processes", None) or {}
        return sorted(processes)

    async def run(self, work: Callable[[A], R], arg: A) -> R:
        self._take()
        pool = _pool(self.workers, self.preload)
        try:
            future: Future[Any] = pool.submit(_run_here, work, arg, dict(os.environ))
        except BrokenProcessPool:
            self._give_back()
            raise self._lost(pool) from None
        except BaseException:
            self._give_back()
            raise
        future.add_done_callback(lambda _: self._give_back())
        try:
            outcome = await asyncio.wrap_future(future)
        except BrokenProcessPool:
            raise self._lost(pool) from None
        if isinstance(outcome, _Done):
            value: R = outcome.value
            return value
        if isinstance(outcome, _Refused):
            raise ApiError(outcome.status, outcome.code, outcome.message, outcome.details,
                           outcome.headers)
        log.error("loading a submitted spec failed: %s\n%s", outcome.problem,
                  outcome.traceback)
        raise RuntimeError(f"render stage: {outcome.problem}")

    def _take(self) -> None:
        with self._lock:
            if self._taken < self.workers + self.queue:
                self._taken += 1
                return
        wait = retry_after_s()
        raise Overloaded(
            f"the API is loading as many specs as it may ({self.workers} at once, "
            f"DURABLE_API_RENDER_WORKERS; {self.queue} waiting, DURABLE_API_RENDER_QUEUE); "
            f"nothing was stored: try again in {wait} s", wait)

    def _give_back(self) -> None:
        with self._lock:
            self._taken -= 1

    def _lost(self, pool: ProcessPoolExecutor) -> Overloaded:
        _discard(self.workers, self.preload, pool)
        log.warning("a render process of the API died; a new one starts on the next submit")
        return Overloaded("the process loading this spec stopped (killed, or out of "
                          "memory); nothing was stored: try again", retry_after_s())
