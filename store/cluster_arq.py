"""arq's own connection on a Redis Cluster.

arq's Worker takes an `ArqRedis` (a redis.asyncio.Redis subclass) and calls plain
commands on it: at start INFO and DBSIZE (a pipeline, to log them), then on every poll
ZRANGEBYSCORE of its queue and, for its health check, ZCARD of the queue and PSETEX of
`<queue>:health-check`; at exit DEL of that key. `ClusterArqRedis` is an ArqRedis whose
commands a `DurableRedisCluster` routes by key (so they follow MOVED, ASK and failovers
and ride outages like the store's); the keyless INFO and DBSIZE go to one node.

arq's MULTI/EXEC pipelines (enqueueing, starting and finishing jobs, aborts) are not
supported: steps travel on the durable streams, never on arq's queue, so a worker never
runs them; a caller that tries gets a clear error instead of a half-applied transaction.
The worker's queue name carries a hash tag (`{<prefix>:arq}`) so the queue and its
health-check key share a slot.
"""

from __future__ import annotations

from typing import Any, NoReturn

from arq.connections import ArqRedis
from redis.asyncio.connection import ConnectionPool
from redis.exceptions import RedisClusterException

from strands_durable.store.cluster_client import DurableRedisCluster

KEYLESS_ONE_NODE = {"INFO", "DBSIZE"}


class _NoDirectPool(ConnectionPool):
    """ArqRedis's own pool: never used (every command goes through the cluster)."""

    async def get_connection(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise RedisClusterException("ClusterArqRedis sends every command through its cluster")


class ClusterArqRedis(ArqRedis):
    def __init__(self, cluster: DurableRedisCluster, **kwargs: Any) -> None:
        super().__init__(pool_or_conn=_NoDirectPool(), **kwargs)
        self.router = cluster

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if str(args[0]).upper() in KEYLESS_ONE_NODE and "target_nodes" not in options:
            options["target_nodes"] = DurableRedisCluster.DEFAULT_NODE
        return await self.router.execute_command(*args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        if transaction:
            raise RedisClusterException(
                "arq's MULTI/EXEC pipelines are not supported on a Redis Cluster: durable "
                "steps travel on their own streams, never on arq's job queue")
        return SerialPipeline(self)

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        await self.router.aclose()

    async def close(self, close_connection_pool: bool | None = None) -> None:
        await self.aclose()


class SerialPipeline:
    """A transaction-free pipeline that runs its commands one by one through the cluster
    client (each routed on its own; only arq's start-up log uses one)."""

    def __init__(self, client: ClusterArqRedis) -> None:
        self.client = client
        self.commands: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def __aenter__(self) -> SerialPipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.commands = []

    def __getattr__(self, name: str) -> Any:
        command = getattr(ArqRedis, name)

        def queue(*args: Any, **kwargs: Any) -> SerialPipeline:
            command(self, *args, **kwargs)  # the command builds its args via execute_command
            return self
        return queue

    def execute_command(self, *args: Any, **options: Any) -> SerialPipeline:
        self.commands.append((args, options))
        return self

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        results: list[Any] = []
        for args, options in self.commands:
            try:
                results.append(await self.client.execute_command(*args, **options))
            except Exception as error:
                if raise_on_error:
                    raise
                results.append(error)
        self.commands = []
        return results
