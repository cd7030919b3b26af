"""Operator functions over HTTP: checkpoints (list, one) and requeue, the same functions
`durable checkpoints` and `durable requeue` call."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Path, Request

from strands_durable.api.auth import audit
from strands_durable.api.deps import StoreDep
from strands_durable.api.schemas import (
    MAX_CHECKPOINT,
    CheckpointList,
    RequeueRequest,
    RequeueResponse,
    SessionIdPath,
    error_responses,
)
from strands_durable.api.wiring import api_router
from strands_durable.sessions.checkpoints import (
    CheckpointDetail,
    get_checkpoint,
    list_checkpoints,
)
from strands_durable.sessions.requeue import requeue as do_requeue

router = api_router("/v1/sessions", tags=["operations"])


@router.get("/{session_id}/checkpoints", response_model=CheckpointList)
async def checkpoints(session_id: SessionIdPath, store: StoreDep) -> CheckpointList:
    """Every checkpoint (one per commit), numbered from 1: type, step, time, clean or not."""
    return CheckpointList(items=await list_checkpoints(store, session_id))


@router.get("/{session_id}/checkpoints/{n}", response_model=CheckpointDetail,
            responses=error_responses(404, e404="No such session or checkpoint"))
async def checkpoint(session_id: SessionIdPath, n: Annotated[int, Path(ge=1, le=MAX_CHECKPOINT)],
                     store: StoreDep) -> CheckpointDetail:
    """Checkpoint n in full: the pattern_state and token usage at that point."""
    return await get_checkpoint(store, session_id, n)


@router.post("/{session_id}/requeue", response_model=RequeueResponse,
             responses=error_responses(409, e409="Nothing to requeue, or the session is "
                                       "completed or cancelled"))
async def requeue(session_id: SessionIdPath, store: StoreDep, request: Request,
                  body: Annotated[RequeueRequest | None, Body()] = None) -> dict[str, Any]:
    """Put the session's failed or dead-lettered steps back on the stream (attempts
    reset, step_requeued recorded, the session running again)."""
    req = body or RequeueRequest()
    report = await do_requeue(store, session_id, step=req.step, dead=req.dead,
                              dry_run=req.dry_run)
    if not req.dry_run:
        await audit(request, "requeue", session_id,
                    f"step {req.step}" if req.step else ("dead letters" if req.dead else ""))
    return report.to_dict()
