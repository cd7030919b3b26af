"""Where the local store lives (store/local_server.py) and how a runner lock's holder
reads (store/runner_lock.py): pure parts, no server."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from strands_durable.settings import DurableSettings
from strands_durable.store.local_server import (
    MAX_SOCKET_PATH,
    LocalStoreError,
    local_url,
    private_dir,
    server_lock,
    socket_path,
    start_server,
    state_dir,
)
from strands_durable.store.runner_lock import Holder


def test_durable_home_then_xdg_state_home_then_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert state_dir(DurableSettings(home=str(tmp_path / "h"))) == tmp_path / "h"
    assert state_dir(DurableSettings()) == tmp_path / "xdg" / "strands-durable"
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")  # the spec says: ignore it
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert state_dir(DurableSettings()) == (
        tmp_path / "user" / ".local" / "state" / "strands-durable")


def test_a_socket_path_too_long_for_unix_sockets_moves_to_a_private_tmp_folder(
        tmp_path: Path) -> None:
    short = tmp_path / "h"
    assert socket_path(short) == short / "redis.sock"
    deep = tmp_path / ("x" * 120) / "h"
    moved = socket_path(deep)
    assert len(os.fsencode(moved)) <= MAX_SOCKET_PATH
    assert moved.parent == Path("/tmp") / f"durable-{os.getuid()}"
    assert moved == socket_path(deep) and moved != socket_path(tmp_path / ("y" * 120))
    assert local_url(short) == f"unix://{short}/redis.sock"


def test_the_store_folder_is_made_private(tmp_path: Path) -> None:
    home = tmp_path / "open"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    private_dir(home)
    assert home.stat().st_mode & 0o777 == 0o700
    (tmp_path / "file").write_text("")
    with pytest.raises(LocalStoreError, match=r"not a folder|File exists"):
        private_dir(tmp_path / "file")


def test_a_socket_path_that_is_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "redis.sock").mkdir()  # not a dead server's socket: nothing to remove
    with pytest.raises(LocalStoreError, match=r"redis\.sock.*not a socket"):
        start_server(tmp_path, tmp_path / "redis.sock")


def test_a_lock_file_that_cannot_be_opened_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "server.lock").mkdir()
    with pytest.raises(LocalStoreError, match=r"server\.lock.*remove it"), server_lock(tmp_path):
        pass


def test_holders_read_and_die_only_on_this_host() -> None:
    me = Holder.me()
    assert me.host == socket.gethostname() and me.pid == os.getpid() and not me.dead()
    assert f"pid {me.pid} on {me.host}" in me.describe()
    assert Holder(socket.gethostname(), 2**22 + 1, "t").dead()  # above pid_max: gone
    assert not Holder("another-host", 2**22 + 1, "t").dead()  # only its TTL tells
    odd = Holder.parse("not json")
    assert odd.pid == 0 and not odd.dead()
