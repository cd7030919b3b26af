"""python_exec: run the model's Python code, only where the operator turned it on
(DURABLE_TOOL_PYTHON_EXEC=true).

The code runs in a separate interpreter (`python -I`), in a fresh temporary directory,
with no inherited environment but PATH, under memory, CPU-time and file-size limits,
killed with its whole process group at the timeout; its output is cut at 64 KiB. That
keeps the worker's environment variables out of `os.environ`, but it is no sandbox: the
code runs as the worker's user and can read what that user can read.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
from typing import IO, Any

from strands.types.tools import ToolResult, ToolUse

from strands_durable.settings import current_tool_policy
from strands_durable.spec.grants import widen
from strands_durable.worker.tools.native._common import error, int_arg, ok, run_tool, str_arg

TOOL_SPEC = {
    "name": "python_exec",
    "description": "Execute Python code and return what it prints (runs in a separate "
                   "process with a timeout)",
    "inputSchema": {
        "json": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python code to execute"},
                "timeout": {
                    "type": "integer",
                    "default": 5,
                    "description": "Timeout in seconds",
                },
            },
            "required": ["code"],
        }
    },
}

SETTING = "DURABLE_TOOL_PYTHON_EXEC"
MAX_CODE_CHARS = 100_000
MAX_OUTPUT_BYTES = 64 * 1024
MAX_STDERR_BYTES = 4096
MEMORY_BYTES = 512 * 1024 * 1024
FILE_BYTES = 8 * 1024 * 1024  # any file it writes, its output included
PR_SET_DUMPABLE = 4  # prctl(2)

# Runs first in the child: limits itself, then the model's code from stdin.
_BOOTSTRAP = """
import resource, sys
def cap(kind, value):
    try:
        hard = resource.getrlimit(kind)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass
cap(resource.RLIMIT_AS, {memory})
cap(resource.RLIMIT_CPU, {cpu})
cap(resource.RLIMIT_FSIZE, {fsize})
code = sys.stdin.read()
try:
    exec(compile(code, "<python_exec>", "exec"), {{"__name__": "__main__"}})
except SystemExit:
    raise
except BaseException as exc:
    # The error and its line in the model's code, not a traceback through this bootstrap.
    import traceback
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
             if f.filename == "<python_exec>"]
    where = f" (line {{lines[-1]}})" if lines else ""
    sys.stdout.flush()
    sys.stderr.write(f"{{type(exc).__name__}}: {{exc}}{{where}}\\n")
    sys.exit(1)
"""


def _head(stream: IO[bytes], limit: int) -> str:
    stream.seek(0)
    data = stream.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + (f"\n[truncated: more than {limit} bytes of output]" if len(data) > limit
                   else "")


def _tail(stream: IO[bytes], limit: int) -> str:
    stream.seek(0, os.SEEK_END)
    stream.seek(max(0, stream.tell() - limit))
    return stream.read().decode("utf-8", errors="replace")


def _cause(status: int) -> str:
    if status > 0:
        return f"exit status {status}"
    try:
        return f"killed by {signal.Signals(-status).name}"
    except ValueError:
        return f"killed by signal {-status}"


def _hide_this_process() -> None:
    """The child runs as the worker's user, so it could read /proc/<worker>/environ (the
    fleet's secrets): a non-dumpable process's /proc files belong to root instead
    (Linux; a worker running as root gains nothing, hence the image's non-root user)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _execute(code: str, timeout_s: int, out: IO[bytes], err: IO[bytes], cwd: str
             ) -> int | None:
    """The exit status, or None when the timeout killed it."""
    _hide_this_process()
    bootstrap = _BOOTSTRAP.format(memory=MEMORY_BYTES, cpu=timeout_s + 1, fsize=FILE_BYTES)
    process = subprocess.Popen(
        [sys.executable, "-I", "-X", "utf8", "-c", bootstrap],
        stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=cwd,
        env={"PATH": os.environ.get("PATH", os.defpath)}, start_new_session=True)
    try:
        process.communicate(code.encode("utf-8"), timeout=timeout_s)
        status: int | None = process.returncode
    except subprocess.TimeoutExpired:
        status = None
    finally:
        # The whole group: children it left behind end with it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return status


def _run(tool: ToolUse, args: dict[str, Any]) -> ToolResult:
    policy = widen(current_tool_policy())  # `durable run --allow python_exec` here
    if not policy.tool_python_exec:
        return error(tool, f"Error: python_exec is off on this worker; the operator turns it "
                           f"on with {SETTING}=true")
    code = str_arg(args, "code", "")
    if not code:
        return error(tool, "No code provided")
    if len(code) > MAX_CODE_CHARS:
        return error(tool, f"Error: the code is longer than {MAX_CODE_CHARS} characters")
    timeout_s = int_arg(args, "timeout", 5, 1, max(1, int(policy.tool_timeout_s)))
    with tempfile.TemporaryDirectory(prefix="python_exec-") as cwd, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        status = _execute(code, timeout_s, out, err, cwd)
        printed = _head(out, MAX_OUTPUT_BYTES)
        before = f"\nOutput before it stopped:\n{printed}" if printed else ""
        if status is None:
            return error(tool, f"Execution timed out after {timeout_s} s{before}")
        if status != 0:
            return error(tool, f"Execution failed ({_cause(status)}):\n"
                               f"{_tail(err, MAX_STDERR_BYTES).rstrip()}{before}")
    return ok(tool, printed if printed else "Code executed successfully (no output)")


def python_exec(tool: ToolUse, **kwargs: Any) -> ToolResult:
    """Run Python code in a separate, limited process (when the operator allows it)."""
    return run_tool(tool, _run)
