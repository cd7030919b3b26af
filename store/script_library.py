"""The machinery of the script library (store/scripts.py): loading the Lua sources,
the shared index keys, turning a typed KEYS/ARGV contract into Redis's lists (`flat`),
the named bindings at the top of each script (`binding_header`), and the reply every
verdict script shares (`Verdict`)."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from functools import cache
from importlib import resources
from typing import Any, get_origin, get_type_hints

from redis.asyncio import Redis

from strands_durable.store.codec import as_str
from strands_durable.store.keys import Keys
from strands_durable.store.pipelined import PipelinedConnection

NAMES = (
    "create", "gate", "commit", "fail_step", "dead_letter", "renew",
    "promote_timers", "delete", "lock_release", "lock_extend", "control",
    "release", "requeue", "fork", "retire_consumer", "claim_session", "flag_stuck",
    "park_entry", "journal", "take", "ack", "lane_page", "beat", "declare_dead",
    "claim_orphans", "capacity_acquire", "capacity_release", "capacity_throttled",
    "export", "import_session", "quota_place", "token_save", "live_append", "results_page",
)


def _lua_text(name: str) -> str:
    return (resources.files("strands_durable.store") / "lua" / f"{name}.lua").read_text()


@cache
def script_source(name: str) -> str:
    return _lua_text("_lib") + "\n" + _lua_text(name)


@dataclass(slots=True)
class IndexKeys:
    """The shard's status indexes, the LAST six KEYS of every script that changes a
    session's status (the convention of _lib.lua)."""

    all: str
    running: str
    paused: str
    completed: str
    failed: str
    cancelled: str

    @classmethod
    def of(cls, keys: Keys, shard: int) -> IndexKeys:
        return cls(keys.index_all(shard), *keys.index_statuses(shard))


# -- one flattener: a contract's values in field order --------------------------------
# Contracts are slotted dataclasses, not frozen ones: one is built for every script call
# (a commit's five hold 80 fields) and flattened at once, and a frozen one's __init__
# sets each field through object.__setattr__ (a commit's arguments: 3.8 us, 0.4 slotted).
Flattener = Callable[[Any], list[Any]]
_FLATTENERS: dict[type, Flattener] = {}


def flat(contract: Any) -> list[Any]:
    """A contract's values in field order, nested contracts and tuples spread out: the
    KEYS or ARGV list a script is sent (a commit sends 57 values, every step). How to
    flatten each contract class is worked out once, from its field types."""
    cls = type(contract)
    flattener = _FLATTENERS.get(cls)
    if flattener is None:
        flattener = _FLATTENERS[cls] = _flattener(cls)
    return flattener(contract)


def _flattener(cls: type) -> Flattener:
    """Runs of plain fields read by one attrgetter each; a nested contract flattened,
    a tuple field spread, in field order."""
    parts: list[Flattener] = []
    run: list[str] = []

    def end_run() -> None:
        if len(run) > 1:
            pick = operator.attrgetter(*run)
            parts.append(lambda c: list(pick(c)))
        elif run:
            one = operator.attrgetter(run[0])
            parts.append(lambda c: [one(c)])
        run.clear()

    for name, hint in _field_hints(cls):
        if is_dataclass(hint) or _is_sequence(hint):
            end_run()
            parts.append(_spread(operator.attrgetter(name), nested=is_dataclass(hint)))
        else:
            run.append(name)
    end_run()
    if len(parts) == 1:
        return parts[0]

    def flattened(contract: Any) -> list[Any]:
        out: list[Any] = []
        for part in parts:
            out += part(contract)
        return out

    return flattened


def _spread(get: Callable[[Any], Any], nested: bool) -> Flattener:
    if nested:
        return lambda contract: flat(get(contract))
    return lambda contract: list(get(contract))


def _field_hints(cls: type) -> list[tuple[str, Any]]:
    hints = get_type_hints(cls)
    return [(f.name, hints[f.name]) for f in fields(cls)]


def _is_sequence(hint: Any) -> bool:
    return get_origin(hint) in (tuple, list)


# -- the named bindings at the top of each script -------------------------------------
HEADER = "-- KEYS and ARGV by name"


def binding_header(keys: type, args: type) -> str:
    """The lines that open a script (after its comment): its KEYS and ARGV bound to named
    locals in the order of its contract's fields, so that the rest of the script reads
    names, never positions. A key `f` binds `local f_key = KEYS[n]`, an argument `f`
    `local f = ARGV[n]` (the raw string: any conversion is the script's own); a nested
    contract or a tuple binds where it starts, `local f_at = n` (a tuple after another:
    where that one ends, from its `<name>_count` argument); an `IndexKeys` field is the
    six last KEYS, which _lib.lua's status helpers read. tests/unit/test_script_contracts.py
    checks that each script opens with this text, so a field moved in Python without its
    script (or the other way round) fails there."""
    def module(cls: type) -> str:
        return cls.__module__.rsplit(".", 1)[-1] + ".py"

    if module(keys) == module(args):
        where = f"{keys.__name__} and {args.__name__} ({module(keys)})"
    else:
        where = f"{keys.__name__} ({module(keys)}) and {args.__name__} ({module(args)})"
    lines = [f"{HEADER}, in the order of {where}:"]
    later: list[str] = []
    lines += _bindings(keys, "KEYS", "_key", later)
    lines += _bindings(args, "ARGV", "", later)
    names = [line.split()[1] for line in lines + later if line.startswith("local ")]
    clash = sorted({n for n in names if names.count(n) > 1} | (set(names) & reserved_names()))
    if clash:
        raise ValueError(f"{keys.__name__}/{args.__name__}: names {clash} clash; "
                         "rename the fields")
    return "\n".join(lines + later)


def nested_bindings(cls: type, array: str, base: str, indent: str = "  ") -> str:
    """A nested contract's fields bound inside the Lua helper that reads them from
    `array[base]` on (_lib.lua read_spelling: TakeSpelling)."""
    out = []
    for n, (name, hint) in enumerate(_field_hints(cls)):
        if is_dataclass(hint) or _is_sequence(hint):
            raise ValueError(f"{cls.__name__}.{name}: a nested contract is flat")
        at = base if n == 0 else f"{base} + {n}"
        out.append(f"{indent}local {name} = {array}[{at}]")
    return "\n".join(out)


def _size(cls: Any) -> int:
    return len(_field_hints(cls))


def _bindings(cls: type, array: str, suffix: str, later: list[str]) -> list[str]:
    out: list[str] = []
    at = 1
    tuple_before: str | None = None  # the last tuple field: positions after it vary
    hints = _field_hints(cls)
    for n, (name, hint) in enumerate(hints):
        if hint is IndexKeys:
            if array != "KEYS" or n != len(hints) - 1:
                raise ValueError(f"{cls.__name__}.{name}: IndexKeys is the last of KEYS")
            out.append(f"-- {name}: the last six KEYS, the status indexes (_lib.lua)")
        elif _is_sequence(hint):
            if tuple_before is None:
                out.append(f"local {name}_at = {at}  -- {array}[{name}_at..]: {name}")
            else:
                later.append(f"local {name}_at = {tuple_before}_at + "
                             f"tonumber({tuple_before}_count)  -- {array}[{name}_at..]: "
                             f"{name}")
            tuple_before = name
        elif tuple_before is not None:
            raise ValueError(f"{cls.__name__}.{name}: after a tuple, only tuples and "
                             "IndexKeys")
        elif is_dataclass(hint):
            size = _size(hint)
            out.append(f"local {name}_at = {at}  -- {array}[{at}..{at + size - 1}]: "
                       f"{getattr(hint, '__name__', name)}'s fields")
            at += size
        else:
            out.append(f"local {name}{suffix} = {array}[{at}]")
            at += 1
    return out


# Names a binding must not take: Lua's own, Redis's, and _lib.lua's (reserved_names).
LUA_NAMES = frozenset({
    "KEYS", "ARGV", "redis", "cjson", "cmsgpack", "bit", "struct", "string", "table",
    "math", "type", "next", "select", "error", "assert", "pairs", "ipairs", "unpack",
    "pcall", "tostring", "tonumber", "print", "setmetatable", "getmetatable", "rawget",
    "rawset",
})
_LIB_NAME = re.compile(r"^local (?:function )?([A-Za-z_]\w*)", re.M)


@cache
def reserved_names() -> frozenset[str]:
    """LUA_NAMES and every top-level name of _lib.lua, its helpers and constants, read
    from its source: a helper added there is reserved with it."""
    return LUA_NAMES | frozenset(_LIB_NAME.findall(_lua_text("_lib")))


# -- replies ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Verdict:
    """The reply of a script that answers a verdict and, for some verdicts, one detail
    (a status, a session id, a step, an error): {'ok', 'running'}, {'gone'}."""

    verdict: str
    detail: str = ""

    @classmethod
    def decode(cls, reply: Any) -> Verdict:
        return cls(as_str(reply[0]), as_str(reply[1]) if len(reply) > 1 else "")


class ScriptLibrary:
    """Registers every script once per client; subclasses add the typed calls. Scripts
    run through the client's pipelined connection where it has one (store/pipelined.py)."""

    def __init__(self, redis: Redis) -> None:
        self._scripts = {name: redis.register_script(script_source(name)) for name in NAMES}
        self._wire = PipelinedConnection.of(redis)

    async def _run(self, name: str, keys: list[Any], args: list[Any]) -> Any:
        script = self._scripts[name]
        if self._wire is not None:
            return await self._wire.run_script(script, keys, args)
        return await script(keys=keys, args=args)

    async def _call(self, name: str, keys: Any, args: Any) -> Any:
        return await self._run(name, flat(keys), flat(args))
