"""Issue 10, row 9: connect timeouts everywhere, and no secret in any error.

Before the fix `rediss://` to a plain-text port hung the CLI forever (no connect
timeout: the TLS handshake waits for an answer that never comes), an invalid URL gave a
traceback (exit 1), and a URL the settings refused was printed back with its password.
"""

from __future__ import annotations

import time

import pytest
from helpers import RedisServer, free_port, random_prefix
from helpers.fleet import Fleet

pytestmark = pytest.mark.e2e

SECRET = "hunter2-s3cret"
UNKNOWN_SID = "3b241101-e2bb-4255-8caf-4136c566a962"  # well-formed, never created
BOUND_S = 30  # the connect timeout is 5 s; anything near this bound is a hang


def cli(tmp_path, url: str, *args: str, **settings: object):
    fleet = Fleet.create(url, random_prefix(), tmp_path, **settings)
    started = time.monotonic()
    result = fleet.cli(*args, check=False, timeout=BOUND_S + 30)
    return result, time.monotonic() - started


def assert_clear(text: str) -> None:
    assert SECRET not in text, text
    assert "Traceback" not in text, text


def test_a_closed_port_is_a_clear_error_without_the_password(tmp_path) -> None:
    url = f"redis://app:{SECRET}@127.0.0.1:{free_port()}/0"
    result, took = cli(tmp_path, url, "sessions", "list")
    assert result.returncode == 1 and took < BOUND_S
    assert "cannot reach Redis at redis://app:***@127.0.0.1:" in result.stderr
    assert_clear(result.stdout + result.stderr)


def test_tls_to_a_plain_port_times_out_instead_of_hanging(
        redis_server: RedisServer, tmp_path) -> None:
    url = f"rediss://app:{SECRET}@127.0.0.1:{redis_server.port}/0"
    result, took = cli(tmp_path, url, "status", UNKNOWN_SID)
    assert result.returncode == 1 and took < BOUND_S, (took, result.stderr)
    assert f"cannot reach Redis at rediss://app:***@127.0.0.1:{redis_server.port}/0" \
        in result.stderr
    assert "no answer within 5s; is that port TLS?" in result.stderr
    assert_clear(result.stdout + result.stderr)


def test_the_connect_timeout_is_a_setting(redis_server: RedisServer, tmp_path) -> None:
    url = f"rediss://app:{SECRET}@127.0.0.1:{redis_server.port}/0"
    result, took = cli(tmp_path, url, "status", UNKNOWN_SID, redis_connect_timeout_s=1)
    # The error names the timeout in force (the default is 5 s); no wall-clock bound but
    # the hang guard, as a loaded machine's process start alone has taken 16 s.
    assert result.returncode == 1 and took < BOUND_S, (took, result.stderr)
    assert "no answer within 1s" in result.stderr, result.stderr
    assert_clear(result.stdout + result.stderr)


@pytest.mark.parametrize(("url", "problem"), [
    (f"htp://app:{SECRET}@127.0.0.1:6380/0", "expected redis://"),
    (f"redis://app:{SECRET}@127.0.0.1:port/0", "bad port"),
    (f"redis://app:{SECRET}@[::1/0", "unclosed '['"),
    (f"redis://app:{SECRET}@127.0.0.1:6380/0?socket_timeout=x", "unknown option"),
    (f"rediss://app:{SECRET}@127.0.0.1:6380/0?ssl_ca_certs=/no/ca.pem", "no such file"),
    (f"redis+sentinel://app:{SECRET}@s1:x/m", "bad sentinel port"),
])
def test_an_invalid_url_exits_2_naming_the_problem_not_the_password(
        tmp_path, url: str, problem: str) -> None:
    for args in (("sessions", "list"), ("status", UNKNOWN_SID)):
        result, _ = cli(tmp_path, url, *args)
        assert result.returncode == 2, (args, result.stderr)
        assert "DURABLE_REDIS_URL" in result.stderr and problem in result.stderr
        assert "app:***@" in result.stderr
        assert_clear(result.stdout + result.stderr)


def test_the_server_roles_refuse_an_invalid_url_in_one_line(tmp_path) -> None:
    """The worker, the scheduler and the API: exit 2, one line, no password."""
    url = f"redis://app:{SECRET}@127.0.0.1:port/0"
    fleet = Fleet.create(url, random_prefix(), tmp_path)
    worker = fleet.start_worker()
    worker.wait(timeout=BOUND_S)
    log = fleet.logs()
    assert worker.returncode == 2, log
    assert "worker not started: DURABLE_REDIS_URL='redis://app:***@127.0.0.1:port/0': " \
           "bad port" in log
    assert_clear(log)
    for role in (["scheduler"], ["api", "--port", str(free_port())]):
        result = fleet.cli(*role, check=False, timeout=BOUND_S)
        assert result.returncode == 2, (role, result.stderr)
        assert "bad port" in result.stderr
        assert_clear(result.stdout + result.stderr)
