"""The Helm chart with `redis.mode: cluster` (Redis Cluster), rendered offline as in
test_helm_chart.py: the schema's checks of the seed nodes, the `redis+cluster://` URL the
roles read, and KEDA's `redis-cluster-streams` trigger per shard."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from test_helm_chart import (
    CHART,
    CRD_MODELS,
    KUBE_VERSIONS,
    containers,
    env_of,
    of_kind,
    redis_url_env,
    render,
    secret_data,
)

from strands_durable.redis_targets import ClusterTarget, parse_redis_url
from strands_durable.store.keys import CONSUMER_GROUP, Keys

NODES = ["redis-cluster-0.redis-cluster-headless:6379",
         "redis-cluster-1.redis-cluster-headless:6379",
         "redis-cluster-2.redis-cluster-headless:6379"]
CLUSTER: dict[str, dict[str, Any]] = {
    "plain": {"redis": {"mode": "cluster", "cluster": {"nodes": NODES}},
              "settings": {"shards": 6}},
    "tls-password": {"redis": {"mode": "cluster", "tls": True, "username": "app",
                               "password": "s3cr@t/:pw", "cluster": {"nodes": NODES[:2]}},
                     "settings": {"shards": 3, "keyPrefix": "prod"},
                     "worker": {"autoscaling": {"keda": {"metric": "streamLength"}}}},
    "existing-secret": {"redis": {"mode": "cluster", "cluster": {"nodes": NODES},
                                  "existingSecret": "prod-redis",
                                  "existingSecretPasswordKey": "password"}},
    "keda-address": {"redis": {"mode": "cluster", "cluster": {"nodes": NODES}},
                     "settings": {"shards": 2},
                     "worker": {"autoscaling": {"keda": {"address": "keda-seed:7000"}}}},
    "keda-off": {"redis": {"mode": "cluster", "cluster": {"nodes": NODES}},
                 "worker": {"autoscaling": {"keda": {"enabled": False}}}},
}


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(values) for name, values in CLUSTER.items()}


def redis_url(docs: list[dict[str, Any]]) -> str:
    ref = redis_url_env(docs)
    return secret_data(docs, ref["name"])[ref["key"]]


@pytest.mark.parametrize(("values", "where"), [
    ({"redis": {"mode": "cluster"}}, "/redis/cluster/nodes"),
    ({"redis": {"mode": "cluster", "cluster": {"nodes": []}}}, "/redis/cluster/nodes"),
    ({"redis": {"mode": "cluster", "db": 3, "cluster": {"nodes": NODES}}}, "/redis/db"),
    ({"redis": {"mode": "cluster", "cluster": {"nodes": ["no-port"]}}},
     "/redis/cluster/nodes/0"),
    ({"redis": {"mode": "cluster", "cluster": {"nodes": ["a:1,b:2"]}}},
     "/redis/cluster/nodes/0"),
    ({"redis": {"mode": "cluster", "cluster": {"nodes": ["a:1", "a:1"]}}},
     "/redis/cluster/nodes"),
    ({"redis": {"mode": "cluster", "cluster": {"seeds": NODES}}}, "'seeds' not allowed"),
])
def test_cluster_values_are_refused_by_name(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart, pytest.raises(helm.HelmValuesError) as info:
        chart.validate_schema(values)
    assert where in str(info.value)


@pytest.mark.parametrize("variant", sorted(CLUSTER))
def test_every_cluster_manifest_validates_against_its_schema(
        rendered: dict[str, list[dict[str, Any]]], variant: str) -> None:
    docs = rendered[variant]
    assert docs
    for doc in docs:
        key = (doc["apiVersion"], doc["kind"])
        if key in CRD_MODELS:
            model = CRD_MODELS[key].model_validate(doc)
            assert model.model_dump(mode="json", by_alias=True, exclude_unset=True) == doc
            continue
        for version in KUBE_VERSIONS:
            kubernetes_validate.validate(doc, version, strict=True)


def seeds(nodes: list[str]) -> tuple[tuple[str, int], ...]:
    return tuple((h, int(p)) for h, _, p in (n.rpartition(":") for n in nodes))


def test_cluster_url_is_the_form_the_code_parses(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    plain = redis_url(rendered["plain"])
    assert plain == "redis+cluster://" + ",".join(NODES) + "/"
    assert parse_redis_url(plain) == ClusterTarget(seeds(NODES))
    # TLS and an URL-encoded password, as in the other modes.
    secured = parse_redis_url(redis_url(rendered["tls-password"]))
    assert isinstance(secured, ClusterTarget)
    assert (secured.seeds, secured.username, secured.password, secured.ssl) == (
        seeds(NODES[:2]), "app", "s3cr@t/:pw", True)


def test_every_role_reads_the_cluster_url(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["plain"]
    roles = {role for role, _ in containers(docs)}
    assert roles == {"api", "scheduler", "worker"}
    for _, c in containers(docs):
        assert env_of(c)["DURABLE_REDIS_URL"]["secretKeyRef"] == {
            "name": "rel-strands-durable", "key": "redis-url"}


@pytest.mark.parametrize("variant", ["plain", "tls-password", "existing-secret",
                                     "keda-address"])
def test_keda_has_one_cluster_streams_trigger_per_shard(
        rendered: dict[str, list[dict[str, Any]]], variant: str) -> None:
    values = CLUSTER[variant]
    settings = values.get("settings", {})
    keys = Keys(prefix=settings.get("keyPrefix", "durable"), shards=settings.get("shards", 1))
    keda = values.get("worker", {}).get("autoscaling", {}).get("keda", {})
    address = keda.get("address") or ",".join(values["redis"]["cluster"]["nodes"])
    (scaled,) = of_kind(rendered[variant], "ScaledObject")
    triggers = scaled["spec"]["triggers"]
    streams = [t for t in triggers if "stream" in t["metadata"]]
    lists = [t for t in triggers if "listName" in t["metadata"]]
    assert [t["metadata"]["stream"] for t in streams] == keys.streams()
    assert [t["metadata"]["listName"] for t in lists] == [
        keys.fair_waiting(k) for k in range(keys.shards)]
    for t in triggers:
        meta = t["metadata"]
        assert meta["addresses"] == address
        # A cluster has db 0 only, and the cluster scaler takes no single address.
        assert "databaseIndex" not in meta and "address" not in meta
        assert meta["enableTLS"] == str(values["redis"].get("tls", False)).lower()
    for t in streams:
        assert t["type"] == "redis-cluster-streams"
        assert t["metadata"]["consumerGroup"] == CONSUMER_GROUP
        assert t["metadata"][keda.get("metric", "lagCount")] == "16"
    for t in lists:  # the steps fair dispatch moved off each shard's stream
        assert t["type"] == "redis-cluster" and t["metadata"]["listLength"] == "16"
    if keys.shards > 1:
        formula = scaled["spec"]["advanced"]["scalingModifiers"]["formula"]
        assert sorted(formula.split(" + ")) == sorted(t["name"] for t in triggers)


def test_cluster_password_reaches_keda_through_a_trigger_authentication(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    for variant, (name, key, password) in {
            "tls-password": ("rel-strands-durable", "redis-password", "s3cr@t/:pw"),
            "existing-secret": ("prod-redis", "password", None)}.items():
        docs = rendered[variant]
        (auth,) = of_kind(docs, "TriggerAuthentication")
        assert auth["spec"]["secretTargetRef"] == [
            {"parameter": "password", "name": name, "key": key}]
        if password:
            assert secret_data(docs, name)[key] == password
        (scaled,) = of_kind(docs, "ScaledObject")
        assert {t["authenticationRef"]["name"] for t in scaled["spec"]["triggers"]} == {
            auth["metadata"]["name"]}
    assert of_kind(rendered["plain"], "TriggerAuthentication") == []


def test_existing_secret_in_cluster_mode_is_referenced_not_created(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["existing-secret"]
    assert of_kind(docs, "Secret") == []
    assert redis_url_env(docs) == {"name": "prod-redis", "key": "redis-url"}


def test_cluster_mode_deploys_no_redis(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for docs in rendered.values():
        for kind in ("Deployment", "StatefulSet", "Service"):
            for doc in of_kind(docs, kind):
                component = doc["metadata"]["labels"]["app.kubernetes.io/component"]
                assert component in {"api", "scheduler", "worker"}, doc["metadata"]["name"]


def test_without_keda_cluster_mode_keeps_the_hpa(
        rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["keda-off"]
    assert of_kind(docs, "ScaledObject") == []
    assert len(of_kind(docs, "HorizontalPodAutoscaler")) == 1
