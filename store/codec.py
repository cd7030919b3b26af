"""How values cross the Redis boundary: the one bytes-to-str decoder (a client may or
may not decode replies) and the compact JSON every script argument is written in."""

from __future__ import annotations

from typing import Any

from strands_durable.models import compact_json

JSON_SEPARATORS = (",", ":")


def dumps(value: Any) -> str:
    return compact_json(value)


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
