"""deploy/prometheus: the alert rules pass their promtool unit tests, every alert is
tested firing, and the scrape config is valid and names the roles the deploy uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO

PROM_DIR = REPO / "deploy" / "prometheus"
ALERTS = PROM_DIR / "alerts.yml"
ALERT_TESTS = PROM_DIR / "alerts.test.yml"
CONFIG = PROM_DIR / "prometheus.yml"
# Roles, ports and job names agreed with the compose file and the chart.
JOBS = {"durable-api": 8000, "durable-worker": 9464, "durable-scheduler": 9465}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.skip("promtool is not installed and tests/run.sh could not install Debian's "
                    "`prometheus` package (apt-get install prometheus)")
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def test_rules_are_valid() -> None:
    result = promtool("check", "rules", ALERTS.name, cwd=PROM_DIR)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_unit_tests_pass() -> None:
    result = promtool("test", "rules", ALERT_TESTS.name, cwd=PROM_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    """The tests pin the rules: a commit-latency alert at 300 ms instead of 100 ms (or a
    no-worker alert without its `for`) fails them."""
    for old, new in (("> 0.1\n", "> 0.3\n"), ("        for: 2m\n", "")):
        shutil.copy(ALERT_TESTS, tmp_path / ALERT_TESTS.name)
        text = ALERTS.read_text()
        assert old in text
        (tmp_path / ALERTS.name).write_text(text.replace(old, new, 1))
        result = promtool("test", "rules", ALERT_TESTS.name, cwd=tmp_path)
        assert result.returncode != 0, f"{old!r} -> {new!r} went unnoticed"


def test_every_alert_is_tested_firing_and_documented() -> None:
    tests = yaml.safe_load(ALERT_TESTS.read_text())["tests"]
    fired = {case["alertname"] for t in tests for case in t.get("alert_rule_test", [])
             if case.get("exp_alerts")}
    rules = alert_rules()
    names = {rule["alert"] for rule in rules}
    for wanted in ("DurableStreamLagGrowing", "DurableDeadLetters", "DurableNoLiveWorkers",
                   "DurableCheckpointCommitSlow", "DurableSessionsStuck"):
        assert wanted in names
    assert names == fired, f"alerts never tested firing: {sorted(names - fired)}"
    for rule in rules:
        assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]


def test_scrape_config_is_valid_and_scrapes_every_role(tmp_path: Path) -> None:
    result = promtool("check", "config", CONFIG.name, cwd=PROM_DIR)
    assert result.returncode == 0, result.stdout + result.stderr
    config = yaml.safe_load(CONFIG.read_text())
    assert config["rule_files"] == ["alerts.yml"]
    ports = {}
    for job in config["scrape_configs"]:
        targets = [t for sc in job.get("static_configs", []) for t in sc["targets"]]
        targets += [f"{n}:{sd['port']}" for sd in job.get("dns_sd_configs", [])
                    for n in sd["names"]]
        (target,) = targets
        ports[job["job_name"]] = int(target.rsplit(":", 1)[1])
    assert ports == JOBS
