"""Sessions that move over HTTP: GET /v1/sessions/{id}/export (role read) and POST
/v1/sessions/import (role operate), the operations of `durable export` and `durable
import` (sessions/transfer.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from strands_durable.api.auth import audit, namespace_of
from strands_durable.api.deps import SettingsDep, StoreDep, ensure_prepared
from strands_durable.api.schemas import SessionIdPath
from strands_durable.api.schemas_transfer import ImportedOut, SessionExport
from strands_durable.api.wiring import api_router
from strands_durable.sessions import transfer

router = api_router("/v1/sessions", tags=["sessions"], errors=(409,))
IMPORT_PATH = "/v1/sessions/import"


@router.get("/{session_id}/export", response_model=SessionExport)
async def export_session(session_id: SessionIdPath, store: StoreDep) -> SessionExport:
    """The whole session as one versioned document (what `durable export` writes), read
    at one instant. The session stays here: pause it first when it moves."""
    return await transfer.export_session(store, session_id)


@router.post("/import", status_code=201, response_model=ImportedOut, openapi_extra={
    "requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/SessionExport"}}}}})
async def import_session(
    request: Request, store: StoreDep, settings: SettingsDep,
    new_id: Annotated[bool, Query(description="Import under a fresh session id.")] = False,
) -> ImportedOut:
    """Write an exported session here, all or nothing, in the request's namespace; it
    goes on from where it stopped. A body that is not a valid export of this format
    (or over DURABLE_MAX_IMPORT_BYTES) is 422 (413), a session id that exists here 409;
    nothing is written either way."""
    doc = transfer.parse_export(await request.body(), settings.max_import_bytes)
    await ensure_prepared(request.app)
    imported = await transfer.import_session(store, doc, new_id=new_id,
                                             namespace=namespace_of(request))
    await audit(request, "import", target=imported.session_id,
                detail=f"from {imported.source_session_id}")
    return ImportedOut(**imported.__dict__)
