"""The data format recorded in Redis (store/format_version.py): stamped on an empty
keyspace, 0.1.0's data (no format recorded) upgraded in place, migrations run in order,
idempotent and resumable under a lock, an offline step refused naming the command, and
newer data refused by every role (real processes) in one line naming both formats."""

from __future__ import annotations

import asyncio
import json

import pytest
from helpers import EXAMPLES, free_port
from helpers.fleet import Fleet

from strands_durable.errors import LockNotAcquired
from strands_durable.settings import DurableSettings
from strands_durable.store import format_version as fv
from strands_durable.store.connect import open_store
from strands_durable.store.keys import FORMAT_FIELD, Keys
from strands_durable.store.store import Store
from strands_durable.version import DATA_FORMAT, __version__

BOUND_S = 120  # a loaded machine starts a process slowly; this bounds a hang, not a speed


# -- the pure decision ----------------------------------------------------------------------
def test_the_decision_for_each_state() -> None:
    assert fv.decide(fv.FormatState(None, has_data=False)) is fv.Action.STAMP
    assert fv.decide(fv.FormatState(None, has_data=True)) is fv.Action.UPGRADE  # 0.1.0's
    assert fv.decide(fv.FormatState(DATA_FORMAT, True)) is fv.Action.CURRENT
    assert fv.decide(fv.FormatState(DATA_FORMAT + 1, True)) is fv.Action.REFUSE_NEW
    offline = (fv.Migration(1, "x", fv._record_only, online=False),)
    assert fv.decide(fv.FormatState(1, True), 2, offline) is fv.Action.REFUSE_OLD
    with pytest.raises(fv.ConfigError, match="no migration from data format 2 to 3"):
        fv.decide(fv.FormatState(2, True), 3, offline)


def test_a_recorded_format_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(fv.ConfigError, match="not a number"):
        fv.parse_recorded("2; DROP")


# -- on a real redis-server -------------------------------------------------------------------
async def recorded(store: Store) -> str | None:
    return await store.redis.hget(store.keys.config(), FORMAT_FIELD)


async def test_an_empty_keyspace_is_stamped_with_this_release_s_format(
        settings: DurableSettings) -> None:
    store = open_store(settings)
    try:
        assert await store.data_format() is None
        await store.prepare()
        assert await store.data_format() == DATA_FORMAT
        await store.prepare()  # a second role: nothing changes
        assert await store.data_format() == DATA_FORMAT
    finally:
        await store.close()


@pytest.mark.parametrize("written_by_0_1_0", ["shards", "sessions"])
async def test_data_from_before_formats_is_format_1_and_upgraded_in_place(
        settings: DurableSettings, written_by_0_1_0: str) -> None:
    store = open_store(settings)
    try:
        if written_by_0_1_0 == "shards":  # 0.1.0's prepare() recorded the shard count
            await store.redis.hset(store.keys.config(), "shards", "1")
        else:
            await store.redis.zadd(store.keys.index_all(0), {"x": 1})
        await store.prepare()
        assert await store.data_format() == DATA_FORMAT
    finally:
        await store.close()


class Steps:
    """Migrations of a test: each step counts its runs and may fail once."""

    def __init__(self, count: int, fail_at: int | None = None) -> None:
        self.runs: list[int] = []
        self.fail_at = fail_at
        self.migrations = tuple(fv.Migration(v, f"step {v}", self._apply(v))
                                for v in range(1, count + 1))

    def _apply(self, version: int):  # type: ignore[no-untyped-def]
        async def apply(redis: object, keys: Keys) -> None:
            self.runs.append(version)
            if version == self.fail_at:
                self.fail_at = None
                raise RuntimeError(f"crash in step {version}")
        return apply


async def test_migrations_run_in_order_and_resume_after_a_crash(
        settings: DurableSettings) -> None:
    store = open_store(settings)
    try:
        await store.redis.hset(store.keys.config(), FORMAT_FIELD, "1")
        steps = Steps(3, fail_at=2)
        with pytest.raises(RuntimeError, match="crash in step 2"):
            await fv.check(store.redis, store.scripts, store.keys, "1", fresh=False,
                           current=4, migrations=steps.migrations)
        assert await recorded(store) == "2"  # step 1 done and recorded, 2 not
        await fv.check(store.redis, store.scripts, store.keys, "2", fresh=False,
                       current=4, migrations=steps.migrations)
        assert steps.runs == [1, 2, 2, 3]  # step 2 ran again (idempotent), 1 did not
        assert await recorded(store) == "4"
        await fv.check(store.redis, store.scripts, store.keys, "4", fresh=False,
                       current=4, migrations=steps.migrations)
        assert steps.runs == [1, 2, 2, 3]
    finally:
        await store.close()


async def test_concurrent_upgrades_run_each_step_once(settings: DurableSettings) -> None:
    stores = [open_store(settings) for _ in range(4)]
    try:
        await stores[0].redis.hset(stores[0].keys.config(), FORMAT_FIELD, "1")
        steps = Steps(3)
        await asyncio.gather(*(fv.upgrade(s.redis, s.scripts, s.keys, current=4,
                                          migrations=steps.migrations) for s in stores))
        assert steps.runs == [1, 2, 3]
        assert await recorded(stores[0]) == "4"
    finally:
        for s in stores:
            await s.close()


async def test_an_upgrade_waits_for_the_lock_another_holds(settings: DurableSettings) -> None:
    store = open_store(settings)
    try:
        await store.redis.hset(store.keys.config(), FORMAT_FIELD, "1")
        async with store.locked(fv.UPGRADE_LOCK):
            with pytest.raises(LockNotAcquired):
                await fv.upgrade(store.redis, store.scripts, store.keys, current=4,
                                 migrations=Steps(3).migrations, wait_s=0.2)
        assert await recorded(store) == "1"
    finally:
        await store.close()


async def test_an_offline_step_is_refused_naming_the_command(settings: DurableSettings) -> None:
    store = open_store(settings)
    try:
        await store.redis.hset(store.keys.config(), FORMAT_FIELD, "1")
        offline = (fv.Migration(1, "rewrite", fv._record_only, online=False),)
        with pytest.raises(fv.DataFormatUpgradeNeeded,
                           match=r"format 1 .* run `durable data-format --upgrade`"):
            await fv.check(store.redis, store.scripts, store.keys, "1", fresh=False,
                           current=2, migrations=offline)
        assert await recorded(store) == "1"
    finally:
        await store.close()


# -- real processes on data newer than this release ------------------------------------------
def one_line_naming_both(text: str) -> bool:
    lines = [line for line in text.splitlines() if "data format 99" in line]
    return (len(lines) == 1 and f"data format {DATA_FORMAT}" in lines[0]
            and __version__ in lines[0])


async def test_every_role_refuses_newer_data_in_one_line(
        settings: DurableSettings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = open_store(settings)
    try:
        await store.redis.hset(store.keys.config(), mapping={"shards": "1",
                                                              FORMAT_FIELD: "99"})
    finally:
        await store.close()
    fleet = Fleet.create(settings.redis_url, settings.key_prefix, tmp_path)
    worker = fleet.start_worker()
    await asyncio.to_thread(worker.wait, BOUND_S)
    log = fleet.logs()
    assert worker.returncode == 2, log
    assert one_line_naming_both(log), log
    assert "worker not started: data format 99" in log
    run = ["run", str(EXAMPLES / "chain-research.yaml"), "--var", "topic=x"]
    for role in (["scheduler"], ["api", "--port", str(free_port())], run):
        result = await asyncio.to_thread(fleet.cli, *role, check=False, timeout=BOUND_S)
        assert result.returncode == 2, (role, result.stderr)
        assert one_line_naming_both(result.stderr), result.stderr
    shown = await asyncio.to_thread(fleet.cli, "data-format", "--json")
    assert json.loads(shown.stdout) == {"release": __version__, "data_format": DATA_FORMAT,
                                        "recorded_format": 99, "upgraded": []}
    refused = await asyncio.to_thread(fleet.cli, "data-format", "--upgrade", check=False)
    assert refused.returncode == 2 and one_line_naming_both(refused.stderr), refused.stderr


async def test_a_started_keyspace_costs_one_read_at_start(settings: DurableSettings) -> None:
    """The check rides on the shard count's read: a role starting on a keyspace already
    stamped sends one HMGET, then only the consumer groups' creation (one per shard)."""
    first = open_store(settings)
    await first.prepare()
    await first.close()
    store = open_store(settings)
    sent: list[str] = []
    original = store.redis.execute_command

    async def counted(*args: object, **kwargs: object) -> object:
        sent.append(str(args[0]).upper())
        return await original(*args, **kwargs)

    store.redis.execute_command = counted  # type: ignore[method-assign]
    try:
        await store.prepare()
    finally:
        await store.close()
    assert sent == ["HMGET"] + ["XGROUP CREATE"] * store.keys.shards, sent


async def test_the_operator_upgrades_0_1_0_data_by_hand(
        settings: DurableSettings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = open_store(settings)
    try:
        await store.redis.hset(store.keys.config(), "shards", "1")  # as 0.1.0 left it
        fleet = Fleet.create(settings.redis_url, settings.key_prefix, tmp_path)
        before = json.loads((await asyncio.to_thread(fleet.cli, "data-format", "--json")).stdout)
        assert before["recorded_format"] is None
        done = await asyncio.to_thread(fleet.cli, "data-format", "--upgrade")
        assert done.stdout.splitlines() == [
            "upgraded: record the data format (0.1.0's keys need no change)",
            f"strands-durable {__version__} reads data format {DATA_FORMAT}; recorded: "
            f"{DATA_FORMAT}"]
        again = json.loads((await asyncio.to_thread(
            fleet.cli, "data-format", "--upgrade", "--json")).stdout)
        assert again["upgraded"] == [] and again["recorded_format"] == DATA_FORMAT
    finally:
        await store.close()
