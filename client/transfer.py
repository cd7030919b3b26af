"""The clients' methods for sessions that move (GET /v1/sessions/{id}/export, POST
/v1/sessions/import), mixed into `AsyncClient` and `Client`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strands_durable.api.schemas_transfer import ImportedOut, SessionExport
from strands_durable.sessions.transfer import parse_export
from strands_durable.settings import current_limits

if TYPE_CHECKING:
    from strands_durable.client.aio import AsyncClient
    from strands_durable.client.backend import Backend
    from strands_durable.client.sync import _LoopThread


class TransferMethods:
    _backend: Backend

    # -- sessions that move -----------------------------------------------------------
    async def export_session(self, session_id: str) -> SessionExport:
        """The whole session as one versioned document (`durable export`), to import
        into another deployment.

        ```python
        Path("s.json").write_text((await client.export_session(sid)).model_dump_json())
        ```"""
        return await self._backend.export_session(session_id)

    async def import_session(self, document: SessionExport | str | bytes, *,
                             new_id: bool = False) -> ImportedOut:
        """Write an exported session here (`durable import`); it goes on from where it
        stopped. InvalidInput for a document that is not a valid export, Conflict when
        its id exists here (`new_id=True` imports a copy under a fresh id).

        ```python
        imported = await client.import_session(Path("s.json").read_bytes())
        ```"""
        if not isinstance(document, SessionExport):
            document = parse_export(document, current_limits().max_import_bytes)
        return await self._backend.import_session(document, new_id)


class SyncTransferMethods:
    _async: AsyncClient
    _thread: _LoopThread

    def export_session(self, session_id: str) -> SessionExport:
        """The whole session as one document. `client.export_session(sid).model_dump_json()`"""
        return self._thread.run(self._async.export_session(session_id))

    def import_session(self, document: SessionExport | str | bytes, *,
                       new_id: bool = False) -> ImportedOut:
        """Import an exported session. `client.import_session(Path("s.json").read_bytes())`"""
        return self._thread.run(self._async.import_session(document, new_id=new_id))
