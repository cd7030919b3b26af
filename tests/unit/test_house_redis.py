"""The store is the only code that talks to Redis (issue 11): no module outside store/
touches a client (`.redis` of a Store, or anything's) or imports redis-py beyond its
exceptions; and every Lua script is called through the typed library."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import get_type_hints

import pytest

from strands_durable.store import script_operator
from strands_durable.store.script_gate import FairArgs, TakeSpelling
from strands_durable.store.script_library import NAMES, IndexKeys, flat, script_source
from strands_durable.store.scripts import Scripts

ROOT = Path(__file__).resolve().parents[2]
OUTSIDE_STORE = ("core", "metrics", "spec", "patterns", "planning", "sessions", "scheduler",
                 "worker", "api")
ALLOWED_REDIS_MODULES = {"redis.exceptions"}  # catching its errors is fine


def modules() -> list[Path]:
    return sorted(p for folder in OUTSIDE_STORE for p in (ROOT / folder).rglob("*.py"))


def redis_uses(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr == "redis":
            found.append(f"line {node.lineno}: .redis")
        elif isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names
                      if a.name.split(".")[0] == "redis" and a.name not in ALLOWED_REDIS_MODULES]
        elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0
              and node.module.split(".")[0] == "redis"
              and node.module not in ALLOWED_REDIS_MODULES):
            found.append(f"line {node.lineno}: from {node.module} import ...")
    return found


def test_the_modules_outside_the_store_are_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in modules()}
    assert {"worker/consumer.py", "scheduler/watchdog.py", "api/listing.py",
            "metrics/fleet.py"} <= names


@pytest.mark.parametrize("path", modules(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_the_store_talks_to_redis(path: Path) -> None:
    assert redis_uses(path) == []


def test_the_check_catches_a_raw_call_and_an_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from redis.asyncio import Redis\nimport redis.exceptions\n"
                   "async def f(store):\n    await store.redis.hget('k', 'f')\n")
    assert redis_uses(bad) == ["line 1: from redis.asyncio import ...", "line 4: .redis"]


def contracts() -> dict[str, tuple[type, type]]:
    """Script name -> its (KEYS, ARGV) contract, from the typed methods' annotations
    (resolved in the method's own module)."""
    found = {}
    for name in NAMES:
        hints = get_type_hints(getattr(Scripts, name))
        found[name] = (hints["keys"], hints["args"])
    return found


def test_every_script_has_a_typed_call_with_dataclass_contracts() -> None:
    for name, (keys, args) in contracts().items():
        assert dataclasses.is_dataclass(keys) and dataclasses.is_dataclass(args), name
        assert script_source(name)


def test_commit_contract_is_21_keys_and_40_args_then_events_and_scheduled_steps() -> None:
    keys, args = contracts()["commit"]
    index = IndexKeys(*[f"i{n}" for n in range(6)])
    k = keys(*[f"k{n}" for n in range(len(dataclasses.fields(keys)) - 1)], index)
    events = ("4", "type", "step_completed", "step", "step:0")
    scheduled = ("step:1", "1", "a", "agent", "{}", "step:2", "1", "b", "agent", "{}")
    a = args(*range(len(dataclasses.fields(args)) - 4), TakeSpelling(*range(10)),
             FairArgs(1, "", 1, ""), events, scheduled)
    # 13 of the session and shard, `took` (a retried commit's take), the unwritten key
    # (the take never runs on a half-moved slot), the six indexes
    assert len(flat(k)) == 21 and flat(k)[-6:] == [f"i{n}" for n in range(6)]
    # 25, then the take: count, TakeSpelling (10) and FairArgs (4), then the events and
    # the next steps (each job's entry fields beside it): nothing for Lua to decode
    assert flat(a)[40:] == [*events, *scheduled]
    assert "'hitl'" not in script_source("commit")  # Lua knows no planner names


def test_tuples_spread_in_order() -> None:
    keys = script_operator.DeleteKeys("m", "c", "j", "i", "s", ("o1", "o2"), ("l1",),
                                      ("j1", "j2"), IndexKeys("a", "r", "p", "co", "f", "ca"))
    assert flat(keys) == ["m", "c", "j", "i", "s", "o1", "o2", "l1", "j1", "j2", "a", "r",
                             "p", "co", "f", "ca"]
