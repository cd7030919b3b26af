"""What every part of the Store shares: the client, the key layout, the scripts."""

from __future__ import annotations

from redis.asyncio import Redis

from strands_durable.store.keys import Keys
from strands_durable.store.records import DEFAULT_EVENTS_MAX
from strands_durable.store.script_library import IndexKeys
from strands_durable.store.scripts import Scripts

# A worker beats every DURABLE_HEARTBEAT_S by default (settings.heartbeat_s).
DEFAULT_HEARTBEAT_S = 5.0


class StoreBase:
    def __init__(self, redis: Redis, keys: Keys, events_max: int = DEFAULT_EVENTS_MAX,
                 heartbeat_s: float = DEFAULT_HEARTBEAT_S) -> None:
        self.redis = redis  # the store's own: nothing outside store/ talks to Redis
        self.keys = keys
        self.events_max = events_max
        self.heartbeat_s = heartbeat_s  # workers' heartbeat period: who counts as alive
        self.scripts = Scripts.register(redis)
        self._indexes: dict[int, IndexKeys] = {}
        # The namespaces' dispatch weights other than 1, "ns=w ...", as every take sends
        # them (read from the quotas by the worker: Store.refresh_fair_weights).
        self.fair_weights = ""
        # Namespaces' quotas of steps in flight, each shard's part, "ns=n ..." (the same).
        self.fair_limits = ""
        # Shard -> whether its fairness state existed at the last timer poll (unknown:
        # looked for): a fleet of one namespace's takes then skip even the look.
        self.fair_look: dict[int, bool] = {}

    def _index(self, shard: int) -> IndexKeys:
        """The shard's status index keys (spelled once per shard: every commit sends them)."""
        index = self._indexes.get(shard)
        if index is None:
            index = self._indexes[shard] = IndexKeys.of(self.keys, shard)
        return index
