"""The Helm chart, rendered offline by Helm's own Go engine (helm-python-sdk: Helm v4's SDK,
no binary, no cluster).

- values.schema.json accepts every supported variant and refuses bad values by name;
- every rendered manifest validates against the Kubernetes JSON schemas in strict mode
  (kubernetes-validate, oldest and newest supported Kubernetes), and the KEDA and
  prometheus-operator kinds against models generated from their CRDs (cloudcoil);
- what the manifests say agrees with the code: the stream keys and consumer group of
  store/keys.py, the settings DurableSettings reads, the sentinel URL form that
  store/redis_url.py parses, grace periods longer than a step's drain.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from cloudcoil.models.keda import v1alpha1 as keda
from cloudcoil.models.prometheus_operator import v1 as promop
from helpers import REPO
from pydantic import BaseModel
from redis.connection import parse_url

from strands_durable.redis_targets import SentinelTarget, parse_sentinel_url
from strands_durable.settings import DurableSettings
from strands_durable.store.keys import CONSUMER_GROUP, Keys

CHART = REPO / "helm" / "strands-durable"
KUBE_VERSIONS = ["1.25.0", kubernetes_validate.latest_version()]  # Chart.yaml: >=1.25
ROLE_COMMANDS = {"api": ["durable", "api"], "scheduler": ["durable", "scheduler"],
                 "worker": ["arq", "strands_durable.worker.WorkerSettings"]}
CRD_MODELS: dict[tuple[str, str], type[BaseModel]] = {
    ("keda.sh/v1alpha1", "ScaledObject"): keda.ScaledObject,
    ("keda.sh/v1alpha1", "TriggerAuthentication"): keda.TriggerAuthentication,
    ("monitoring.coreos.com/v1", "ServiceMonitor"): promop.ServiceMonitor,
}
# Read by the code but not a DurableSettings field.
ENV_OUTSIDE_SETTINGS = {"DURABLE_LOG_LEVEL"}

SENTINEL = {"redis": {"mode": "sentinel", "password": "pw",
                      "sentinel": {"hosts": ["redis-node-0.redis:26379",
                                             "redis-node-1.redis:26379"],
                                   "masterName": "mymaster"}},
            "settings": {"shards": 4}, "serviceMonitor": {"enabled": True}}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "keda-off": {"worker": {"autoscaling": {"keda": {"enabled": False}}}},
    "fixed-replicas": {"worker": {"replicas": 5, "autoscaling": {
        "keda": {"enabled": False}, "hpa": {"enabled": False}}}},
    "external-redis": {"redis": {"host": "redis.prod.internal", "port": 6380, "db": 2,
                                 "tls": True, "username": "app", "password": "s3cr@t/:pw"},
                       "api": {"token": "t0ken"}, "serviceMonitor": {"enabled": True},
                       "worker": {"autoscaling": {"keda": {"metric": "streamLength"}}}},
    "existing-secrets": {"redis": {"existingSecret": "prod-redis",
                                   "existingSecretPasswordKey": "password"},
                         "api": {"existingSecret": "prod-api"}},
    "sentinel": SENTINEL,
    "sharded-monitored": {"settings": {"shards": 3, "keyPrefix": "prod", "shutdownGraceS": 45,
                                       "claimIdleMs": 30000, "workerAdaptiveConcurrency": False,
                                       "failoverBeatMs": 1000, "failoverMissedBeats": 4},
                          "serviceMonitor": {"enabled": True,
                                             "labels": {"release": "kube-prometheus"}}},
    "api-and-scheduler-off": {"api": {"enabled": False}, "scheduler": {"enabled": False}},
    "provider-hosts": {"settings": {"providerHosts": {
        "openai": ["https://gateway.internal:8443/openai", "http://10.0.0.9:8000"],
        "ollama": ["http://ollama:11434"]},
        "capacityLimits": [{"provider": "openai", "model": "gpt-4o", "rpm": 500,
                            "in_flight": 20}]}},
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        manifests = chart.render(values, name="rel", namespace="durable", is_install=True)
    docs = []
    for path, text in sorted(manifests.items()):
        if path.endswith(".txt"):
            continue
        docs += [d for d in yaml.safe_load_all(text) if d]
    return docs


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def containers(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for d in of_kind(docs, "Deployment"):
        for c in d["spec"]["template"]["spec"]["containers"]:
            yield d["metadata"]["labels"]["app.kubernetes.io/component"], c


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def secret_data(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    return dict(named(docs, "Secret", name)["stringData"])


def merged(extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(VARIANTS["default"])
    out.update(extra)
    return out


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(values) for name, values in VARIANTS.items()}


# --- the chart itself ------------------------------------------------------------------

def test_helm_lint_strict_finds_nothing_above_info() -> None:
    report = helm.lint(CHART, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_values_schema_accepts_every_variant(variant: str) -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(VARIANTS[variant])


@pytest.mark.parametrize(("values", "where"), [
    ({"worker": {"replica": 3}}, "'replica' not allowed"),
    ({"redis": {"mode": "redis-cluster"}}, "/redis/mode"),
    ({"redis": {"mode": "sentinel"}}, "/redis/sentinel/hosts"),
    ({"redis": {"sentinel": {"hosts": ["a:1,b:2"]}}}, "/redis/sentinel/hosts/0"),
    ({"settings": {"shards": 0}}, "/settings/shards"),
    ({"settings": {"keyPrefix": "has space"}}, "/settings/keyPrefix"),
    ({"settings": {"workerAdaptiveConcurrency": "yes"}}, "/settings/workerAdaptiveConcurrency"),
    ({"settings": {"failoverBeatMs": 5}}, "/settings/failoverBeatMs"),
    ({"settings": {"failoverMissedBeats": 1}}, "/settings/failoverMissedBeats"),
    ({"settings": {"providerHosts": {"openai": ["api.example.com"]}}},
     "/settings/providerHosts/openai/0"),
    ({"settings": {"providerHosts": {"mistral": ["https://x"]}}}, "/settings/providerHosts"),
    ({"settings": {"capacityLimits": [{"provider": "openai", "rpm": -1}]}},
     "/settings/capacityLimits/0/rpm"),
    ({"settings": {"extra": {"OPENAI_API_KEY": "x"}}}, "OPENAI_API_KEY"),
    ({"worker": {"autoscaling": {"keda": {"metric": "pendingEntriesCount"}}}},
     "/worker/autoscaling/keda/metric"),
    ({"serviceMonitor": {"enabled": "yes"}}, "/serviceMonitor/enabled"),
    ({"api": {"renderWorkers": 0}}, "/api/renderWorkers"),
])
def test_values_schema_refuses_bad_values_by_name(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as info:
        chart.validate_schema(values)
    assert where in str(info.value)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_manifest_validates_against_its_schema(
        rendered: dict[str, list[dict[str, Any]]], variant: str) -> None:
    docs = rendered[variant]
    assert docs
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key in CRD_MODELS:
            # Generated from the CRD's openAPIV3Schema; a field the model drops (unknown)
            # or coerces (wrong type) shows up as a difference in the round trip.
            model = CRD_MODELS[key].model_validate(doc)
            assert model.model_dump(mode="json", by_alias=True, exclude_unset=True) == doc
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def test_the_validation_catches_a_broken_manifest(rendered: dict[str, list[dict[str, Any]]]
                                                  ) -> None:
    deployment = copy.deepcopy(of_kind(rendered["default"], "Deployment")[0])
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBE_VERSIONS[-1], strict=True)
    scaled = copy.deepcopy(of_kind(rendered["default"], "ScaledObject")[0])
    scaled["spec"]["triggers"][0]["metadata"]["lagCount"] = 16  # KEDA wants strings
    with pytest.raises(ValueError):
        keda.ScaledObject.model_validate(scaled)


# --- roles, probes, security ---------------------------------------------------------

@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_role_runs_its_command_non_root_with_probes(
        rendered: dict[str, list[dict[str, Any]]], variant: str) -> None:
    docs = rendered[variant]
    roles = {role for role, _ in containers(docs)}
    expected = {"worker"} | {r for r in ("api", "scheduler")
                             if VARIANTS[variant].get(r, {}).get("enabled", True)}
    assert roles == expected
    for role, c in containers(docs):
        assert c["command"] == ROLE_COMMANDS[role]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            action = c[probe].get("httpGet") or c[probe]["tcpSocket"]
            assert action["port"] in ports, f"{role} {probe} names no port"
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        env = env_of(c)
        if role == "api":  # /healthz fails while Redis is down: readiness, not liveness
            assert c["readinessProbe"]["httpGet"]["path"] == "/healthz"
            assert "httpGet" not in c["livenessProbe"]
            assert int(env["DURABLE_API_PORT"]) == ports["http"]
        else:  # worker and scheduler serve /metrics on DURABLE_METRICS_PORT
            assert c["livenessProbe"]["httpGet"]["path"] == "/metrics"
            assert int(env["DURABLE_METRICS_PORT"]) == ports["metrics"]
            # Prometheus and the probes come from outside the pod (loopback is the default).
            assert env["DURABLE_METRICS_HOST"] == "0.0.0.0"
    for d in of_kind(docs, "Deployment"):
        pod = d["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_settings_configmap_is_what_durable_settings_reads(
        rendered: dict[str, list[dict[str, Any]]], variant: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = named(rendered[variant], "ConfigMap", "rel-strands-durable")["data"]
    fields = {f"DURABLE_{name.upper()}" for name in DurableSettings.model_fields}
    assert set(data) - fields <= ENV_OUTSIDE_SETTINGS, "a DURABLE_* name the code never reads"
    for name, value in data.items():
        monkeypatch.setenv(name, value)
    settings = DurableSettings()  # raises on a value the code would refuse
    wanted = VARIANTS[variant].get("settings", {})
    assert settings.shards == wanted.get("shards", 1)
    assert settings.key_prefix == wanted.get("keyPrefix", "durable")
    assert settings.worker_adaptive_concurrency is wanted.get("workerAdaptiveConcurrency", True)
    assert settings.failover is wanted.get("failover", True)
    assert (settings.failover_beat_ms, settings.failover_missed_beats) == (
        wanted.get("failoverBeatMs", 500), wanted.get("failoverMissedBeats", 6))
    for provider in ("openai", "anthropic", "ollama"):
        listed = tuple(wanted.get("providerHosts", {}).get(provider, ()))
        assert settings.hosts(provider) == listed
    declared = [limit.model_dump(exclude_defaults=True) for limit in settings.declared_limits]
    assert declared == wanted.get("capacityLimits", [])


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_worker_grace_outlasts_the_shutdown_drain(
        rendered: dict[str, list[dict[str, Any]]], variant: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    docs = rendered[variant]
    for name, value in named(docs, "ConfigMap", "rel-strands-durable")["data"].items():
        monkeypatch.setenv(name, value)
    settings = DurableSettings()
    drain_s = settings.shutdown_grace_s + settings.effective_lease_renew_ms / 1000
    worker = named(docs, "Deployment", "rel-strands-durable-worker")
    assert worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > drain_s
    rolling = worker["spec"]["strategy"]["rollingUpdate"]
    assert rolling["maxUnavailable"] == 0


def test_a_grace_period_too_short_for_the_drain_is_refused() -> None:
    with pytest.raises(helm.HelmRenderError, match="must exceed"):
        render({"worker": {"terminationGracePeriodSeconds": 20}})


# --- autoscaling -----------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["default", "sentinel", "sharded-monitored",
                                     "external-redis"])
def test_keda_scales_workers_with_one_trigger_per_shard(
        rendered: dict[str, list[dict[str, Any]]], variant: str) -> None:
    docs = rendered[variant]
    settings = VARIANTS[variant].get("settings", {})
    keys = Keys(prefix=settings.get("keyPrefix", "durable"), shards=settings.get("shards", 1))
    (scaled,) = of_kind(docs, "ScaledObject")
    worker = named(docs, "Deployment", "rel-strands-durable-worker")
    assert scaled["spec"]["scaleTargetRef"]["name"] == worker["metadata"]["name"]
    assert "replicas" not in worker["spec"], "KEDA owns the replica count"
    assert of_kind(docs, "HorizontalPodAutoscaler") == []
    triggers = scaled["spec"]["triggers"]
    streams = [t for t in triggers if "stream" in t["metadata"]]
    assert [t["metadata"]["stream"] for t in streams] == keys.streams()
    assert {t["metadata"]["consumerGroup"] for t in streams} == {CONSUMER_GROUP}
    # The steps fair dispatch moved off each stream: a list trigger a shard.
    lists = [t for t in triggers if "listName" in t["metadata"]]
    assert [t["metadata"]["listName"] for t in lists] == [
        keys.fair_waiting(k) for k in range(keys.shards)]
    assert len(triggers) == 2 * keys.shards
    if keys.shards > 1:
        formula = scaled["spec"]["advanced"]["scalingModifiers"]["formula"]
        assert sorted(formula.split(" + ")) == sorted(t["name"] for t in triggers)
    else:
        assert "advanced" not in scaled["spec"]


def test_keda_metric_and_address_follow_values(rendered: dict[str, list[dict[str, Any]]]
                                               ) -> None:
    (default,) = of_kind(rendered["default"], "ScaledObject")
    meta = default["spec"]["triggers"][0]["metadata"]
    assert (meta["address"], meta["lagCount"], meta["activationLagCount"]) == (
        "redis-master:6379", "16", "0")
    (external,) = of_kind(rendered["external-redis"], "ScaledObject")
    meta = external["spec"]["triggers"][0]["metadata"]
    assert (meta["address"], meta["databaseIndex"], meta["enableTLS"]) == (
        "redis.prod.internal:6380", "2", "true")
    assert meta["streamLength"] == "16" and "lagCount" not in meta
    listed = external["spec"]["triggers"][1]
    assert listed["type"] == "redis" and listed["metadata"]["listLength"] == "16"
    assert listed["metadata"]["address"] == "redis.prod.internal:6380"


@pytest.mark.parametrize(("variant", "replicas"), [("keda-off", None), ("fixed-replicas", 5)])
def test_without_keda_an_hpa_or_fixed_replicas(
        rendered: dict[str, list[dict[str, Any]]], variant: str, replicas: int | None) -> None:
    docs = rendered[variant]
    assert of_kind(docs, "ScaledObject") == [] and of_kind(docs, "TriggerAuthentication") == []
    worker = named(docs, "Deployment", "rel-strands-durable-worker")
    hpas = of_kind(docs, "HorizontalPodAutoscaler")
    if replicas is None:
        (hpa,) = hpas
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "name": worker["metadata"]["name"]}
        assert "replicas" not in worker["spec"]
    else:
        assert hpas == [] and worker["spec"]["replicas"] == replicas


# --- Redis: standalone, external, existing Secret, Sentinel ----------------------------

def redis_url_env(docs: list[dict[str, Any]]) -> dict[str, Any]:
    refs = {role: env_of(c)["DURABLE_REDIS_URL"]["secretKeyRef"] for role, c in containers(docs)}
    assert len({(r["name"], r["key"]) for r in refs.values()}) == 1, "roles disagree"
    return next(iter(refs.values()))


def test_external_redis_url_carries_tls_db_and_an_encoded_password(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["external-redis"]
    ref = redis_url_env(docs)
    url = secret_data(docs, ref["name"])[ref["key"]]
    assert url.startswith("rediss://")
    parsed = parse_url(url)
    assert (parsed["host"], parsed["port"], parsed["db"]) == ("redis.prod.internal", 6380, 2)
    assert (parsed["username"], parsed["password"]) == ("app", "s3cr@t/:pw")
    (auth,) = of_kind(docs, "TriggerAuthentication")
    (target,) = auth["spec"]["secretTargetRef"]
    assert secret_data(docs, target["name"])[target["key"]] == "s3cr@t/:pw"
    (token,) = [env_of(c)["DURABLE_API_TOKEN"] for role, c in containers(docs) if role == "api"]
    ref = token["secretKeyRef"]
    assert secret_data(docs, ref["name"])[ref["key"]] == "t0ken"


def test_the_api_gets_its_render_stage_settings(rendered: dict[str, list[dict[str, Any]]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (env,) = [env_of(c) for role, c in containers(rendered["default"]) if role == "api"]
    assert (env["DURABLE_API_RENDER_WORKERS"], env["DURABLE_API_RENDER_QUEUE"]) == ("2", "8")
    monkeypatch.setenv("DURABLE_API_RENDER_WORKERS", env["DURABLE_API_RENDER_WORKERS"])
    monkeypatch.setenv("DURABLE_API_RENDER_QUEUE", env["DURABLE_API_RENDER_QUEUE"])
    settings = DurableSettings()
    assert (settings.api_render_workers, settings.api_render_queue) == (2, 8)


def test_existing_secrets_are_referenced_not_created(rendered: dict[str, list[dict[str, Any]]]
                                                     ) -> None:
    docs = rendered["existing-secrets"]
    assert of_kind(docs, "Secret") == []
    assert redis_url_env(docs) == {"name": "prod-redis", "key": "redis-url"}
    (auth,) = of_kind(docs, "TriggerAuthentication")
    assert auth["spec"]["secretTargetRef"] == [
        {"parameter": "password", "name": "prod-redis", "key": "password"}]
    (token,) = [env_of(c)["DURABLE_API_TOKEN"] for role, c in containers(docs) if role == "api"]
    assert token == {"secretKeyRef": {"name": "prod-api", "key": "api-token"}}


def test_sentinel_url_is_the_form_the_code_parses(rendered: dict[str, list[dict[str, Any]]]
                                                  ) -> None:
    docs = rendered["sentinel"]
    ref = redis_url_env(docs)
    target = parse_sentinel_url(secret_data(docs, ref["name"])[ref["key"]])
    assert target == SentinelTarget(
        (("redis-node-0.redis", 26379), ("redis-node-1.redis", 26379)), "mymaster", 0,
        None, "pw")
    (scaled,) = of_kind(docs, "ScaledObject")
    for trigger in scaled["spec"]["triggers"]:
        assert trigger["type"] == ("redis-sentinel" if "listName" in trigger["metadata"]
                                   else "redis-sentinel-streams")
        assert trigger["metadata"]["addresses"] == ",".join(SENTINEL["redis"]["sentinel"]["hosts"])
        assert trigger["metadata"]["sentinelMaster"] == "mymaster"
        assert trigger["authenticationRef"]["name"] == "rel-strands-durable-worker"


def test_no_password_no_trigger_authentication(rendered: dict[str, list[dict[str, Any]]]
                                               ) -> None:
    docs = rendered["default"]
    assert of_kind(docs, "TriggerAuthentication") == []
    assert all("authenticationRef" not in t
               for t in of_kind(docs, "ScaledObject")[0]["spec"]["triggers"])
    assert secret_data(docs, "rel-strands-durable") == {"redis-url": "redis://redis-master:6379/0"}


# --- Services, ServiceMonitor, PodDisruptionBudgets ----------------------------------

def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_services_and_pdbs_select_running_pods(rendered: dict[str, list[dict[str, Any]]],
                                               variant: str) -> None:
    docs = rendered[variant]
    pods = {d["metadata"]["name"]: (d["spec"]["template"]["metadata"]["labels"],
                                    {p["name"] for c in d["spec"]["template"]["spec"]["containers"]
                                     for p in c["ports"]})
            for d in of_kind(docs, "Deployment")}
    for svc in of_kind(docs, "Service"):
        matched = [ports for labels, ports in pods.values()
                   if selects(svc["spec"]["selector"], labels)]
        assert len(matched) == 1, f"Service {svc['metadata']['name']} selects {len(matched)}"
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= matched[0]
    for pdb in of_kind(docs, "PodDisruptionBudget"):
        matched = [1 for labels, _ in pods.values()
                   if selects(pdb["spec"]["selector"]["matchLabels"], labels)]
        assert len(matched) == 1, f"PDB {pdb['metadata']['name']} selects {len(matched)}"


@pytest.mark.parametrize("variant", ["sentinel", "sharded-monitored"])
def test_service_monitor_scrapes_every_role(rendered: dict[str, list[dict[str, Any]]],
                                            variant: str) -> None:
    docs = rendered[variant]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    selected = [s for s in of_kind(docs, "Service")
                if selects(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])]
    roles = {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in selected}
    assert roles == {"api", "scheduler", "worker"}
    endpoint_ports = {e["port"] for e in monitor["spec"]["endpoints"]}
    for svc in selected:  # every selected Service exposes one of the scraped ports
        assert {p["name"] for p in svc["spec"]["ports"]} & endpoint_ports
    extra = VARIANTS[variant]["serviceMonitor"].get("labels", {})
    assert selects(extra, monitor["metadata"]["labels"])
    (api,) = [e for e in monitor["spec"]["endpoints"] if e["port"] == "http"]
    assert "authorization" not in api  # no token configured in these variants


def test_service_monitor_brings_the_api_token(rendered: dict[str, list[dict[str, Any]]]
                                              ) -> None:
    docs = rendered["external-redis"]
    (monitor,) = of_kind(docs, "ServiceMonitor")
    (api,) = [e for e in monitor["spec"]["endpoints"] if e["port"] == "http"]
    assert api["authorization"]["type"] == "Bearer"
    ref = api["authorization"]["credentials"]
    assert secret_data(docs, ref["name"])[ref["key"]] == "t0ken"
    (container,) = [c for role, c in containers(docs) if role == "api"]
    assert env_of(container)["DURABLE_API_TOKEN"] == {"secretKeyRef": ref}


def test_service_monitor_is_off_by_default(rendered: dict[str, list[dict[str, Any]]]) -> None:
    assert of_kind(rendered["default"], "ServiceMonitor") == []
