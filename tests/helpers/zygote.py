"""A zygote for the suite's `durable` and `arq worker` processes: one process per pytest
process imports the CLI, the worker and their SDKs once, and forks a process per command.

The suite starts well over a thousand `durable ...` and `arq worker` processes, and a new
interpreter pays 0.7-2.2 s of imports for each on a 2-core machine: most of the suite's
CPU. A forked process runs the same code as `python -m strands_durable.api.cli ...` or
`python -m arq ...` (runpy, as `-m` does): its own process with the caller's arguments,
environment, working directory and standard streams. It is the caller's child too, so
`subprocess.Popen` works on it unchanged (poll, wait, communicate, signals, SIGSTOP,
kill -9): the zygote forks an intermediate that forks the command and exits, and the
orphaned command is adopted by the pytest process, a child subreaper (prctl) for that
moment only.

`install()` makes subprocess.Popen (and so subprocess.run) start those two modules this
way. Everything else runs as before, and so do they when the call asks for what this does
not model (a shell, preexec_fn, pass_fds, another user or group), when the environment
differs from the suite's in a variable read at interpreter start (PYTHON*, but
PYTHONUNBUFFERED, which is applied) or at import (the terminal's), when its output is a
terminal, or when another interpreter is named. DURABLE_TEST_ZYGOTE=0 turns it off
(docs/testing.md).

The server half runs as `python tests/helpers/zygote.py SOCKET`: stdlib only here."""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

MODULES = ("strands_durable.api.cli", "arq")
# Imported before any fork: the CLI, the worker, and what their commands import to run.
PRELOAD = (
    "strands_durable.api.cli", "arq.cli",
    "strands_durable.worker", "strands_durable.worker.consumer",
    "strands_durable.worker.embedded", "strands_durable.worker.runner",
    "strands_durable.sessions.control", "strands_durable.sessions.checkpoints",
    "strands_durable.sessions.requeue", "strands_durable.api.watch",
    "strands_durable.api.run_resume", "strands_durable.store.fleet", "strands",
    "httpx",
)
# Read once, at interpreter start or when rich's consoles are made at import: a command
# whose environment differs from the suite's in one of them gets a new interpreter.
TERMINAL_VARIABLES = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
                      "TTY_INTERACTIVE", "TERM", "COLORTERM", "JUPYTER_COLUMNS")
APPLIED_AT_FORK = ("PYTHONUNBUFFERED",)
# Our modules that read the environment when imported (arq takes the worker's client and
# queue from WorkerSettings' class attributes): executed again in each command.
READ_AT_IMPORT = ("strands_durable.worker",)
HEADER = struct.Struct("!I")
PID = struct.Struct("!i")
PR_SET_CHILD_SUBREAPER = 36
_POPEN = subprocess.Popen


# -- the server: imports once, forks a command per request ----------------------------------

def _serve(path: str) -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):  # an optional SDK not installed
            __import__(name)
    # A fork copies only the forking thread: with another thread running, a lock it held
    # (logging's, an import's) would stay held in every command.
    assert threading.active_count() == 1, threading.enumerate()
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    server.listen(64)
    os.rename(path + ".tmp", path)  # the client waits for this name: bound and listening
    # An intermediate's end wakes the loop (the byte the signal module writes).
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while os.getppid() == parent:  # the pytest process is gone: so is the zygote
        readable, _, _ = select.select([server, woken], [], [], 1.0)
        if woken in readable:
            os.read(woken, 512)
        if server in readable:
            conn, _ = server.accept()
            with contextlib.suppress(OSError, ValueError):
                _fork_command(conn, (server.fileno(), woken, wake))
            conn.close()
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


def _fork_command(conn: socket.socket, own_fds: tuple[int, ...]) -> None:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    try:
        if len(data) < HEADER.size or len(fds) != 3:
            return
        (size,) = HEADER.unpack_from(data)
        request = json.loads(_receive(conn, size, data[HEADER.size:]))
        if os.fork() == 0:  # the intermediate: forks the command, says its pid, ends
            try:
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    _command(fds, own_fds, request)  # never returns
                conn.sendall(PID.pack(pid))
            finally:
                os._exit(0)
    finally:
        for fd in fds:
            os.close(fd)


def _receive(conn: socket.socket, size: int, have: bytes = b"") -> bytes:
    """`size` bytes from `conn`, `have` first; OSError if it closes before."""
    data = have
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise OSError("the other end of the test zygote's socket closed early")
        data += more
    return data


def _command(fds: list[int], own_fds: tuple[int, ...], request: dict[str, Any]) -> None:
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in own_fds:
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        if request["new_session"]:
            os.setsid()
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[0] = os.getcwd()  # as `python -m` puts it there
        _standard_streams()
        _as_if_imported_now()
        code = _run(request["module"], request["args"])
    finally:
        os._exit(code)


def _as_if_imported_now() -> None:
    """What our modules computed from the zygote's environment, computed from the
    command's: the caches of settings and policies emptied, and the modules that read
    the environment when imported (READ_AT_IMPORT) executed again."""
    for name, module in list(sys.modules.items()):
        if name.startswith("strands_durable"):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()
    for name in READ_AT_IMPORT:
        if name in sys.modules:
            importlib.reload(sys.modules[name])


def _standard_streams() -> None:
    """Buffering as a new interpreter would choose it for these streams and variables."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    for stream in (sys.stdout, sys.stderr):
        tty = stream.isatty()
        stream.reconfigure(line_buffering=unbuffered or tty or stream is sys.stderr,
                           write_through=unbuffered or stream is sys.stderr)


def _run(module: str, args: list[str]) -> int:
    import runpy
    sys.argv = [module, *args]
    code: Any = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # as the interpreter would: the traceback on stderr, status 1
        import traceback
        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    # What the interpreter runs at its end: non-daemon threads joined, then atexit.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return int(code)


# -- the client: Popen of those modules through the zygote ----------------------------------

class _Zygote:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spawning = threading.Lock()
        self.broken = False
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = ""
        # What the zygote imports under: the suite's environment when it loaded this.
        self.environ = dict(os.environ)

    def address(self) -> str:
        with self.lock:
            if self.broken:
                raise RuntimeError("the test zygote could not start")
            if self.proc is None or self.proc.poll() is not None:
                try:
                    self._start()
                except RuntimeError:
                    # Once is enough: every later command gets a new interpreter.
                    self.broken = True
                    print("tests/helpers/zygote.py: the zygote did not start; commands "
                          "run in new interpreters", file=sys.stderr)
                    raise
            return self.path

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="durable-zygote-")
        self.path = os.path.join(folder, "socket")
        self.proc = _POPEN([sys.executable, __file__, self.path], env=self.environ,
                           stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not os.path.exists(self.path):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the test zygote exited {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError("the test zygote did not start within 120 s")
            time.sleep(0.02)
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def spawn(self, request: dict[str, Any], fds: list[int]) -> int:
        """The pid of the command started for `request` with `fds` as its standard
        streams, once it is this process's child. This process is a subreaper only
        while it waits for that (one command at a time): any other orphan of its
        descendants goes to init as it always did."""
        body = json.dumps(request).encode()
        with self.spawning, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(120)
            conn.connect(self.address())
            _subreaper(True)
            try:
                socket.send_fds(conn, [HEADER.pack(len(body)) + body], fds)
                (pid,) = PID.unpack(_receive(conn, PID.size))
                if not _wait_adopted(pid):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                    raise OSError(f"command {pid} was not adopted by the test process")
            finally:
                _subreaper(False)
        return pid


def _wait_adopted(pid: int) -> bool:
    """Wait until the orphaned command is this process's child (its intermediate ended)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except FileNotFoundError:
            return True  # reaped already: only its parent can, and that is us
        if int(fields[1]) == os.getpid():
            return True
        time.sleep(0.001)
    return False


ZYGOTE = _Zygote()


def _module_of(args: Any, executable: Any, env: Any, shell: bool, preexec_fn: Any,
               pass_fds: Any, others: tuple[Any, ...]) -> str | None:
    """The module to run in the zygote for this call, or None for a new interpreter."""
    if os.environ.get("DURABLE_TEST_ZYGOTE", "1") == "0" or not ZYGOTE_READY or ZYGOTE.broken:
        return None
    if shell or preexec_fn is not None or pass_fds or executable is not None or any(
            value not in (None, -1, False) for value in others):
        return None
    if not isinstance(args, list | tuple) or len(args) < 3 or not all(
            isinstance(a, str) for a in args):
        return None
    if args[0] != sys.executable or args[1] != "-m" or args[2] not in MODULES:
        return None
    env = os.environ if env is None else env
    started = {name for name in (*env, *ZYGOTE.environ)
               if name.startswith("PYTHON") and name not in APPLIED_AT_FORK}
    if any(env.get(name) != ZYGOTE.environ.get(name)
           for name in (*started, *TERMINAL_VARIABLES)):
        return None
    return str(args[2])


class ZygotePopen(_POPEN):  # type: ignore[misc,type-arg]
    """subprocess.Popen, whose `durable` and `arq` commands fork from the zygote."""

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: Any,
                       pass_fds: Any, cwd: Any, env: Any, startupinfo: Any,
                       creationflags: Any, shell: Any, p2cread: int, p2cwrite: int,
                       c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       restore_signals: Any, gid: Any, gids: Any, uid: Any, umask: Any,
                       start_new_session: Any, process_group: Any) -> None:
        everything = (args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                      startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                      c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
                      start_new_session, process_group)
        module = _module_of(args, executable, env, shell, preexec_fn, pass_fds,
                            (gid, gids, uid, process_group, umask if umask != -1 else None))
        if module is None:
            return super()._execute_child(*everything)  # type: ignore[no-any-return]
        streams = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
                   errwrite if errwrite != -1 else 2]
        # On a terminal: rich decides when its consoles are made (at import, in the
        # zygote, under the suite's streams) whether output is interactive (a progress line).
        if any(os.isatty(fd) for fd in streams[1:]):
            return super()._execute_child(*everything)  # type: ignore[no-any-return]
        request = {"module": module, "args": list(args[3:]), "new_session":
                   bool(start_new_session), "env": dict(os.environ if env is None else env),
                   "cwd": os.fspath(cwd) if cwd is not None else os.getcwd()}
        try:
            self.pid = ZYGOTE.spawn(request, streams)
        except (OSError, RuntimeError):
            return super()._execute_child(*everything)  # type: ignore[no-any-return]
        self._child_created = True
        self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        return None


def _subreaper(on: bool) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


ZYGOTE_READY = False


def install() -> None:
    """Start the suite's `durable` and `arq` commands from the zygote (where this process
    can adopt them: Linux)."""
    global ZYGOTE_READY
    if sys.platform != "linux" or not _subreaper(False):
        return
    ZYGOTE_READY = True
    subprocess.Popen = ZygotePopen  # type: ignore[misc]


if __name__ == "__main__":
    _serve(sys.argv[1])
