"""The models of GET /v1/sessions/{id}/export and POST /v1/sessions/import. The document
itself is the store's `SessionExport` (store/export.py), the same one `durable export`
writes."""

from __future__ import annotations

from pydantic import BaseModel, Field

from strands_durable.store.export import SessionExport

__all__ = ["ImportedOut", "SessionExport"]


class ImportedOut(BaseModel):
    """The session an import wrote."""

    session_id: str = Field(description="Its id here (a new one with ?new_id=true).")
    status: str = Field(description="Its status as exported, kept: a running session goes "
                        "on here, a paused one stays paused.")
    requeued: int = Field(description="Jobs queued again: a running session's unfinished "
                          "steps, which this fleet's workers run.")
    source_session_id: str = Field(description="Its id in the document.")
