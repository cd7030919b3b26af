"""Operator control over HTTP: pause, resume, cancel and signal (a human's answer),
the same functions `durable pause|resume|cancel` call."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Request, Response

from strands_durable.api.auth import audit
from strands_durable.api.deps import RenderStageDep, StoreDep
from strands_durable.api.routes_sessions import location
from strands_durable.api.schemas import (
    ActionResponse,
    ForkResponse,
    ResumeRequest,
    SessionIdPath,
    SignalRequest,
    error_responses,
)
from strands_durable.api.submission import Submitted, load_only
from strands_durable.api.wiring import api_router
from strands_durable.sessions import control
from strands_durable.sessions.checkpoints import fork_from_checkpoint

router = api_router("/v1/sessions", tags=["control"])

CONFLICT = error_responses(409)


@router.post("/{session_id}/pause", response_model=ActionResponse, responses=CONFLICT)
async def pause(session_id: SessionIdPath, store: StoreDep, request: Request
                ) -> ActionResponse:
    """Pause at the next step boundary: running steps finish and commit."""
    status = await control.pause(store, session_id)
    await audit(request, "pause", session_id)
    return ActionResponse(session_id=session_id, status=status)


@router.post("/{session_id}/cancel", response_model=ActionResponse, responses=CONFLICT)
async def cancel(session_id: SessionIdPath, store: StoreDep, request: Request
                 ) -> ActionResponse:
    """Stop scheduling and mark the session cancelled."""
    status = await control.cancel(store, session_id)
    await audit(request, "cancel", session_id)
    return ActionResponse(session_id=session_id, status=status)


@router.post("/{session_id}/resume", response_model=ActionResponse | ForkResponse,
             responses={**CONFLICT, 201: {"model": ForkResponse,
                                          "description": "Forked from a checkpoint"}})
async def resume(session_id: SessionIdPath, store: StoreDep, response: Response,
                 request: Request, stage: RenderStageDep,
                 body: Annotated[ResumeRequest | None, Body()] = None,
                 ) -> ActionResponse | ForkResponse:
    """Continue a paused or failed session: failed steps run again, nothing committed
    re-runs. Optionally with variables, raised budgets or a new spec; or, with
    `from_checkpoint`, fork a new session from an earlier checkpoint."""
    req = body or ResumeRequest()
    budgets = req.budgets.model_dump(exclude_none=True)
    if req.from_checkpoint is not None:
        n = req.from_checkpoint
        new_sid = await fork_from_checkpoint(store, session_id, n, variables=req.variables,
                                             budget_sets=budgets)
        await audit(request, "fork", session_id, f"checkpoint {n} -> {new_sid}")
        response.status_code = 201
        response.headers["Location"] = location(new_sid)
        record = await store.get_session(new_sid)
        return ForkResponse(session_id=new_sid, forked_from=session_id, checkpoint=n,
                            status=record.status.value)
    spec = req.spec
    new_spec = await stage.run(load_only, Submitted(spec)) if spec is not None else None
    outcome = await control.resume(store, session_id, variables=req.variables,
                                   budget_sets=budgets, new_spec=new_spec)
    await audit(request, "resume", session_id, "new spec" if new_spec is not None else "")
    return ActionResponse(session_id=session_id, status=outcome.status, notes=outcome.notes)


@router.post("/{session_id}/signal", response_model=ActionResponse, responses=CONFLICT)
async def signal(session_id: SessionIdPath, body: SignalRequest, store: StoreDep,
                 request: Request) -> ActionResponse:
    """Answer the human-in-the-loop step the session waits for; it then continues."""
    outcome = await control.resume(store, session_id, hitl_response=body.response)
    await audit(request, "signal", session_id)
    return ActionResponse(session_id=session_id, status=outcome.status, notes=outcome.notes)
