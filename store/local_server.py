"""The user's local store: a private `redis-server` behind the same Store and Lua scripts
as the fleet, so `durable run` without DURABLE_REDIS_URL has one code path and survives
its own death (kill -9, OOM, a laptop lid) with every committed step.

Layout of the state folder (`DURABLE_HOME`, else `$XDG_STATE_HOME/strands-durable`,
else ~/.local/state/strands-durable), mode 0700 since sessions hold prompts and replies:
  redis.sock     the only way in (no TCP port); socket permissions 0700
  appendonly/    the AOF: `appendfsync always`, so a commit Redis acknowledged is on disk
                 even if the machine loses power next (a step costs seconds of model time
                 and money; a write with fsync took 0.19 ms here, 0.05 ms without)
  redis.pid, redis.log, reaper.pid, server.lock, last-use

Started on demand under `server.lock` (an flock: two commands starting at once start
one server; the second finds the socket answering). Stopped when idle by a small
reaper process (store/local_reaper.py): no client but itself for `local_idle_s` and no
command since, it takes the same flock and SHUTDOWNs the server (which fsyncs the AOF).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from strands_durable.errors import ConfigError
from strands_durable.settings import DurableSettings

SOCKET, PIDFILE, REAPER_PID, LOCKFILE, LAST_USE = (
    "redis.sock", "redis.pid", "reaper.pid", "server.lock", "last-use")
MAX_SOCKET_PATH = 100  # sun_path holds 107 bytes on Linux; keep a margin
START_TIMEOUT_S = 30.0  # a large AOF takes a while to load
REAPER_START_S = 5.0
LOCK_TIMEOUT_S = 60.0
POLL_S = 0.02
INSTALL_HINT = ("the local session store needs redis-server: install it (Debian/Ubuntu: "
                "`sudo apt-get install redis-server`; `bash install.sh` does it), or set "
                "DURABLE_REDIS_URL, or run with --ephemeral (nothing kept)")


class LocalStoreError(ConfigError):
    """The local store cannot be used (no redis-server, an unusable folder, a server
    that does not start); the message says what to do."""

    code = "local_store_unavailable"


def state_dir(settings: DurableSettings) -> Path:
    """DURABLE_HOME, else $XDG_STATE_HOME/strands-durable, else ~/.local/state/..."""
    if settings.home:
        return Path(settings.home).expanduser().resolve()
    xdg = os.environ.get("XDG_STATE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "state"
    return (base / "strands-durable").resolve()


def socket_path(home: Path) -> Path:
    """`home`/redis.sock, or (when that path is too long for a unix socket) a short one in
    a private folder of /tmp named after `home`."""
    path = home / SOCKET
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    short = Path("/tmp") / f"durable-{os.getuid()}"
    private_dir(short)
    return short / (hashlib.sha256(os.fsencode(home)).hexdigest()[:20] + ".sock")


def private_dir(path: Path) -> None:
    """Make `path` (0700) or check an existing one is ours and not open to others."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise LocalStoreError(f"local store folder {path}: {exc.strerror or exc}") from None
    if not path.is_dir():
        raise LocalStoreError(f"local store folder {path}: not a folder")
    if info.st_uid != os.getuid():
        raise LocalStoreError(f"local store folder {path}: owned by another user")
    if info.st_mode & 0o077:
        path.chmod(0o700)  # sessions hold prompts and replies: never world-readable


def local_url(home: Path) -> str:
    return "unix://" + quote(str(socket_path(home)))


def answers(sock: Path, timeout_s: float = 1.0) -> bool:
    """The server on `sock` answers PING with PONG (not -LOADING: an AOF still loading)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout_s)
            conn.connect(os.fsdecode(sock))
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextlib.contextmanager
def server_lock(home: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """The flock every start and every idle stop takes; released if its holder dies."""
    try:
        fd = os.open(home / LOCKFILE, os.O_RDWR | os.O_CREAT, 0o600)
    except (IsADirectoryError, PermissionError) as exc:  # a folder in its place, or a
        # file we may not write; a home deleted under the reaper stays an OSError for it
        raise LocalStoreError(f"{home / LOCKFILE}: cannot open the lock file "
                              f"({exc.strerror or exc}); remove it") from None
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LocalStoreError(f"{home / LOCKFILE}: another durable command has "
                                          f"held it for {timeout_s:.0f}s") from None
                time.sleep(POLL_S)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock


def touch_last_use(home: Path) -> None:
    # The reaper stops the server only when this is older than its idle time: a command
    # that found the server up is connecting now, even if no client shows yet.
    with contextlib.suppress(OSError):
        (home / LAST_USE).touch()


def ensure_local_store(settings: DurableSettings) -> str:
    """The local store's URL, its server started if it is not running."""
    home = state_dir(settings)
    private_dir(home)
    sock = socket_path(home)
    if answers(sock) and reaper_alive(home):
        touch_last_use(home)
        return local_url(home)
    with server_lock(home):
        touch_last_use(home)
        if not answers(sock):
            start_server(home, sock)
        if not reaper_alive(home):
            start_reaper(home, settings.local_idle_s)
    return local_url(home)


def server_command(binary: str, home: Path, sock: Path) -> list[str]:
    return [binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
            "--dir", str(home), "--daemonize", "yes", "--pidfile", str(home / PIDFILE),
            "--logfile", str(home / "redis.log"), "--appendonly", "yes",
            "--appendfsync", "always", "--appenddirname", "appendonly", "--save", "",
            "--loglevel", "warning"]


def start_server(home: Path, sock: Path) -> None:
    """Start redis-server (it daemonizes: its own session, so a Ctrl-C meant for
    `durable run` never reaches it) and wait until it answers."""
    binary = os.environ.get("DURABLE_REDIS_SERVER") or shutil.which("redis-server")
    if not binary:
        raise LocalStoreError(INSTALL_HINT)
    try:
        sock.unlink()  # a dead server's socket
    except FileNotFoundError:
        pass
    except OSError as exc:  # a folder (or an entry we may not remove) in its place
        raise LocalStoreError(f"{sock}: not a socket that can be replaced "
                              f"({exc.strerror or exc}); remove it") from None
    # And its pid file: a server killed -9 leaves it, naming a dead pid, and until the
    # new server writes its own, the wait below would take that for the new one dying.
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        (home / PIDFILE).unlink()
    try:
        subprocess.run(server_command(binary, home, sock), cwd=home, check=True, timeout=30,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", None) or str(exc).encode()
        raise LocalStoreError(f"redis-server did not start ({binary}): "
                              f"{detail.decode(errors='replace').strip()[-300:]}") from None
    deadline = time.monotonic() + START_TIMEOUT_S
    while not answers(sock, timeout_s=0.5):
        if time.monotonic() >= deadline or not server_alive(home):
            raise LocalStoreError(f"the local redis-server did not answer within "
                                  f"{START_TIMEOUT_S:.0f}s; see {home / 'redis.log'}")
        time.sleep(POLL_S)


def read_pid(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


def pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's (a reused pid): not ours to judge
    return True


def server_alive(home: Path) -> bool:
    """The pid file's process lives (the server may still be loading its AOF); while
    it has not written the pid file yet, it counts as alive."""
    pid = read_pid(home / PIDFILE)
    return pid is None or pid_alive(pid)


def reaper_alive(home: Path) -> bool:
    return pid_alive(read_pid(home / REAPER_PID))


def start_reaper(home: Path, idle_s: float) -> None:
    """The idle stopper, in its own session (a Ctrl-C of the terminal never reaches it);
    it writes its pid file itself, after taking its own flock, so there is one."""
    subprocess.Popen(
        [sys.executable, "-m", "strands_durable.store.local_reaper", str(home), str(idle_s)],
        cwd=home, start_new_session=True, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
    deadline = time.monotonic() + REAPER_START_S  # if it cannot start, the store still works
    while not reaper_alive(home) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def local_processes(home: Path) -> list[int]:
    """The server's and the reaper's pids, where alive (for tests and `stop`)."""
    pids = [read_pid(home / PIDFILE), read_pid(home / REAPER_PID)]
    return [pid for pid in pids if pid is not None and pid_alive(pid)]
