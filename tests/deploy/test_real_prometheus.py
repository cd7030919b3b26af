"""A real Prometheus (Debian's `prometheus`) scrapes real `arq worker`s, the scheduler and
the API running real sessions on a private redis-server, with deploy/prometheus's job
names and alert rules. Every /metrics passes `promtool check metrics`; every PromQL
expression of the Grafana dashboards and of the alert rules is evaluated by that
Prometheus and returns data for the series it shows; the rules evaluate cleanly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import shutil
import signal
import subprocess
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import promql_parser
import pytest
import yaml
from helpers import REPO, free_port, poll_until, wait_for, wait_for_sync
from helpers.fleet import Fleet, durable_bin

from bench.limited_llm import limited_llm
from strands_durable.models import SessionStatus
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.connect import open_store
from strands_durable.store.store import Store

DASHBOARDS = sorted((REPO / "deploy" / "grafana" / "dashboards").glob("*.json"))
PROM_DIR = REPO / "deploy" / "prometheus"
SCRAPE_S = 1
# Grafana's $__rate_interval is max($__interval + scrape, 4 * scrape).
RATE_INTERVAL = f"{4 * SCRAPE_S}s"
# Dashboard variables set to "All", as Grafana sends them.
SUBSTITUTIONS = {"$__rate_interval": RATE_INTERVAL, "$pattern": ".*", "$agent": ".*"}
COMPARISONS = {">", "<", ">=", "<=", "==", "!="}
SET_OPERATORS = {"and", "or", "unless"}

# Steps here take a little time so that the step duration histograms and the running
# gauges have something to show; nothing waits on how long they take.
CHAIN = """
version: 0
name: research
runtime:
  provider: scripted
  script:
    delay_s: 0.05
    rules:
      - {agent: researcher, turn: 1, tool_calls: [{name: calculator, input: {expression: "6 * 7"}}]}
tools: {python: [calculator]}
agents:
  researcher: {prompt: "You research.", tools: [calculator]}
  writer: {prompt: "You write."}
pattern:
  type: chain
  config:
    steps:
      - {agent: researcher, input: "facts about tides"}
      - {agent: writer, input: "a note on {{ last_response }}"}
"""
FLAKY = """
version: 0
name: flaky
runtime:
  provider: scripted
  failure_policy: {retries: 1, backoff: constant, wait_min: 1, wait_max: 1}
  script: {rules: [{agent: flaky, error: "rate limited"}]}
agents:
  flaky: {prompt: "You fail."}
pattern:
  type: chain
  config:
    steps:
      - {agent: flaky, input: "try"}
"""
LONG = """
version: 0
name: long
runtime: {provider: scripted, script: {delay_s: DELAY}}
agents:
  worker: {prompt: "You work."}
pattern:
  type: chain
  config:
    steps:
STEPS"""


# One step that a worker dies in the middle of (at a breakpoint), so another re-claims it.
VICTIM = """
version: 0
name: victim
runtime: {provider: scripted}
agents:
  worker: {prompt: "You work."}
pattern:
  type: chain
  config:
    steps:
      - {agent: worker, input: "the step a worker dies in"}
"""


# Model calls through the fleet's shared provider capacity (worker/capacity.py), against a
# local OpenAI-compatible server with a small account limit: the capacity panels' waits,
# throttles, limits in force and learned.
LIMITED = """
version: 0
name: limited
runtime: {provider: openai, model_id: gpt-limited, host: "HOST"}
agents:
  a: {prompt: "You answer."}
pattern:
  type: chain
  config:
    steps:
      - {agent: a, input: "one"}
      - {agent: a, input: "two"}
"""


def long_chain(steps: int, delay: float) -> str:
    body = "".join(f"      - {{agent: worker, input: \"part {i}\"}}\n" for i in range(steps))
    return LONG.replace("DELAY", str(delay)).replace("STEPS", body)


# -- the expressions under test -----------------------------------------------------------
def substitute(expr: str) -> str:
    for name, value in SUBSTITUTIONS.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, f"unknown dashboard variable in {expr}"
    return expr


def dashboard_exprs() -> list[tuple[str, str]]:
    found = []
    for path in DASHBOARDS:
        doc = json.loads(path.read_text())
        for panel in doc["panels"]:
            for t in panel.get("targets", []):
                found.append((f"{path.name}: {panel['title']} [{t['refId']}]",
                              substitute(t["expr"])))
    return found


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((PROM_DIR / "alerts.yml").read_text())
    return [rule for group in doc["groups"] for rule in group["rules"]]


def shown(expr: Any) -> list[str]:
    """The series a rule's condition is about: the left side of each `> threshold`,
    through and/or/unless."""
    if isinstance(expr, promql_parser.ParenExpr):
        return shown(expr.expr)
    if isinstance(expr, promql_parser.BinaryExpr):
        op = str(expr.op)
        if op in SET_OPERATORS:
            return shown(expr.lhs) + shown(expr.rhs)
        if op in COMPARISONS and isinstance(expr.rhs, promql_parser.NumberLiteral):
            return shown(expr.lhs)
    return [expr.prettify()]


def selectors(expr: Any) -> Iterator[str]:
    """Every series selector in `expr`, as a query of its own."""
    if isinstance(expr, promql_parser.VectorSelector):
        yield expr.prettify()
    elif isinstance(expr, promql_parser.MatrixSelector):
        yield expr.vector_selector.prettify()
    for attr in ("expr", "lhs", "rhs", "vector_selector"):
        child = getattr(expr, attr, None)
        if child is not None and not isinstance(expr, promql_parser.MatrixSelector):
            yield from selectors(child)
    for arg in getattr(expr, "args", None) or []:
        yield from selectors(arg)


def all_queries() -> dict[str, str]:
    """name -> PromQL: each dashboard target, each rule's shown series, and every
    selector either uses."""
    queries: dict[str, str] = {}
    for name, expr in dashboard_exprs():
        queries[name] = expr
        for sel in selectors(promql_parser.parse(expr)):
            queries.setdefault(f"selector {sel}", sel)
    for rule in alert_rules():
        parsed = promql_parser.parse(rule["expr"])
        for n, part in enumerate(shown(parsed)):
            queries[f"alerts.yml: {rule['alert']} [{n}]"] = part
        for sel in selectors(parsed):
            queries.setdefault(f"selector {sel}", sel)
    return queries


def test_dashboards_are_well_formed() -> None:
    """No hard-coded rate windows, one data source variable, unique panel ids, panels
    inside the 24-column grid; and the expressions parse."""
    assert [p.name for p in DASHBOARDS] == ["fleet.json", "workflow.json"]
    for path in DASHBOARDS:
        doc = json.loads(path.read_text())
        names = [v["name"] for v in doc["templating"]["list"]]
        assert names[0] == "datasource", path.name
        ids = [p["id"] for p in doc["panels"]]
        assert len(ids) == len(set(ids)), path.name
        for panel in doc["panels"]:
            grid = panel["gridPos"]
            assert grid["x"] + grid["w"] <= 24, panel["title"]
            for t in panel.get("targets", []):
                assert t["datasource"]["uid"] == "${datasource}", panel["title"]
                windows = [w for w in _windows(t["expr"]) if w != "$__rate_interval"]
                assert not windows, f"{panel['title']}: fixed rate window {windows}"
    assert len(all_queries()) > 40
    workflow = json.loads((REPO / "deploy/grafana/dashboards/workflow.json").read_text())
    assert {"pattern", "agent"} <= {v["name"] for v in workflow["templating"]["list"]}


def _windows(expr: str) -> list[str]:
    import re

    return re.findall(r"\[([^\]:]+)\]", expr)


def test_shown_series_of_a_compound_rule() -> None:
    parsed = promql_parser.parse("max by (shard) (deriv(x[10m])) > 0 and on (shard) "
                                 "max by (shard) (x) > 50")
    assert shown(parsed) == ["max by (shard) (deriv(x[10m]))", "max by (shard) (x)"]
    assert list(selectors(parsed)) == ["x", "x"]


# -- the processes -------------------------------------------------------------------------
@dataclass
class Stack:
    fleet: Fleet
    tmp: Path
    api_port: int
    scheduler_port: int
    worker_ports: list[int]
    llm_url: str = ""  # the limited OpenAI-compatible server's base URL
    prom_port: int = 0
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    port_of_worker: dict[int, int] = field(default_factory=dict)  # pid -> metrics port

    @property
    def metrics_urls(self) -> dict[str, str]:
        urls = {"api": f"http://127.0.0.1:{self.api_port}/metrics",
                "scheduler": f"http://127.0.0.1:{self.scheduler_port}/metrics"}
        for n, port in enumerate(self.worker_ports):
            urls[f"worker{n}"] = f"http://127.0.0.1:{port}/metrics"
        return urls

    def start(self, *args: str, name: str) -> subprocess.Popen[bytes]:
        log = (self.tmp / f"{name}.log").open("wb")
        proc = subprocess.Popen(list(args), cwd=REPO, env=self.fleet.env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def start_worker(self, port: int) -> subprocess.Popen[bytes]:
        self.fleet.env["DURABLE_METRICS_PORT"] = str(port)
        proc = self.fleet.start_worker()
        self.port_of_worker[proc.pid] = port
        return proc

    def prometheus_config(self) -> Path:
        """deploy/prometheus/prometheus.yml with its job names, pointed at this stack."""
        config = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text())
        config["global"] = {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": f"{SCRAPE_S}s",
                            "evaluation_interval": f"{SCRAPE_S}s"}
        config["rule_files"] = [str(PROM_DIR / "alerts.yml")]
        targets = {"durable-api": [self.api_port], "durable-worker": self.worker_ports,
                   "durable-scheduler": [self.scheduler_port]}
        for job in config["scrape_configs"]:
            job.pop("dns_sd_configs", None)
            job["static_configs"] = [{"targets": [f"127.0.0.1:{p}"
                                                  for p in targets.pop(job["job_name"])]}]
        assert not targets, f"jobs missing from prometheus.yml: {targets}"
        path = self.tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        return path

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=30)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.tmp.glob("*.log")))


def get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            return str(response.read().decode())
    except OSError:
        return ""


@pytest.fixture
def stack(fleet_factory, tmp_path: Path, allow_provider_host, monkeypatch) -> Iterator[Stack]:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("prometheus/promtool are not installed and tests/run.sh could not "
                    "install Debian's `prometheus` package (apt-get install prometheus)")
    llm = contextlib.ExitStack()
    # names_limit=False: a server that names its limit only on a 429, so the fleet meets
    # it and the throttle panels have data.
    server = llm.enter_context(limited_llm(per_second=4, at_once=2, delay_s=0.05,
                                           retry_after_s=0.5, names_limit=False))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the workers inherit both
    allow_provider_host("openai", server.url())
    fleet: Fleet = fleet_factory(heartbeat_s=1, claim_idle_ms=1500, read_block_ms=200,
                                 timer_poll_ms=100, scheduler_check_s=1)
    s = Stack(fleet, tmp_path, free_port(), free_port(), [free_port(), free_port()],
              llm_url=server.url("/v1"))
    try:
        for port in s.worker_ports:
            s.start_worker(port)
        s.start(*durable_bin(), "scheduler", "--metrics-port", str(s.scheduler_port),
                name="scheduler")
        s.start(*durable_bin(), "api", "--host", "127.0.0.1", "--port", str(s.api_port),
                name="api")
        wait_for_sync(lambda: all(get(u) for u in s.metrics_urls.values()), timeout_s=60,
                      what="every role's /metrics")
        s.prom_port = free_port()
        s.start(shutil.which("prometheus") or "prometheus",
                f"--config.file={s.prometheus_config()}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{s.prom_port}", "--log.level=warn",
                name="prometheus")
        wait_for_sync(lambda: "Ready" in get(f"http://127.0.0.1:{s.prom_port}/-/ready"),
                      timeout_s=60, what="prometheus to be ready")
        yield s
    finally:
        s.stop()
        llm.close()


# -- the workload ----------------------------------------------------------------------------
@contextlib.asynccontextmanager
async def workload(store: Store, api: httpx.AsyncClient, llm_url: str
                   ) -> AsyncIterator[None]:
    """Sessions keep arriving (and one is paused and resumed through the API) while the
    expressions are evaluated, so every rate window holds some work."""
    stop = asyncio.Event()
    pausable, _ = await start_session(store, load_spec_text(long_chain(2000, 0.05), "l.yaml"))

    async def run() -> None:
        n = 0
        while not stop.is_set():
            await start_session(store, load_spec_text(CHAIN, "chain.yaml"))
            await start_session(store, load_spec_text(LIMITED.replace("HOST", llm_url),
                                                      "limited.yaml"))
            if n % 4 == 0:
                await start_session(store, load_spec_text(FLAKY, "flaky.yaml"))
            paused = await api.post(f"/v1/sessions/{pausable}/pause")
            if paused.status_code == 200:
                resumed = await api.post(f"/v1/sessions/{pausable}/resume")
                assert resumed.status_code == 200, resumed.text
            n += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=0.4)

    task = asyncio.create_task(run())
    try:
        yield
    finally:
        stop.set()
        await task  # surfaces a failed pause/resume


async def prom_query(client: httpx.AsyncClient, expr: str) -> list[dict[str, Any]]:
    reply = await client.get("/api/v1/query", params={"query": expr})
    body = reply.json()
    assert body["status"] == "success", f"{expr}: {body}"
    return list(body["data"]["result"])


def has_number(result: list[dict[str, Any]]) -> bool:
    return any(not math.isnan(float(r["value"][1])) for r in result)


async def kill_the_worker_running(stack: Stack, store: Store) -> str:
    """Start a session whose step stops at a breakpoint; SIGKILL the worker holding it,
    clear the breakpoint and start a replacement on the same metrics port (Prometheus'
    target comes back). Returns the session's id."""
    breakpoints = stack.fleet.breakpoints
    breakpoints.set("victim", "step:0")
    sid, _ = await start_session(store, load_spec_text(VICTIM, "victim.yaml"))
    (hit,) = await breakpoints.wait("victim", "step:0")
    victim = next(p for p in stack.fleet.workers if p.pid == hit.pid)
    stack.fleet.kill(victim)
    breakpoints.clear("victim", "step:0")
    stack.start_worker(stack.port_of_worker[victim.pid])
    return sid


# -- the test --------------------------------------------------------------------------------
@pytest.mark.e2e
async def test_prometheus_scrapes_the_fleet_and_every_expression_has_data(
        stack: Stack, redis_server, prefix: str) -> None:
    store = open_store(DurableSettings(redis_url=redis_server.url, key_prefix=prefix))
    prom = httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.prom_port}", timeout=10)
    api = httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.api_port}", timeout=10)
    try:
        async with workload(store, api, stack.llm_url):
            # A worker dies mid-step: its entry is re-claimed by another one.
            victim = await kill_the_worker_running(stack, store)
            await wait_for(lambda: _completed(store, victim), timeout_s=60,
                           what="the re-claimed step to commit")

            async def targets_up() -> bool:
                active = (await prom.get("/api/v1/targets")).json()["data"]["activeTargets"]
                return len(active) == 4 and all(t["health"] == "up" for t in active)

            await wait_for(targets_up, timeout_s=60, what="every scrape target up")
            await wait_for(lambda: _positive(prom, "sum(durable_steps_reclaimed_total)"),
                           timeout_s=60, what="the reclaim in Prometheus")

            queries = all_queries()
            missing = dict(queries)

            async def all_have_data() -> bool:
                for name, expr in list(missing.items()):
                    if has_number(await prom_query(prom, expr)):
                        del missing[name]
                return not missing

            if await poll_until(all_have_data, timeout_s=120, interval_s=1.0) is None:
                pytest.fail("no data in Prometheus for:\n" + "\n".join(
                    f"  {n}: {missing[n]}" for n in sorted(missing)) + "\n" + stack.logs())

            # Every rule evaluated, none with an error.
            async def rules_evaluated() -> list[dict[str, Any]] | None:
                groups = (await prom.get("/api/v1/rules")).json()["data"]["groups"]
                rules = [r for g in groups for r in g["rules"]]
                done = rules and all(r.get("lastEvaluation", "").startswith("2")
                                     and r.get("evaluationTime", 0) > 0 for r in rules)
                return rules if done else None

            rules = await wait_for(rules_evaluated, timeout_s=30, what="rule evaluations")
            assert len(rules) == len(alert_rules())
            assert all(r["health"] == "ok" and not r.get("lastError") for r in rules), rules
            # A healthy fleet (one worker lost and replaced) raises no alert.
            assert [r["name"] for r in rules if r["state"] == "firing"] == []

        # Each role's exposition passes the linter.
        promtool = shutil.which("promtool") or "promtool"
        for role, url in stack.metrics_urls.items():
            body = get(url)
            assert "durable_" in body, role
            lint = subprocess.run([promtool, "check", "metrics"], input=body, text=True,
                                  capture_output=True, timeout=30)
            assert lint.returncode == 0, f"{role}: {lint.stdout}{lint.stderr}"
    finally:
        await prom.aclose()
        await api.aclose()
        await store.redis.aclose()


async def _completed(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status == SessionStatus.COMPLETED


async def _positive(prom: httpx.AsyncClient, expr: str) -> bool:
    return any(float(r["value"][1]) > 0 for r in await prom_query(prom, expr))

