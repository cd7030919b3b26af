"""/healthz (Redis reachable, workers seen recently) and /metrics (/docs and /openapi.json:
api/console/docs.py)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import Depends, Security
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials

from strands_durable.api.auth import bearer, require_token, token_matches
from strands_durable.api.deps import SettingsDep, StoreDep
from strands_durable.api.schemas import (
    Health,
    RedisHealth,
    VersionHealth,
    WorkerHealth,
    error_responses,
)
from strands_durable.api.wiring import open_router
from strands_durable.metrics import CONTENT_TYPE, render_api_metrics
from strands_durable.store.fleet import WorkerInfo, list_workers, liveness_window_s
from strands_durable.store.outage import REDIS_DOWN
from strands_durable.store.store import Store
from strands_durable.version import DATA_FORMAT, __version__

router = open_router(tags=["system"])
PING_TIMEOUT_S = 2.0


def worker_health(workers: list[WorkerInfo], window_s: float) -> WorkerHealth:
    alive = sorted(w.consumer for w in workers if w.alive)
    return WorkerHealth(recent=len(alive), known=len(workers), window_s=window_s, names=alive)


@router.get("/healthz", response_model=Health,
            responses={503: {"model": Health, "description": "Redis is unreachable"}})
async def healthz(store: StoreDep, settings: SettingsDep,
                  credentials: Annotated[HTTPAuthorizationCredentials | None,
                                         Security(bearer)] = None) -> Any:
    """Liveness and readiness: 200 while Redis answers (status `degraded` when no worker
    has been seen recently), 503 when it does not. Needs no token; without it (when the
    server sets one) the answer is the status alone: worker names, hosts and Redis's
    errors are for holders of the token."""
    detailed = token_matches(settings.api_token,
                             credentials.credentials if credentials is not None else None)
    window_s = liveness_window_s(settings.heartbeat_s)
    try:
        workers, recorded = await asyncio.wait_for(_workers(store, window_s), PING_TIMEOUT_S)
    except (*REDIS_DOWN, TimeoutError) as exc:
        if not detailed:
            return JSONResponse({"status": "unavailable"}, status_code=503)
        down = Health(status="unavailable",
                      redis=RedisHealth(ok=False, error=str(exc) or type(exc).__name__),
                      workers=WorkerHealth(recent=0, known=0, window_s=window_s, names=[]),
                      version=VersionHealth(release=__version__, data_format=DATA_FORMAT))
        return JSONResponse(down.model_dump(), status_code=503)
    health = worker_health(workers, window_s)
    if not detailed:
        return JSONResponse({"status": "ok" if health.recent else "degraded"})
    return Health(status="ok" if health.recent else "degraded", redis=RedisHealth(ok=True),
                  workers=health, version=VersionHealth(
                      release=__version__, data_format=DATA_FORMAT, recorded_format=recorded))


async def _workers(store: Store, window_s: float) -> tuple[list[WorkerInfo], int | None]:
    await store.ping()
    return await list_workers(store, alive_within_s=window_s), await store.data_format()


@router.get("/metrics", response_class=Response, dependencies=[Depends(require_token)],
            responses={200: {"content": {CONTENT_TYPE: {}},
                             "description": "Prometheus text format"},
                       **error_responses(401, 403, 429, 503)})
async def metrics(store: StoreDep, settings: SettingsDep) -> Response:
    """Prometheus metrics: this process's, and the fleet's read from Redis."""
    body = await render_api_metrics(store, heartbeat_s=settings.heartbeat_s)
    return Response(body, media_type=CONTENT_TYPE)
