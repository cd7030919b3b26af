"""The file tools' one directory: DURABLE_TOOL_FILES_DIR, and nothing outside it.

A path (relative to that directory, or absolute inside it) is resolved with every
symlink followed, and refused unless the real path lies inside the directory's real
path. The file is then opened by that real path with O_NOFOLLOW, so a symlink put in
its place after the check is refused rather than followed. Unset, every path is refused.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from strands_durable.settings import ToolPolicy
from strands_durable.worker.tools.native._common import ToolArgError
from strands_durable.worker.tools.net_guard import ToolRefused

__all__ = [
    "FILES_SETTING",
    "MAX_READ_BYTES",
    "MAX_SCAN_BYTES",
    "MAX_WRITE_BYTES",
    "Confined",
    "confine",
    "is_binary",
    "open_regular",
    "read_lines",
]

FILES_SETTING = "DURABLE_TOOL_FILES_DIR"
MAX_READ_BYTES = 1024 * 1024  # file_read, head
MAX_SCAN_BYTES = 16 * 1024 * 1024  # grep, search, tail
MAX_WRITE_BYTES = 1024 * 1024  # file_write, one call
BINARY_PROBE_BYTES = 8192


@dataclass(frozen=True)
class Confined:
    path: Path  # the real path, inside the root
    shown: str  # relative to the root: what results show (not the worker's layout)


def _root(policy: ToolPolicy) -> Path:
    if not policy.tool_files_dir:
        raise ToolRefused(f"refused: the file tools are off on this worker; the operator "
                          f"turns them on by setting {FILES_SETTING} to their directory")
    root = Path(os.path.realpath(policy.tool_files_dir))
    if not root.is_dir():
        raise ToolRefused(f"refused: {FILES_SETTING} does not name a directory")
    return root


def confine(path: str, policy: ToolPolicy) -> Confined:
    """The real path `path` names, inside the files directory, or ToolRefused."""
    if not path:
        raise ToolArgError("Error: 'path' parameter is required")
    if "\x00" in path:
        raise ToolArgError("Error: 'path' contains a NUL character")
    root = _root(policy)
    # An absolute `path` replaces the root in join(); the check below then decides.
    real = Path(os.path.realpath(os.path.join(root, path)))
    if real != root and root not in real.parents:
        raise ToolRefused(f"refused: {path!r} is outside the files directory "
                          f"({FILES_SETTING}); give a path relative to it")
    return Confined(real, real.relative_to(root).as_posix() or ".")


def open_regular(target: Confined) -> BinaryIO:
    """The file opened for reading; only a regular file (not a FIFO or device that
    could hang or never end), never through a symlink swapped in after the check."""
    try:
        # O_NONBLOCK: opening a FIFO does not wait for a writer; no effect on files.
        fd = os.open(target.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ToolArgError(f"Error: File not found: {target.shown}") from None
    except OSError as exc:
        raise ToolArgError(f"Error: cannot open {target.shown}: {exc.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ToolArgError(f"Error: Path is not a file: {target.shown}")
    return os.fdopen(fd, "rb")


def is_binary(handle: BinaryIO) -> bool:
    """A NUL byte in the first 8 KiB, as strands-cli judges it; rewinds."""
    probe = handle.read(BINARY_PROBE_BYTES)
    handle.seek(0)
    return b"\x00" in probe


def read_lines(handle: BinaryIO, max_bytes: int) -> tuple[list[str], bool]:
    """The file's lines (no line ends) within `max_bytes`, and whether it was longer;
    a line cut by the limit is left out."""
    data = handle.read(max_bytes + 1)
    truncated = len(data) > max_bytes
    text = data[:max_bytes].decode("utf-8", errors="replace")
    lines = text.split("\n")
    if truncated or lines[-1] == "":
        lines.pop()  # the cut line, or the empty one after the final newline
    return [line.rstrip("\r") for line in lines], truncated
