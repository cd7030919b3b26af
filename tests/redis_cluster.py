"""A real, throw-away Redis Cluster on loopback ports for tests (never :6379).

`start_cluster(primaries=3, replicas=1)` starts one redis-server per node (all at once),
each in its own tmp dir with cluster mode on, forms the cluster as `redis-cli --cluster
create` would (its slot ranges and config epochs; MEET, then REPLICATE) without its fixed
one-second sleeps, and returns once every node reports cluster_state:ok, knows every node
and every replica is synced (diskless, no delay). The cluster can
then lose a primary (`kill_primary`, `wait_for_failover`), get a node back (`restart`),
and move a slot (`migrate_slot`, or `begin_migration` / `move_keys` / `finish_migration`
to hold a slot half-migrated: the ASK window). `stop()` SIGKILLs every pid it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis

from bench.cluster_nodes import cluster_port

T = TypeVar("T")
HOST = "127.0.0.1"
# Short enough that a failover takes a few seconds, long enough that a busy 2-core
# machine does not see spurious failovers.
NODE_TIMEOUT_MS = 2000
SLOTS = 16384


def _wait(check: Callable[[], T | None], timeout_s: float, what: str) -> T:
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except (redis.RedisError, OSError) as exc:
            last_error = exc
        if time.monotonic() >= deadline:
            raise RuntimeError(f"cluster: timed out after {timeout_s}s waiting for {what}"
                               + (f" (last error: {last_error})" if last_error else ""))
        time.sleep(0.05)


def tls_kwargs(pki: Path | None) -> dict[str, Any]:
    return {} if pki is None else {"ssl": True, "ssl_ca_certs": str(pki / "ca.crt")}


class NodeExited(RuntimeError):
    """A redis-server that exited while starting (another process took its port first)."""


@dataclass
class ClusterNode:
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    password: str | None = None
    pki: Path | None = None  # TLS only: ca.crt, server.crt, server.key (on every port)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host=HOST, port=self.port, password=self.password,
                           socket_timeout=2, socket_connect_timeout=1,
                           decode_responses=True, **tls_kwargs(self.pki))

    def node_id(self) -> str:
        with self.client() as c:
            return str(c.execute_command("CLUSTER", "MYID"))

    def role(self) -> str:
        """'master' or 'slave' (what ROLE says)."""
        with self.client() as c:
            return str(c.execute_command("ROLE")[0])

    def start(self, node_timeout_ms: int) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
        cmd = [binary, "--port", str(self.port), "--bind", HOST, "--save", "",
               "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning",
               "--dir", str(self.directory), "--cluster-enabled", "yes",
               "--cluster-config-file", "nodes.conf",
               "--cluster-node-timeout", str(node_timeout_ms),
               # A replica's first sync starts at once (the default waits 5 s for others).
               "--repl-diskless-sync-delay", "0"]
        if self.pki is not None:  # TLS for clients, the cluster bus and replication
            cmd[cmd.index("--port") + 1] = "0"
            cmd += ["--tls-port", str(self.port), "--tls-cluster", "yes",
                    "--tls-replication", "yes", "--tls-auth-clients", "no",
                    "--tls-cert-file", str(self.pki / "server.crt"),
                    "--tls-key-file", str(self.pki / "server.key"),
                    "--tls-ca-cert-file", str(self.pki / "ca.crt")]
        if self.password:
            cmd += ["--requirepass", self.password, "--masterauth", self.password]
        self.process = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)

    def wait_up(self) -> None:
        _wait(self._pings, 10, f"redis-server on port {self.port}")

    def _pings(self) -> bool:
        if not self.alive:
            raise NodeExited(f"redis-server on port {self.port} exited")
        with self.client() as c:
            return bool(c.ping())

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


@dataclass
class LocalCluster:
    nodes: list[ClusterNode]
    replicas: int
    node_timeout_ms: int = NODE_TIMEOUT_MS
    password: str | None = None
    pki: Path | None = None
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="durable-cluster-")))

    # -- views -------------------------------------------------------------------------------
    def node(self, port: int) -> ClusterNode:
        for n in self.nodes:
            if n.port == port:
                return n
        raise KeyError(f"no node on port {port}")

    def alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.alive]

    def primaries(self) -> list[ClusterNode]:
        return [n for n in self.alive() if n.role() == "master"]

    def replica_nodes(self) -> list[ClusterNode]:
        return [n for n in self.alive() if n.role() == "slave"]

    @property
    def seeds(self) -> list[tuple[str, int]]:
        return [(HOST, n.port) for n in self.nodes]

    @property
    def url(self) -> str:
        """The cluster URL the package reads (every node a seed; the password, if any)."""
        auth = f":{self.password}@" if self.password else ""
        hosts = ",".join(n.address for n in self.nodes)
        if self.pki is not None:
            return f"rediss+cluster://{auth}{hosts}/?ssl_ca_certs={self.pki / 'ca.crt'}"
        return f"redis+cluster://{auth}{hosts}/"

    def client(self) -> redis.RedisCluster:
        """A sync cluster client for test assertions (decoded responses)."""
        live = self.alive()
        return redis.RedisCluster(
            startup_nodes=[redis.cluster.ClusterNode(HOST, n.port) for n in live],
            password=self.password, decode_responses=True, socket_timeout=2,
            **tls_kwargs(self.pki))

    def slot_of(self, key: str) -> int:
        with self.alive()[0].client() as c:
            return int(c.execute_command("CLUSTER", "KEYSLOT", key))

    def owner_of_slot(self, slot: int) -> ClusterNode:
        """The primary serving `slot` (as the first live node sees it)."""
        for n in self.alive():
            with n.client() as c:
                for start, end, primary, *_ in c.execute_command("CLUSTER", "SLOTS"):
                    if int(start) <= slot <= int(end):
                        return self.node(int(primary[1]))
        raise RuntimeError(f"no node serves slot {slot}")

    def primary_port_of_key(self, key: str) -> int:
        return self.owner_of_slot(self.slot_of(key)).port

    # -- life --------------------------------------------------------------------------------
    def _form(self, primaries: int) -> None:
        """What `redis-cli --cluster create` does, minus its sleeps: a distinct config epoch
        per node, even slot ranges on the first `primaries` nodes, MEET from the first node,
        and once every node knows every other, each replica REPLICATEs its primary."""
        heads, rest = self.nodes[:primaries], self.nodes[primaries:]
        for epoch, n in enumerate(self.nodes, start=1):
            with n.client() as c:
                c.execute_command("CLUSTER", "SET-CONFIG-EPOCH", epoch)
        for i, n in enumerate(heads):
            first, last = i * SLOTS // primaries, (i + 1) * SLOTS // primaries - 1
            with n.client() as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        with self.nodes[0].client() as c:
            for n in self.nodes[1:]:
                c.execute_command("CLUSTER", "MEET", HOST, n.port)
        ids = {n.port: n.node_id() for n in self.nodes}
        _wait(lambda: self._all_know(set(ids.values()), 0), 30, "every node to meet the others")
        for i, n in enumerate(rest):
            with n.client() as c:
                c.execute_command("CLUSTER", "REPLICATE", ids[heads[i % primaries].port])
        _wait(lambda: self._all_know(set(ids.values()), len(rest)), 30,
              "every node to see every replica")

    def _all_know(self, ids: set[str], replicas: int) -> bool:
        """Every node lists `ids`, none still in handshake, and `replicas` of them as replicas."""
        for n in self.nodes:
            with n.client() as c:
                lines = str(c.execute_command("CLUSTER", "NODES")).splitlines()
            known = {line.split()[0] for line in lines if "handshake" not in line.split()[2]}
            seen = sum("slave" in line.split()[2].split(",") for line in lines)
            if known != ids or seen != replicas:
                return False
        return True

    def healthy(self) -> bool:
        """Every live node: cluster_state ok, all slots assigned, knows all live nodes,
        and agrees with the others on who serves each slot; every replica is synced."""
        live = self.alive()
        views = set()
        for n in live:
            with n.client() as c:
                info = c.execute_command("CLUSTER", "INFO")
                if "cluster_state:ok" not in info or "cluster_slots_assigned:16384" not in info:
                    return False
                views.add(tuple(sorted((int(s), int(e), int(p[1]))
                                       for s, e, p, *_ in c.execute_command("CLUSTER", "SLOTS"))))
                replication = c.info("replication")
                if replication["role"] == "slave" and replication.get("master_link_status") != "up":
                    return False
        return len(views) == 1

    def wait_healthy(self, timeout_s: float = 60) -> None:
        _wait(self.healthy, timeout_s, "cluster_state:ok on every node")

    def wait_replicated(self, port: int, timeout_s: float = 30) -> None:
        """Wait until every replica of the primary on `port` has all its writes (so a
        failover loses nothing; WAIT only covers the writes of its own connection)."""
        primary = self.node(port)

        def caught_up() -> bool:
            with primary.client() as c:
                info = c.info("replication")
            offset = int(info["master_repl_offset"])
            replicas = [v for k, v in info.items() if k.startswith("slave")
                        and isinstance(v, dict)]
            return bool(replicas) and all(int(r["offset"]) >= offset for r in replicas)
        _wait(caught_up, timeout_s, f"the replicas of {port} to catch up")

    def kill_primary(self, port: int | None = None) -> ClusterNode:
        """SIGKILL a primary (the given port, else the first one); returns its node."""
        node = self.node(port) if port is not None else self.primaries()[0]
        if node.role() != "master":
            raise RuntimeError(f"node {node.port} is not a primary")
        node.kill()
        return node

    def wait_for_failover(self, killed: ClusterNode | None = None,
                          timeout_s: float = 60) -> None:
        """Wait until a replica serves the killed primary's slots and the surviving nodes
        agree on the topology (cluster_state:ok everywhere)."""
        def promoted() -> bool:
            if killed is not None:
                for n in self.alive():
                    with n.client() as c:
                        owners = {int(p[1]) for _, _, p, *_ in
                                  c.execute_command("CLUSTER", "SLOTS")}
                        if killed.port in owners:
                            return False
            return self.healthy()
        _wait(promoted, timeout_s, "a replica to take over the killed primary's slots")

    def restart(self, port: int) -> ClusterNode:
        """Start a killed node again (same dir and nodes.conf: it rejoins, as a replica of
        whoever took its slots)."""
        node = self.node(port)
        if node.alive:
            raise RuntimeError(f"node {port} is running")
        node.start(self.node_timeout_ms)
        node.wait_up()
        return node

    def stop(self) -> None:
        for n in self.nodes:
            n.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- resharding -------------------------------------------------------------------------
    def begin_migration(self, slot: int, target_port: int) -> ClusterNode:
        """Mark `slot` IMPORTING on the target and MIGRATING on its owner; returns the owner.
        Keys not yet moved are served by the owner; moved ones answer ASK."""
        source = self.owner_of_slot(slot)
        target = self.node(target_port)
        if source.port == target.port:
            raise ValueError(f"slot {slot} is already on {target_port}")
        with target.client() as t:
            t.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source.node_id())
        with source.client() as s:
            s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target.node_id())
        return source

    def move_keys(self, slot: int, source: ClusterNode, target_port: int,
                  batch: int = 100, limit: int | None = None) -> int:
        """MIGRATE up to `limit` keys (all, if None) of `slot` from source to target."""
        moved = 0
        with source.client() as s:
            while limit is None or moved < limit:
                count = batch if limit is None else min(batch, limit - moved)
                keys = s.execute_command("CLUSTER", "GETKEYSINSLOT", slot, count)
                if not keys:
                    break
                args: list[object] = [HOST, target_port, "", 0, 5000]
                if self.password:
                    args += ["AUTH", self.password]
                s.execute_command("MIGRATE", *args, "KEYS", *keys)
                moved += len(keys)
        return moved

    def move_named_keys(self, source: ClusterNode, target_port: int, keys: list[str]) -> None:
        """MIGRATE exactly `keys` (of a slot being migrated) from source to target."""
        args: list[object] = [HOST, target_port, "", 0, 5000]
        if self.password:
            args += ["AUTH", self.password]
        with source.client() as s:
            s.execute_command("MIGRATE", *args, "KEYS", *keys)

    def keys_in_slot(self, node: ClusterNode, slot: int) -> set[str]:
        with node.client() as c:
            return set(c.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100_000))

    def finish_migration(self, slot: int, target_port: int) -> None:
        """Give `slot` to the target on every primary (target first, as redis-cli does)."""
        target = self.node(target_port)
        target_id = target.node_id()
        for n in [target] + [p for p in self.primaries() if p.port != target_port]:
            with n.client() as c:
                c.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    def migrate_slot(self, slot: int, target_port: int) -> None:
        """Move `slot` and all its keys to the primary on `target_port`."""
        source = self.begin_migration(slot, target_port)
        self.move_keys(slot, source, target_port)
        self.finish_migration(slot, target_port)
        _wait(lambda: self.owner_of_slot(slot).port == target_port, 30,
              f"slot {slot} to be served by {target_port}")


def start_cluster(primaries: int = 3, replicas: int = 1, password: str | None = None,
                  node_timeout_ms: int = NODE_TIMEOUT_MS, pki: Path | None = None
                  ) -> LocalCluster:
    """`primaries` primaries with `replicas` replicas each, healthy; stop() it after use.
    `pki`: a folder with ca.crt, server.crt and server.key makes every port TLS."""
    if primaries < 3:
        raise ValueError("a cluster that can fail over needs at least 3 primaries")
    cluster = LocalCluster(nodes=[], replicas=replicas, node_timeout_ms=node_timeout_ms,
                           password=password, pki=pki)
    try:
        for i in range(primaries * (1 + replicas)):
            directory = cluster.root / f"node{i}"
            directory.mkdir()
            node = ClusterNode(port=cluster_port(), directory=directory,
                               password=password, pki=pki)
            cluster.nodes.append(node)
            node.start(node_timeout_ms)
        for node in cluster.nodes:
            _up_on_a_free_port(node, node_timeout_ms)
        cluster._form(primaries)
        cluster.wait_healthy()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _up_on_a_free_port(node: ClusterNode, node_timeout_ms: int, tries: int = 5) -> None:
    """Wait for a node just started; one whose port another process took first (it exits
    at once) starts again on another free port."""
    for _ in range(tries - 1):
        try:
            node.wait_up()
            return
        except NodeExited:
            node.port = cluster_port()
            node.start(node_timeout_ms)
    node.wait_up()
