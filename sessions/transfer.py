"""Sessions that move between deployments: a whole session exported as one document and
imported into another Redis (a fleet, or the local store), where it goes on from where it
stopped. The document is untrusted on import: read within a size limit, validated
(store/export.py check_export) and written all or nothing."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from pydantic import ValidationError

from strands_durable.access import DEFAULT_NAMESPACE
from strands_durable.errors import SessionNotFound
from strands_durable.store.export import (
    EXPORT_FORMAT,
    EXPORT_KIND,
    InvalidExport,
    SessionExport,
    check_export,
    renamed,
)
from strands_durable.store.keys import new_session_id
from strands_durable.store.store import Store
from strands_durable.version import __version__
from strands_durable.webhooks import without_secret

EVENTS_SLACK = 1_000  # MAXLEN ~ trims whole nodes of 100 entries: a capped stream runs over

__all__ = ["ImportedSession", "export_session", "export_text", "import_session", "parse_export"]


@dataclass(frozen=True)
class ImportedSession:
    session_id: str
    status: str
    requeued: int  # jobs put on the stream again (a running session's unfinished steps)
    source_session_id: str  # the id it had where it was exported


async def export_session(store: Store, session_id: str) -> SessionExport:
    """The whole session, read at one instant; SessionNotFound if there is none."""
    doc = await store.export_session(session_id)
    if doc is None:
        raise SessionNotFound(session_id)
    if doc.meta.get("webhook"):  # its webhook's signing secret never leaves the fleet
        doc = doc.model_copy(update={"meta": {**doc.meta, "webhook": without_secret(
            doc.meta["webhook"])}})
    return doc


def parse_export(data: bytes | str, max_bytes: int) -> SessionExport:
    """A document read from a file or a request body: its size first, then its JSON, its
    kind and format version, then its shape; InvalidExport naming what is wrong."""
    size = len(data.encode() if isinstance(data, str) else data)
    if size > max_bytes:
        raise InvalidExport(f"the export is over {max_bytes} bytes, the limit "
                            "(DURABLE_MAX_IMPORT_BYTES)")
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:  # not JSON, cut short, nested too deep
        raise InvalidExport(f"not a session export: not JSON ({str(exc)[:120]})") from None
    if not isinstance(raw, dict) or raw.get("kind") != EXPORT_KIND:
        raise InvalidExport(f"not a session export: its kind is not {EXPORT_KIND!r}")
    if raw.get("format") != EXPORT_FORMAT:
        raise InvalidExport(f"export format {str(raw.get('format'))[:20]}; this release "
                            f"({__version__}) imports format {EXPORT_FORMAT}")
    try:
        return SessionExport.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "the document"
        raise InvalidExport(f"not a valid session export ({exc.error_count()} problem(s)); "
                            f"{where[:200]}: {first['msg']}") from None


async def import_session(store: Store, doc: SessionExport, *, new_id: bool = False,
                         namespace: str | None = None) -> ImportedSession:
    """Check `doc` and write it; under a fresh id with `new_id`, in `namespace` when one
    is given (an API token's). SessionExists when the id is taken (nothing written)."""
    check_export(doc)
    # A session's events are capped (approximately: whole stream nodes) at events_max.
    if len(doc.events) > store.events_max + EVENTS_SLACK:
        raise InvalidExport(f"the export has {len(doc.events)} events; a session keeps at "
                            f"most about {store.events_max} (DURABLE_EVENTS_MAX)")
    source = doc.session_id
    if new_id:
        shards = store.keys.shards
        doc = renamed(doc, new_session_id(random.randrange(shards), shards))
    if namespace is not None:
        meta = {k: v for k, v in doc.meta.items() if k != "namespace"}
        if namespace != DEFAULT_NAMESPACE:
            meta["namespace"] = namespace
        doc = doc.model_copy(update={"meta": meta})
    await store.import_session(doc)
    status = doc.meta["status"]
    requeued = len(doc.queued) if status in ("running", "paused") else 0
    return ImportedSession(session_id=doc.session_id, status=status, requeued=requeued,
                           source_session_id=source)


def export_text(doc: SessionExport) -> str:
    """The document as `durable export` writes it (one line of JSON)."""
    return json.dumps(doc.model_dump(mode="json"), ensure_ascii=False,
                      separators=(",", ":"))
