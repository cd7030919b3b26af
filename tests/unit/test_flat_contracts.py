"""script_step.flat, the step path's faster flatten, gives script_library.flatten's
KEYS and ARGV for every script's contract."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from strands_durable.store.script_library import NAMES, IndexKeys, flatten
from strands_durable.store.script_step import TakeSpelling, flat
from tests.unit.test_house_redis import contracts

NESTED = {"IndexKeys": IndexKeys(*"abcdef"), "TakeSpelling": TakeSpelling(*"pqrstuvw", 9)}


def sample(contract: type) -> Any:
    values: list[Any] = []
    for n, f in enumerate(dataclasses.fields(contract)):
        hint = str(f.type)
        nested = next((v for name, v in NESTED.items() if name in hint), None)
        if nested is not None:
            values.append(nested)
        elif "tuple" in hint or "list" in hint:
            values.append((f"{f.name}-1", f"{f.name}-2"))
        else:
            values.append(f"{f.name}{n}")
    return contract(*values)


@pytest.mark.parametrize("name", NAMES)
def test_flat_is_flatten_for_every_contract(name: str) -> None:
    for contract in contracts()[name]:
        value = sample(contract)
        assert flat(value) == flatten(value)
        assert flat(value) == flatten(value)  # the cached getter gives the same again


def test_a_one_field_contract_and_nesting() -> None:
    from strands_durable.store.script_step import StreamKeys, TakeArgs

    assert flat(StreamKeys("s")) == ["s"]
    args = TakeArgs("g", "c", 3, "now", 10, "1-0 2-0", TakeSpelling(*"abcdefg", "[]", 8))
    assert flat(args) == ["g", "c", 3, "now", 10, "1-0 2-0", *"abcdefg", "[]", 8]
