"""A zygote for the suite's short `durable` commands: one process per pytest process that
has imported the CLI (and what its commands import) once, and forks a child per command.

The suite runs hundreds of `durable ...` commands to their end (`subprocess.run`), and a
new interpreter pays 0.7-1.8 s of imports for each on a 2-core machine, most of the
suite's CPU. A forked child runs the same code as `python -m strands_durable.api.cli`:
its own process, its own environment, working directory, argv and standard streams, its
exit status and signals as a subprocess's; only the imports are done already.

`install()` routes `subprocess.run([python, -m, strands_durable.api.cli, ...])` through it.
Everything else runs as before: commands started with `Popen` (workers, `durable api`,
the scheduler, anything a test signals, stops or reads while it runs), another
interpreter's or another PYTHONPATH's (the previous release), and any call with options
this does not model. DURABLE_TEST_ZYGOTE=0 turns it off (docs/testing.md).

The server half runs as `python tests/helpers/zygote.py SOCKET`: stdlib only here, so
the client half is importable anywhere in the suite."""

from __future__ import annotations

import atexit
import contextlib
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

CLI_MODULE = "strands_durable.api.cli"
# Imported before any fork: the CLI and the modules its commands import when they run.
PRELOAD = (
    "strands_durable.api.cli", "strands_durable.worker.embedded",
    "strands_durable.worker.runner", "strands_durable.sessions.control",
    "strands_durable.sessions.checkpoints", "strands_durable.sessions.requeue",
    "strands_durable.api.watch", "strands_durable.api.run_resume",
    "strands_durable.store.fleet", "httpx",
)
# Read once, when rich's consoles are made at import: a command whose environment differs
# from the suite's in any of them runs in a new interpreter.
TERMINAL_VARIABLES = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
                      "TTY_INTERACTIVE", "TERM", "COLORTERM", "JUPYTER_COLUMNS")
HEADER = struct.Struct("!I")
STATUS = struct.Struct("!ii")  # pid, then the exit code (a subprocess's returncode)
_RUN = subprocess.run


# -- the server: imports once, forks a child per command -----------------------------------

def _serve(path: str) -> None:
    for name in PRELOAD:
        __import__(name)
    # A fork copies only the forking thread: with another thread running, a lock it held
    # (logging's, an import's) would stay held in every child.
    assert threading.active_count() == 1, threading.enumerate()
    parent = os.getppid()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path + ".tmp")
    server.listen(64)
    os.rename(path + ".tmp", path)  # the client waits for this name: bound and listening
    # A child's end wakes the loop (the byte the signal module writes), not a poll's tick.
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    while os.getppid() == parent:  # the pytest process is gone: so is the zygote
        readable, _, _ = select.select([server, woken], [], [], 1.0)
        if woken in readable:
            os.read(woken, 512)
        if server in readable:
            conn, _ = server.accept()
            pid = _fork_command(server, conn)
            if pid:
                children[pid] = conn
        _reap(children)


def _reap(children: dict[int, socket.socket]) -> None:
    while children:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            with contextlib.suppress(OSError):  # the caller went away
                conn.sendall(STATUS.pack(pid, os.waitstatus_to_exitcode(status)))
            conn.close()


def _fork_command(server: socket.socket, conn: socket.socket) -> int | None:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < HEADER.size or len(fds) != 3:
        conn.close()
        return None
    (size,) = HEADER.unpack_from(data)
    body = data[HEADER.size:]
    while len(body) < size:
        more = conn.recv(size - len(body))
        if not more:
            conn.close()
            return None
        body += more
    request = json.loads(body)
    pid = os.fork()
    if pid == 0:
        server.close()
        conn.close()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _child(fds, request)  # never returns
    for fd in fds:
        os.close(fd)
    conn.sendall(STATUS.pack(pid, 0))  # the pid first, so the caller can signal it
    return pid


def _child(fds: list[int], request: dict[str, Any]) -> None:
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            if fd > 2:
                os.close(fd)
        os.setpgid(0, 0)  # its own group, as a process the caller could kill with its children
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        main_module = sys.modules["__main__"]
        # As `python -m strands_durable.api.cli` sees itself (click names the program so).
        main_module.__package__ = CLI_MODULE
        sys.argv = [request["argv0"], *request["args"]]
        code = _run_cli()
    finally:
        os._exit(code)


def _run_cli() -> int:
    from strands_durable.api.cli import main
    try:
        main()
        code: Any = 0
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
    atexit._run_exitfuncs()  # as the interpreter does at its end
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


# -- the client: subprocess.run's short CLI commands through the zygote ---------------------

class _Zygote:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.path = ""
        # What the zygote imports under: the suite's environment when it loaded this.
        self.environ = dict(os.environ)

    def address(self) -> str:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            return self.path

    def _start(self) -> None:
        folder = tempfile.mkdtemp(prefix="durable-zygote-")
        self.path = os.path.join(folder, "socket")
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], env=self.environ,
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


ZYGOTE = _Zygote()
# subprocess.run's options this models; a call with any other goes to a new interpreter.
MODELED = {"capture_output", "text", "universal_newlines", "input", "timeout", "env", "cwd",
           "check", "stdout", "stderr", "encoding", "errors"}


def _is_cli(args: Any, kwargs: dict[str, Any]) -> bool:
    if os.environ.get("DURABLE_TEST_ZYGOTE", "1") == "0":
        return False
    if not isinstance(args, list | tuple) or len(args) < 3 or set(kwargs) - MODELED:
        return False
    if list(args[:3]) != [sys.executable, "-m", CLI_MODULE]:
        return False
    if not all(isinstance(a, str | os.PathLike) for a in args):
        return False
    env = os.environ if kwargs.get("env") is None else kwargs["env"]
    return all(env.get(name) == ZYGOTE.environ.get(name)
               for name in ("PYTHONPATH", *TERMINAL_VARIABLES))


def _stream(spec: Any, default: int | None) -> tuple[Any, bool]:
    """A file for the child's stream and whether it is captured here."""
    if spec == subprocess.PIPE:
        return tempfile.TemporaryFile(), True
    if spec == subprocess.DEVNULL:
        return open(os.devnull, "r+b"), False
    if spec is None:
        return os.fdopen(os.dup(default if default is not None else 2), "wb"), False
    return os.fdopen(os.dup(spec if isinstance(spec, int) else spec.fileno()), "wb"), False


def run(args: Any, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """subprocess.run, through the zygote for the `durable` CLI's commands."""
    if not _is_cli(args, kwargs):
        return _RUN(args, **kwargs)
    return _run_in_zygote([str(os.fspath(a)) for a in args], **kwargs)


def _run_in_zygote(args: list[str], *, capture_output: bool = False, text: bool = False,
                   universal_newlines: bool = False, input: Any = None,
                   timeout: float | None = None, env: dict[str, str] | None = None,
                   cwd: Any = None, check: bool = False, stdout: Any = None,
                   stderr: Any = None, encoding: str | None = None,
                   errors: str | None = None) -> subprocess.CompletedProcess[Any]:
    if capture_output:
        stdout = stderr = subprocess.PIPE
    decode = text or universal_newlines or encoding is not None or errors is not None
    stdin = tempfile.TemporaryFile()  # noqa: SIM115 (closed after the run)
    if input is not None:
        stdin.write(input.encode(encoding or "utf-8", errors or "strict") if decode
                    else input)
        stdin.seek(0)
    out, out_captured = _stream(stdout, 1)
    err, err_captured = (out, False) if stderr == subprocess.STDOUT else _stream(stderr, 2)
    request = json.dumps({"args": args[3:], "argv0": _main_path(),
                          "env": dict(os.environ if env is None else env),
                          "cwd": os.fspath(cwd) if cwd is not None else os.getcwd()}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(ZYGOTE.address())
        socket.send_fds(conn, [HEADER.pack(len(request)) + request],
                        [stdin.fileno(), out.fileno(), err.fileno()])
        pid, _ = STATUS.unpack(_receive(conn, STATUS.size, None))
        try:
            _, code = STATUS.unpack(_receive(conn, STATUS.size, timeout))
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)
            _receive(conn, STATUS.size, None)
            raise subprocess.TimeoutExpired(args, timeout or 0,
                                            _read(out, out_captured, decode, encoding, errors),
                                            _read(err, err_captured, decode, encoding, errors)
                                            ) from None
        captured_out = _read(out, out_captured, decode, encoding, errors)
        captured_err = _read(err, err_captured, decode, encoding, errors)
    finally:
        conn.close()
        for file in {id(f): f for f in (stdin, out, err)}.values():
            file.close()
    result = subprocess.CompletedProcess(args, code, captured_out, captured_err)
    if check:
        result.check_returncode()
    return result


def _receive(conn: socket.socket, size: int, timeout: float | None) -> bytes:
    conn.settimeout(timeout)
    data = b""
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise RuntimeError("the test zygote closed a command's connection")
        data += more
    return data


def _read(file: Any, captured: bool, decode: bool, encoding: str | None,
          errors: str | None) -> Any:
    if not captured:
        return None
    file.seek(0)
    data = file.read()
    if not decode:
        return data
    # As subprocess's text mode: universal newlines.
    return data.decode(encoding or "utf-8", errors or "strict").replace(
        "\r\n", "\n").replace("\r", "\n")


def _main_path() -> str:
    import importlib.util
    spec = importlib.util.find_spec(CLI_MODULE + ".__main__")
    return spec.origin if spec is not None and spec.origin else CLI_MODULE


def install() -> None:
    """Route the suite's `subprocess.run` of the `durable` CLI through the zygote."""
    subprocess.run = run  # type: ignore[assignment]


if __name__ == "__main__":
    _serve(sys.argv[1])
