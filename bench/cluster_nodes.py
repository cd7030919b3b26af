"""A private Redis Cluster of 1 to N primaries (no replicas) on loopback for the cluster
bench (`python -m bench.cluster`). `redis-cli --cluster create` wants 3 primaries at
least, so slots are assigned here: shard k's slot (its `{s<k>}` tag) goes to primary
k % N, so every primary serves the same number of shards, and the other slots are split
in ranges. Every pid started is SIGKILLed by stop()."""

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

from redis import Redis
from redis.crc import key_slot
from redis.exceptions import RedisError

from bench.redis_server import free_port

HOST = "127.0.0.1"
SLOTS = 16384


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too (never 6379; one of
    this process's own ports: bench/redis_server.py)."""
    return free_port(bus=True)


def shard_slot(shard: int) -> int:
    """The slot of shard `shard`'s keys: only the hash tag `s<k>` counts (store/keys.py)."""
    return int(key_slot(f"{{s{shard}}}".encode()))


def plan_slots(primaries: int, shards: int) -> list[list[int]]:
    """Slots per primary: shard k's slot on primary k % primaries, the rest in ranges."""
    owned: list[set[int]] = [set() for _ in range(primaries)]
    pinned: dict[int, int] = {}
    for k in range(shards):
        pinned.setdefault(shard_slot(k), k % primaries)
    for slot, owner in pinned.items():
        owned[owner].add(slot)
    free = [s for s in range(SLOTS) if s not in pinned]
    size = -(-len(free) // primaries)
    for i in range(primaries):
        owned[i].update(free[i * size:(i + 1) * size])
    return [sorted(s) for s in owned]


@dataclass
class BenchCluster:
    ports: list[int]
    procs: list[subprocess.Popen[bytes]]
    root: Path
    shards: int
    slots: list[list[int]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(f"{HOST}:{p}" for p in self.ports) + "/"

    def client(self, port: int) -> Redis:
        return Redis(host=HOST, port=port, socket_timeout=5, decode_responses=True)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def healthy(self) -> bool:
        views = set()
        for port in self.ports:
            with self.client(port) as c:
                info = str(c.execute_command("CLUSTER", "INFO"))
                if "cluster_state:ok" not in info:
                    return False
                known = str(c.execute_command("CLUSTER", "NODES")).count("connected")
                if known < len(self.ports):
                    return False
                views.add(tuple(sorted((int(s), int(e), int(p[1])) for s, e, p, *_ in
                                       c.execute_command("CLUSTER", "SLOTS"))))
        return len(views) == 1

    def serving(self, shard: int) -> int:
        """The port of the primary that serves shard `shard` (per the plan)."""
        slot = shard_slot(shard)
        return next(p for p, owned in zip(self.ports, self.slots, strict=True)
                    if slot in owned)


def _start_node(port: int, directory: Path) -> subprocess.Popen[bytes]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed (apt-get install -y redis-server)")
    cmd = [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
           "--daemonize", "no", "--loglevel", "warning", "--dir", str(directory),
           "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
           "--cluster-node-timeout", "5000"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _wait(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while True:
        try:
            if check():
                return
        except (OSError, RedisError) as exc:  # a node still starting or meeting
            last = exc
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster: timed out after {timeout_s:.0f}s waiting for {what}"
                               + (f" ({last})" if last else ""))
        time.sleep(0.05)


def _pings(port: int) -> bool:
    with Redis(host=HOST, port=port, socket_timeout=1) as c:
        return bool(c.ping())


def start_bench_cluster(primaries: int, shards: int) -> BenchCluster:
    """`primaries` primaries, slots planned for `shards` shards, healthy on return."""
    root = Path(tempfile.mkdtemp(prefix="durable-bench-cluster-"))
    cluster = BenchCluster(ports=[], procs=[], root=root, shards=shards,
                           slots=plan_slots(primaries, shards))
    try:
        for i in range(primaries):
            port = cluster_port()
            directory = root / f"node{i}"
            directory.mkdir()
            cluster.ports.append(port)
            cluster.procs.append(_start_node(port, directory))
            _wait(lambda p=port: _pings(p), 10, f"redis-server on port {port}")
        first = cluster.ports[0]
        with cluster.client(first) as c:
            for port in cluster.ports[1:]:
                c.execute_command("CLUSTER", "MEET", HOST, port)
        for port, owned in zip(cluster.ports, cluster.slots, strict=True):
            with cluster.client(port) as c:
                c.execute_command("CLUSTER", "ADDSLOTS", *owned)
        _wait(cluster.healthy, 60, f"a healthy {primaries}-primary cluster")
    except BaseException:
        cluster.stop()
        raise
    return cluster
