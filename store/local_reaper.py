"""Stops the local store's redis-server (store/local_server.py) once nobody has used it
for `idle_s`: `python -m strands_durable.store.local_reaper HOME IDLE_S`.

Idle means: no client connected but this one, and no `durable` command has touched
`last-use` for `idle_s`. The stop itself happens under the server lock, checked once
more there, so a command starting at that moment either finds the server up (it
touched `last-use` first) or starts a fresh one after the stop. SHUTDOWN makes the
server fsync its AOF and exit. The reaper exits with the server, whoever stopped it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from strands_durable.store.local_server import (
    LAST_USE,
    REAPER_PID,
    server_lock,
    socket_path,
)

MAX_CHECK_S = 5.0


def idle_for(redis: Redis, home: Path, busy_at: float) -> tuple[float, float]:
    """(seconds idle, when it was last seen busy); ConnectionError when the server is gone."""
    clients = int(redis.info("clients")["connected_clients"])  # type: ignore[index]
    now = time.time()
    if clients > 1:
        busy_at = now
    with contextlib.suppress(OSError):
        busy_at = max(busy_at, (home / LAST_USE).stat().st_mtime)
    return now - busy_at, busy_at


def stop_if_idle(redis: Redis, home: Path, idle_s: float) -> bool:
    """Under the server lock: SHUTDOWN if still idle; True once the server is gone."""
    try:
        with server_lock(home):
            idle, _ = idle_for(redis, home, 0.0)
            if idle < idle_s:
                return False
            return shutdown(redis)  # still holding the lock: no command sees it half-gone
    except OSError:
        # The folder was deleted (a test's home, say): no command can reach it again,
        # and its AOF is gone with it; stop even if the server cannot fsync.
        return shutdown(redis, force=True)


def shutdown(redis: Redis, force: bool = False) -> bool:
    with contextlib.suppress(RedisError):
        # appendonly: a plain SHUTDOWN fsyncs the AOF (and `save ""` writes no RDB).
        redis.shutdown(nosave=force, now=force, force=force)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            redis.ping()
        except RedisError:
            return True
        time.sleep(0.05)
    return True


def reap(home: Path, idle_s: float) -> None:
    redis = Redis(unix_socket_path=str(socket_path(home)), socket_timeout=10,
                  socket_connect_timeout=5)
    check_s = min(MAX_CHECK_S, max(0.1, idle_s / 4))
    busy_at = time.time()
    try:
        # Connect now and keep the connection: if the folder (and the socket in it) is
        # deleted, this is the one way left to stop the server.
        redis.ping()
        while True:
            time.sleep(check_s)
            idle, busy_at = idle_for(redis, home, busy_at)
            gone = not home.is_dir()  # deleted under us: serve nobody, stop now
            if (gone or idle >= idle_s) and stop_if_idle(redis, home, 0 if gone else idle_s):
                return
    except RedisError:
        return  # the server is gone (stopped, killed): nothing left to watch


def main(argv: list[str]) -> int:
    home, idle_s = Path(argv[0]), float(argv[1])
    fd = os.open(home / "reaper.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another reaper watches this server
    (home / REAPER_PID).write_text(f"{os.getpid()}\n")
    try:
        reap(home, idle_s)
    finally:
        with contextlib.suppress(OSError):
            (home / REAPER_PID).unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
