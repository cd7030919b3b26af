"""Clients of a Redis Cluster (`redis+cluster://`): the store's, arq's and the metrics'.

redis-py's RedisCluster follows MOVED and ASK, refreshes its slot map after a failover
and retries a command a few times. What it gives up on is made to look like what the
rest of the package already handles:

- a cluster that is failing over (CLUSTERDOWN, TRYAGAIN, MASTERDOWN, a slot not covered,
  redirects that never settle, no seed reachable) is raised as `ClusterUnavailable`, a
  redis ConnectionError: the API answers 503, the scheduler's loop waits, a worker's
  `OutageRetry` (store/outage.py) rides it out at the level of the whole command (not
  per connection, where retrying would keep dialling the dead primary);
- a command whose connection redis-py closed under it while refreshing the slot map
  (it disconnects every node, in-flight commands included) is a ClusterUnavailable too;
- the seeds of the URL are never forgotten: redis-py drops a seed that refused a
  connection, and after a whole-cluster outage it would have none left to start from;
- an ASK redirect (a slot half-moved by a resharding) sends ASKING and the command on
  one connection. redis-py 5 sends them as two commands, each on the node's first free
  connection: with other tasks using that node, the command goes out on a connection
  without ASKING, the importing node answers MOVED back to the slot's owner, redis-py
  then marks the owner a replica (so a SCRIPT LOAD skips it and its scripts go missing:
  NOSCRIPT) and ping-pongs until "TTL exhausted";
- SCRIPT LOAD also reaches the nodes taken for replicas (best effort), so a node whose
  role the client's map has wrong, or a replica promoted later, has the scripts.

Multi-key commands, MULTI/EXEC and pipelines across slots are not used by store/: every
script and transaction touches one shard's hash tag (store/keys.py), cross-shard reads
are transaction-free pipelines that redis-py splits per node.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from redis import cluster as sync_cluster
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, PipelineCommand, RedisCluster
from redis.cluster import get_node_name
from redis.commands import READ_COMMANDS
from redis.exceptions import (
    AskError,
    AuthenticationError,
    AuthorizationError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MaxConnectionsError,
    MovedError,
    RedisClusterException,
    RedisError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.exceptions import TimeoutError as RedisTimeoutError

from strands_durable.store.outage import OutageRetry

T = TypeVar("T")
# The cluster is between two topologies (ClusterError covers CLUSTERDOWN, MASTERDOWN and
# "TTL exhausted": redirects that never settled).
TRANSIENT: tuple[type[Exception], ...] = (ClusterError, TryAgainError, SlotNotCoveredError)
NO_NODE_HINTS = ("cannot be connected", "not covered", "could not agree", "no targets")
# Why a command that met ASK or TRYAGAIN gave up for now (the caller waits and retries).
RESHARDING = ("a slot is being resharded (ASK and TRYAGAIN: the keys a command names are "
              "moving between two nodes until the move ends)")


class ClusterUnavailable(ConnectionError):
    """The cluster answered no usable topology (a failover or resharding under way)."""


def _torn_down(error: BaseException) -> bool:
    """redis-py refreshes the slot map by disconnecting every node's connections, also
    those other tasks are using: their command fails inside redis-py's connection code
    (an AttributeError on the closed stream), which is a lost connection, not a bug here."""
    if not isinstance(error, AttributeError) or error.__traceback__ is None:
        return False
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).match("redis/asyncio/*.py")


def _refusal(error: BaseException) -> BaseException | None:
    """The node's refusal (AUTH, ACL, a certificate we do not trust) behind redis-py's
    "cannot be connected"."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, AuthenticationError | AuthorizationError) or (
                isinstance(seen, ConnectionError)
                and isinstance(seen.__context__, ssl.SSLCertVerificationError)):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _transient(error: BaseException) -> bool:
    if isinstance(error, AuthenticationError | AuthorizationError):
        return False  # a refusal, not an outage: the caller reports it
    if isinstance(error, TRANSIENT) or _torn_down(error):
        return True
    return isinstance(error, RedisClusterException) and any(
        hint in str(error).lower() for hint in NO_NODE_HINTS)


class DurableRedisCluster(RedisCluster):
    """RedisCluster that keeps its seeds and raises ClusterUnavailable for a cluster in
    transition; with `outage_retry`, every command and pipeline rides outages out."""

    def __init__(self, *, outage_retry: OutageRetry | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seeds = dict(self.nodes_manager.startup_nodes)
        self.outage_retry = outage_retry

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        return await self.ride(lambda: super(DurableRedisCluster, self).execute_command(
            *args, **kwargs))

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None
                 ) -> ClusterPipeline:
        super().pipeline(transaction, shard_hint)  # refuses transactions, as redis-py does
        return DurablePipeline(self)  # type: ignore[abstract]

    async def ride(self, do: Callable[[], Awaitable[T]]) -> T:
        if self.outage_retry is None:
            return await self.once(do)
        return await self.outage_retry.call_with_retry(lambda: self.once(do), _nothing)

    async def once(self, do: Callable[[], Awaitable[T]]) -> T:
        try:
            return await do()
        except ConnectionError:
            self._keep_seeds()
            raise
        except Exception as error:
            refusal = _refusal(error)
            if refusal is None:
                if not _transient(error):
                    raise
                self._keep_seeds()
                raise ClusterUnavailable(f"Redis Cluster unavailable: {error}") from error
        # Raised here, outside the handler, so it keeps its own context (the SSL error
        # store/outage.py reads): credentials or trust no topology change will fix.
        raise refusal

    def _keep_seeds(self) -> None:
        for name, node in self.seeds.items():
            self.nodes_manager.startup_nodes.setdefault(name, node)

    async def script_load(self, script: Any) -> str:
        """SCRIPT LOAD on every primary (ridden out like any command), then on every
        node the map takes for a replica, best effort (one that is down is skipped)."""
        sha: str = await super().script_load(script)
        replicas = self.get_replicas()
        if replicas:
            await asyncio.gather(*(_load_on(node, script) for node in replicas))
        return sha

    async def _execute_command(self, target_node: ClusterNode, *args: Any, **kwargs: Any
                               ) -> Any:
        """redis-py's redirect loop (redis/asyncio/cluster.py), with one change: after an
        ASK, ASKING and the command go out together on one connection (module docstring)."""
        ttl = self.RedisClusterRequestTTL
        asking = moved = resharding = False
        while ttl > 0:
            ttl -= 1
            asked, asking = asking, False
            try:
                if asked:
                    return await _asking_then(target_node, args, kwargs)
                if moved:
                    moved = False
                    slot = await self._determine_slot(*args)
                    target_node = self.nodes_manager.get_node_from_slot(
                        slot, self.read_from_replicas and args[0] in READ_COMMANDS,
                        self.load_balancing_strategy if args[0] in READ_COMMANDS else None)
                return await target_node.execute_command(*args, **kwargs)
            except (BusyLoadingError, MaxConnectionsError):
                raise
            except (ConnectionError, RedisTimeoutError):
                # As redis-py: forget the node as a seed and rebuild the map next time
                # (_keep_seeds puts the URL's seeds back).
                self.nodes_manager.startup_nodes.pop(target_node.name, None)
                await self.aclose()
                raise
            except (ClusterDownError, SlotNotCoveredError):
                await self.aclose()
                await asyncio.sleep(0.25)
                raise
            except MovedError as e:
                await self._note_moved(e)
                moved = True
            except AskError as e:
                redirected = self.get_node(node_name=get_node_name(host=e.host, port=e.port))
                if redirected is None:  # a node the map does not know yet: rebuild it
                    await self.aclose()
                    raise ClusterError(f"ASK to {e.host}:{e.port}, a node not in the map") from e
                target_node, asking, resharding = redirected, True, True
            except TryAgainError:
                asking, resharding = asked, True  # asked: ask the importing node again
                if ttl < self.RedisClusterRequestTTL / 2:
                    await asyncio.sleep(0.05)
        raise ClusterError(RESHARDING if resharding
                           else "redirects did not settle (TTL exhausted)")

    async def _note_moved(self, error: MovedError) -> None:
        """As redis-py: patch the slot map from the redirect, or rebuild it every
        `reinitialize_steps` redirects. A redirect to the node the map already has for
        the slot (another task's MOVED patched it first) patches nothing: redis-py would
        take it for a failover and mark that node, the slot's primary, a replica."""
        owners = self.nodes_manager.slots_cache.get(error.slot_id)
        if owners and owners[0].name == get_node_name(host=error.host, port=error.port):
            return
        self.reinitialize_counter += 1
        if self.reinitialize_steps and self.reinitialize_counter % self.reinitialize_steps == 0:
            await self.aclose()
            self.reinitialize_counter = 0
        else:
            self.nodes_manager._moved_exception = error


class DurablePipeline(ClusterPipeline):
    """A transaction-free cluster pipeline whose execute is ridden like a command (the
    store's pipelines are reads: running one again is harmless)."""

    _client: DurableRedisCluster

    async def execute(self, raise_on_error: bool = True,
                      allow_redirections: bool = True) -> list[Any]:
        stack = list(self._command_stack)

        async def run() -> list[Any]:
            self._command_stack = list(stack)
            return await ClusterPipeline.execute(self, raise_on_error, allow_redirections)

        try:
            return await self._client.ride(run)
        finally:
            self._command_stack = []


async def _nothing(error: BaseException) -> None:
    return None


async def _asking_then(node: ClusterNode, args: tuple[Any, ...], kwargs: dict[str, Any]
                       ) -> Any:
    """ASKING and the command, pipelined on one of `node`'s connections: ASKING holds
    for the next command of its own connection only."""
    asking, command = PipelineCommand(0, "ASKING"), PipelineCommand(1, *args, **kwargs)
    await node.execute_pipeline([asking, command])
    for sent in (asking, command):
        if isinstance(sent.result, Exception):
            raise sent.result
    return command.result


async def _load_on(node: ClusterNode, script: Any) -> None:
    # A replica that is down or unreachable is skipped: it loads it on its NOSCRIPT.
    with contextlib.suppress(RedisError, OSError, TimeoutError):
        await asyncio.wait_for(node.execute_command("SCRIPT LOAD", script), 2)


def async_cluster_client(seeds: tuple[tuple[str, int], ...], kwargs: dict[str, Any]
                         ) -> DurableRedisCluster:
    """An asyncio cluster client; `kwargs` are connection options (a `retry` that is an
    OutageRetry rides whole commands, see the module docstring)."""
    kwargs = dict(kwargs)
    kwargs.pop("db", None)
    for pool_option in ("pool_class", "sentinel_pool_class", "retry_on_error"):
        kwargs.pop(pool_option, None)
    retry = kwargs.pop("retry", None)
    outage_retry = retry if isinstance(retry, OutageRetry) else None
    if retry is not None and outage_retry is None:
        kwargs["retry"] = retry
    return DurableRedisCluster(  # type: ignore[abstract]
        startup_nodes=[ClusterNode(h, p) for h, p in seeds],
        outage_retry=outage_retry, **kwargs)


def sync_cluster_client(seeds: tuple[tuple[str, int], ...], kwargs: dict[str, Any]
                        ) -> LazySyncCluster:
    """A blocking cluster client (the metrics' scrape thread)."""
    return LazySyncCluster(seeds, {k: v for k, v in kwargs.items() if k != "db"})


class LazySyncCluster:
    """redis-py's sync RedisCluster connects as it is built; this one on first use, so a
    scheduler whose cluster is down still starts (its scrapes answer 'Redis down')."""

    def __init__(self, seeds: tuple[tuple[str, int], ...], kwargs: dict[str, Any]) -> None:
        self.seeds = seeds
        self.kwargs = kwargs
        self.client: sync_cluster.RedisCluster | None = None

    def connected(self) -> sync_cluster.RedisCluster:
        if self.client is None:
            self.client = sync_cluster.RedisCluster(
                startup_nodes=[sync_cluster.ClusterNode(h, p) for h, p in self.seeds],
                **self.kwargs)
        return self.client

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        return self.connected().pipeline(transaction, shard_hint)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connected(), name)


def async_cluster_for(seeds: tuple[tuple[str, int], ...], kwargs: dict[str, Any],
                      redis_class: type[Any]) -> Any:
    """What `async_redis_client` returns for a cluster URL: a DurableRedisCluster (not a
    redis.asyncio.Redis, but it has every command store/ uses, one slot each), or for arq
    (`redis_class` an ArqRedis) a ClusterArqRedis routing through one."""
    from redis.asyncio import Redis

    cluster = async_cluster_client(seeds, kwargs)
    if redis_class is Redis:
        return cluster
    from arq.connections import ArqRedis

    from strands_durable.store.cluster_arq import ClusterArqRedis

    if not issubclass(redis_class, ArqRedis):
        raise TypeError(f"no cluster client for {redis_class.__name__}")
    return ClusterArqRedis(cluster)
