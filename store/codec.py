"""How values cross the Redis boundary: the one bytes-to-str decoder (a client may or
may not decode replies), the compact JSON every script argument is written in, and the
stream entry ids Redis takes (a reader's `after` or `before`, checked and made bounds)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from strands_durable.errors import InvalidId
from strands_durable.models import compact_json

JSON_SEPARATORS = (",", ":")


def dumps(value: Any) -> str:
    return compact_json(value)


def flat_maps(out: list[str], maps: Iterable[Mapping[str, str]]) -> list[str]:
    """Field maps as a script reads them from ARGV with nothing to decode (`out`
    extended): each map its number of strings, then its names and values in turn
    (_lib.lua add_events_at, live_append.lua)."""
    for fields in maps:
        out.append(str(2 * len(fields)))
        for item in fields.items():
            out += item
    return out


def as_str(value: Any) -> str:
    """A reply value as text: bytes decoded, None as ''."""
    if isinstance(value, bytes):
        return value.decode()
    return "" if value is None else str(value)


def as_str_map(h: Any) -> dict[str, str]:
    return {as_str(k): as_str(v) for k, v in h.items()}


def as_entries(entries: Any) -> list[tuple[str, dict[str, str]]]:
    """Stream entries ([(id, fields), ...]) as text."""
    return [(as_str(eid), as_str_map(fields)) for eid, fields in entries]


# A stream entry's id as Redis takes one: milliseconds, then optionally a sequence number
# (ASCII digits: `\d` and int() also take other scripts' digits, which Redis refuses),
# each at most 2^64 - 1 (Redis refuses a larger part: a reader must say so, not fail).
MAX_STREAM_ID_PART = 2**64 - 1
STREAM_ID_FORM = (f"an entry id: <ms> or <ms>-<seq>, each a whole number up to "
                  f"{MAX_STREAM_ID_PART}")
STREAM_ID_PATTERN = r"^[0-9]{1,20}(-[0-9]{1,20})?$"
_STREAM_ID = re.compile(r"([0-9]{1,20})(?:-([0-9]{1,20}))?")


def is_stream_id(value: object) -> bool:
    found = _STREAM_ID.fullmatch(value) if isinstance(value, str) else None
    return found is not None and all(int(part) <= MAX_STREAM_ID_PART
                                     for part in found.groups() if part is not None)


def check_stream_id(value: str) -> str:
    """`value` when it is a stream entry id Redis takes; InvalidId naming it otherwise."""
    if not is_stream_id(value):
        raise InvalidId("stream entry id", value, STREAM_ID_FORM)
    return value


def range_after(entry_id: str) -> str | None:
    """XRANGE's start for the entries after `entry_id` (a stream id); None when none can
    follow it (the largest id: Redis refuses it as an exclusive start)."""
    ms, sep, seq = entry_id.partition("-")
    if sep and int(ms) == int(seq) == MAX_STREAM_ID_PART:
        return None
    return f"({entry_id}"


def range_before(entry_id: str) -> str | None:
    """XREVRANGE's end for the entries before `entry_id`; None when none can come
    before it (0-0: Redis refuses it as an exclusive end)."""
    ms, sep, seq = entry_id.partition("-")
    if sep and int(ms) == int(seq) == 0:
        return None
    return f"({entry_id}"
