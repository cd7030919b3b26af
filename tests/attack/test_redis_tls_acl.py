"""Issue 10, row 7: TLS options and ACL users work the same for every role. A real
TLS-only redis-server with a private CA (and client certificates), an ACL user with a
password and the default user switched off; a real `arq worker`, `durable scheduler`,
`durable api` and the CLI on one `rediss://` URL.

Before the fix the CLI and the API worked but the worker did not: arq's
`RedisSettings.from_dsn` dropped the query options (`ssl_ca_certs`, `ssl_cert_reqs`...),
so it could never connect and retried forever.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import redis
from helpers import EXAMPLES, REPO, free_port, random_prefix, wait_for_sync
from helpers.fleet import Fleet, durable_bin

pytestmark = pytest.mark.e2e

USER, PASSWORD = "worker", "s3cret:p@ss/w0rd"  # URL-encoded in the URL
ACL = ["--user", "default", "off",
       "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all"]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """A private CA, a server certificate for localhost/127.0.0.1 and a client one."""
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=durable test CA", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"))
        openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"),
                "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
                "-extfile", str(d / "san.ext"), "-out", str(d / f"{name}.crt"))


@dataclass
class TlsRedis:
    port: int
    pki: Path
    process: subprocess.Popen[bytes]

    def url(self, query: str, password: str = PASSWORD) -> str:
        return f"rediss://{USER}:{quote(password, safe='')}@localhost:{self.port}/0?{query}"

    @property
    def private_ca(self) -> str:
        p = self.pki
        return (f"ssl_ca_certs={p / 'ca.crt'}&ssl_certfile={p / 'client.crt'}"
                f"&ssl_keyfile={p / 'client.key'}&ssl_check_hostname=true")


@pytest.fixture
def tls_redis(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TlsRedis]:
    """`--tls-auth-clients` is the parameter: `yes` (a client certificate is required)
    or `optional` (the default)."""
    auth_clients = getattr(request, "param", "optional")
    if not shutil.which("openssl"):
        pytest.skip("the openssl command is needed to make the test CA")
    pki = tmp_path / "pki"
    pki.mkdir()
    make_pki(pki)
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", "0", "--tls-port", str(port), "--bind", "127.0.0.1",
         "--tls-cert-file", str(pki / "server.crt"), "--tls-key-file", str(pki / "server.key"),
         "--tls-ca-cert-file", str(pki / "ca.crt"), "--tls-auth-clients", auth_clients,
         "--save", "", "--appendonly", "no", "--dir", str(pki), *ACL],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = TlsRedis(port, pki, process)

    def answers() -> bool:
        try:
            with redis.Redis(port=port, ssl=True, ssl_ca_certs=str(pki / "ca.crt"),
                             ssl_certfile=str(pki / "client.crt"),
                             ssl_keyfile=str(pki / "client.key"),
                             username=USER, password=PASSWORD, socket_timeout=1) as probe:
                return bool(probe.ping())
        except (redis.RedisError, OSError):
            return False

    try:
        wait_for_sync(answers, timeout_s=20, what="the TLS redis-server to answer")
        yield server
    finally:
        process.kill()
        process.wait(timeout=10)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text and quote(PASSWORD, safe="") not in text, text


def run_everything_over(url: str, tmp_path: Path) -> None:
    """A session submitted by the CLI runs to the end on a worker; the scheduler leads;
    the API's /healthz reaches Redis: all on `url`."""
    fleet = Fleet.create(url, random_prefix(), tmp_path, read_block_ms=100, heartbeat_s=0.5)
    fleet.start_worker()
    api_port = free_port()
    logs = {n: tmp_path / f"{n}.log" for n in ("scheduler", "api")}
    roles = [subprocess.Popen([*durable_bin(), *args], cwd=REPO, env=fleet.env,
                              stdout=logs[name].open("wb"), stderr=subprocess.STDOUT)
             for name, args in (("scheduler", ["scheduler", "--metrics-port", "0"]),
                                ("api", ["api", "--port", str(api_port)]))]
    try:
        submitted = fleet.cli("submit", str(EXAMPLES / "chain-research.yaml"))
        sid = submitted.stdout.strip()
        waited = fleet.cli("wait", sid, "--timeout", "90", check=False, timeout=120)
        assert waited.returncode == 0, fleet.logs()
        assert fleet.cli_json("status", sid)["status"] == "completed"
        wait_for_sync(lambda: "leads (fence" in logs["scheduler"].read_text(),
                      timeout_s=30, what="the scheduler to take the lead over TLS")

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{api_port}/healthz",
                                            timeout=5) as reply:
                    return reply.status == 200
            except OSError:
                return False

        wait_for_sync(healthy, timeout_s=30, what="the API's /healthz to reach Redis")
        assert_no_secret(submitted.stdout, submitted.stderr, waited.stdout, waited.stderr,
                         fleet.logs(), *(p.read_text() for p in logs.values()))
    finally:
        for proc in roles:
            proc.kill()
            proc.wait(timeout=30)
        fleet.stop_all()


@pytest.mark.parametrize("tls_redis", ["yes"], indirect=True)
def test_every_role_works_over_tls_with_a_private_ca_client_cert_and_acl_user(
        tls_redis: TlsRedis, tmp_path: Path) -> None:
    with pytest.raises((redis.ConnectionError, OSError)), redis.Redis(
            port=tls_redis.port, ssl=True, ssl_ca_certs=str(tls_redis.pki / "ca.crt"),
            username=USER, password=PASSWORD, socket_timeout=2) as no_client_cert:
        no_client_cert.ping()  # the server does require the client certificate
    run_everything_over(tls_redis.url(tls_redis.private_ca), tmp_path)


def test_every_role_works_over_tls_without_verifying_the_server(
        tls_redis: TlsRedis, tmp_path: Path) -> None:
    run_everything_over(tls_redis.url("ssl_cert_reqs=none"), tmp_path)


def test_a_worker_refused_by_redis_exits_with_one_clear_line(
        tls_redis: TlsRedis, tmp_path: Path) -> None:
    """A wrong password is no outage: waiting will not fix it."""
    wrong = "not-the-" + PASSWORD
    fleet = Fleet.create(tls_redis.url(tls_redis.private_ca, password=wrong),
                         random_prefix(), tmp_path)
    worker = fleet.start_worker()
    started = time.monotonic()
    try:
        worker.wait(timeout=60)
    finally:
        fleet.stop_all()
    assert worker.returncode != 0 and time.monotonic() - started < 60
    text = fleet.logs()
    refused = [line for line in text.splitlines() if "refused this worker" in line]
    assert len(refused) == 1, text
    assert f"rediss://{USER}:***@localhost:{tls_redis.port}/0" in refused[0]
    assert "Traceback" not in text
    assert wrong not in text and quote(wrong, safe="") not in text
