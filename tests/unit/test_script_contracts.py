"""Every Lua script names its KEYS and ARGV on both sides (issue 32): it opens with
script_library.binding_header of its Python contract (the names and order of the KEYS
and ARGV dataclasses' fields), and the rest of the script reads those names, never a
position. A field moved, added or renamed in Python without its script (or the other
way round) fails here; so does a literal KEYS[n] or ARGV[n] below the header."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, get_type_hints

import pytest

from strands_durable.store import script_step
from strands_durable.store.script_gate import FairArgs, TakeArgs, TakeSpelling
from strands_durable.store.script_library import (
    HEADER,
    NAMES,
    IndexKeys,
    binding_header,
    flat,
    nested_bindings,
)
from strands_durable.store.script_step import CommitArgs, CommitKeys
from strands_durable.store.scripts import Scripts

LUA = Path(__file__).resolve().parents[2] / "store" / "lua"
INDEXED = re.compile(r"\b(KEYS|ARGV)\[([^\]]*)\]")
LOCAL = re.compile(r"^\s*local\s+(?!function\b)([\w\s,]+?)\s*(=|$)", re.M)


def contracts() -> dict[str, tuple[type, type]]:
    """Script name -> its (KEYS, ARGV) contract, from the typed methods' annotations
    (resolved in the method's own module: two modules may share a class name)."""
    found = {}
    for name in NAMES:
        hints = get_type_hints(getattr(Scripts, name))
        found[name] = (hints["keys"], hints["args"])
    return found


def split(text: str) -> tuple[str, str]:
    """(the script's binding header, the rest below it): the header runs from its first
    line to the first blank line."""
    lines = text.splitlines()
    start = next((n for n, line in enumerate(lines) if line.startswith(HEADER)), None)
    if start is None:
        return "", text
    end = next((n for n in range(start, len(lines)) if not lines[n].strip()), len(lines))
    return "\n".join(lines[start:end]), "\n".join(lines[:start] + lines[end:])


def code(text: str) -> str:
    """The text without its comments (no script has `--` inside a string)."""
    return "\n".join(line.split("--", 1)[0] for line in text.splitlines())


def problems(text: str, keys: type, args: type) -> list[str]:
    """What is wrong with a script's names against its contract ([] if nothing)."""
    found = []
    expected = binding_header(keys, args)
    header, body = split(text)
    if header != expected:
        found.append(f"its header is not its contract's; it should be:\n{expected}")
    for array, index in INDEXED.findall(code(body)):
        # Below the header only a variable part is indexed: by a loop's name or from
        # a bound start (`lanes_at + i - 1`), never by a literal position.
        if not (re.fullmatch(r"\s*[a-z_]\w*\s*", index) or re.search(r"\w_at\b", index)):
            found.append(f"{array}[{index}] below the header: use its name")
    bound = {line.split()[1] for line in expected.splitlines() if line.startswith("local ")}
    for names, _ in LOCAL.findall(code(body)):
        for name in (n.strip() for n in names.split(",")):
            if name in bound:
                found.append(f"`local {name}` below the header hides its binding")
    return found


@pytest.mark.parametrize("name", NAMES)
def test_every_script_binds_its_contract_by_name(name: str) -> None:
    keys, args = contracts()[name]
    assert problems((LUA / f"{name}.lua").read_text(), keys, args) == []


def test_the_check_fails_when_a_field_and_its_index_disagree() -> None:
    text = (LUA / "commit.lua").read_text()
    fields = [(f.name, f.type) for f in dataclasses.fields(CommitKeys)]
    fields[1], fields[2] = fields[2], fields[1]  # results and order swapped in Python only
    swapped = dataclasses.make_dataclass("CommitKeys", fields, frozen=True)
    swapped.__module__ = CommitKeys.__module__
    assert problems(text, CommitKeys, CommitArgs) == []
    found = problems(text, swapped, CommitArgs)
    assert len(found) == 1 and "local order_key = KEYS[2]" in found[0]
    # ... and the other way round: the script's two lines swapped, Python unchanged
    moved = text.replace("local results_key = KEYS[2]\nlocal order_key = KEYS[3]",
                         "local order_key = KEYS[2]\nlocal results_key = KEYS[3]")
    assert moved != text and problems(moved, CommitKeys, CommitArgs)


def test_the_check_fails_on_a_position_below_the_header() -> None:
    text = (LUA / "commit.lua").read_text()
    assert problems(text + "\nlocal late = tonumber(ARGV[15])\n", CommitKeys, CommitArgs)
    assert problems(text + "\nredis.call('DEL', KEYS[#KEYS])\n", CommitKeys, CommitArgs)
    assert problems(text + "\nlocal decided = 1\n", CommitKeys, CommitArgs)
    # comments may say anything
    assert problems(text + "\n-- ARGV[15] was now_ms\n", CommitKeys, CommitArgs) == []


def test_a_name_that_clashes_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class K:
        events: str

    @dataclasses.dataclass(frozen=True)
    class A:
        events_key: str
        error: str

    with pytest.raises(ValueError, match="events_key"):
        binding_header(K, A)


def test_lib_reads_take_spelling_and_the_indexes_in_their_field_order() -> None:
    lib = (LUA / "_lib.lua").read_text()
    assert nested_bindings(TakeSpelling, "ARGV", "at") in lib
    assert nested_bindings(FairArgs, "ARGV", "at") in lib
    statuses = [f.name for f in dataclasses.fields(IndexKeys)]
    assert statuses[0] == "all"
    assert ("local STATUSES = {" + ", ".join(f"'{s}'" for s in statuses[1:]) + "}") in lib


def sample(contract: type) -> Any:
    values: list[Any] = []
    for n, f in enumerate(dataclasses.fields(contract)):
        hint = str(f.type)
        if "IndexKeys" in hint:
            values.append(IndexKeys(*"abcdef"))
        elif "TakeSpelling" in hint:
            values.append(TakeSpelling(*"pqrstuvw", 9, "x"))
        elif "FairArgs" in hint:
            values.append(FairArgs(7, "a=2", 1, "b=3"))
        elif "tuple" in hint:
            values.append((f"{f.name}-1", f"{f.name}-2"))
        else:
            values.append(f"{f.name}{n}")
    return contract(*values)


@pytest.mark.parametrize("name", NAMES)
def test_flat_sends_every_field_in_order(name: str) -> None:
    for contract in contracts()[name]:
        value = sample(contract)
        expected: list[Any] = []
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            expected += (dataclasses.astuple(v) if dataclasses.is_dataclass(v)
                         else v if isinstance(v, tuple) else [v])
        assert flat(value) == expected
        assert flat(value) == expected  # the flattener cached for the class: the same


def test_flat_of_one_field_and_of_a_nested_contract() -> None:
    assert flat(script_step.StreamKeys("s")) == ["s"]
    args = TakeArgs("g", "c", 3, "now", 10, "1-0 2-0", TakeSpelling(*"abcdefg", "[]", 8, "f"),
                    FairArgs(5, "a=2", 1, "b=3"))
    assert flat(args) == ["g", "c", 3, "now", 10, "1-0 2-0", *"abcdefg", "[]", 8, "f", 5, "a=2",
                          1, "b=3"]
