"""`durable run`'s in-process consumer: it runs its own session's steps and nothing else.

A `durable run` pointed at a shared Redis (DURABLE_REDIS_URL) must not run other
sessions, which may carry other people's work, in the CLI process with the CLI user's
credentials. Sessions share their shard's stream and its consumer group, and
XREADGROUP '>' hands out whatever entry is next, so this consumer never reads the
group: it takes its session's entries by id (store/lua/claim_session.lua), waits
for new ones with a plain XREAD (which takes nothing), re-claims only its session's
entries left idle, and promotes only its session's timers. The entries stay in the
shared group: if the CLI dies, a worker of the fleet re-claims them as it would any
dead worker's.
"""

from __future__ import annotations

from collections.abc import Sequence

from strands_durable.models import now_ms
from strands_durable.settings import DurableSettings
from strands_durable.store.keys import check_session_id
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.execute import StepExecutor
from strands_durable.worker.slots import SlotHold


class SessionConsumer(StepConsumer):
    def __init__(self, settings: DurableSettings, store: Store, session_id: str,
                 name: str | None = None, executor: StepExecutor | None = None) -> None:
        super().__init__(settings, store, name, executor)
        self.session_id = check_session_id(session_id)
        self.shard = store.keys.shard(session_id)
        self._after = "0-0"  # the last entry of the stream looked at
        self._pending_cursor = "-"  # where the next look for idle entries goes on

    def read_shards(self) -> Sequence[int]:
        return (self.shard,)

    def _take_next(self, shard: int) -> int:
        return 0  # a commit's take reads the group ('>'): any session's entry

    async def promote_timers(self, shard: int) -> int:
        return await self.store.promote_timers(shard, now_ms(), session_id=self.session_id)

    async def _read_new(self, shard: int, hold: SlotHold, used: int) -> int:
        claimed = await self.store.claim_new_entries(self.session_id, self.name, self._after,
                                                     hold.count - used)
        self._after = claimed.cursor
        if self._stopping.is_set() and claimed.entries:  # taken as we stopped: hand back
            await self.store.release(shard, [e for e, _ in claimed.entries], self.name,
                                     self.settings.claim_idle_ms * 10)
            return 0
        for entry_id, fields in claimed.entries:
            self._spawn(shard, entry_id, fields, reclaimed=False)
        if not claimed.entries and claimed.at_end:
            # Nothing of ours yet: wait for anything new on the stream, then look again.
            await self.store.wait_for_entries(shard, self._after, self.settings.read_block_ms)
        return len(claimed.entries)

    async def _reclaim(self, shard: int, slots: int) -> int:
        claimed = await self.store.claim_idle_entries(
            self.session_id, self.name, self._pending_cursor, slots,
            self.settings.claim_idle_ms)
        self._pending_cursor = claimed.cursor
        spawned = 0
        for entry_id, fields in claimed.entries:
            if await self._take_over(shard, entry_id, fields):
                spawned += 1
        return spawned
