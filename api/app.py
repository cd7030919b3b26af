"""The HTTP API: `create_app()` builds the FastAPI app that `durable api` serves.

Routes live in small modules (sessions, control, operations, system); this module
wires them with the store, auth, size limits and the error envelope.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from strands_durable.api import (
    errors,
    routes_access,
    routes_control,
    routes_fleet,
    routes_ops,
    routes_quotas,
    routes_schedules,
    routes_sessions,
    routes_system,
    routes_transfer,
    routes_webhooks,
    submission,
)
from strands_durable.api.auth import require_token
from strands_durable.api.console import install as install_console
from strands_durable.api.limits import BodyLimit
from strands_durable.api.render_stage import RenderStage
from strands_durable.api.schemas import error_responses, operation_id
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import REDIS_DOWN
from strands_durable.version import __version__

log = logging.getLogger("durable.api")

DESCRIPTION = """Submit strands-cli workflows to a fleet of `arq worker` processes and
operate them. Errors are `{"error": {"code", "message", "details"}}`. When the server
has `DURABLE_API_TOKEN`, every route but /healthz needs `Authorization: Bearer <token>`."""


def create_app(settings: DurableSettings | None = None) -> FastAPI:
    settings = settings or DurableSettings()
    store = open_store(settings)  # connects lazily, on the serving loop

    render_stage = RenderStage(settings.api_render_workers, settings.api_render_queue,
                               preload=(submission.__name__,))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        render_stage.start()  # its processes warm up while Redis is reached
        try:
            await store.prepare()
            app.state.prepared = True
        except REDIS_DOWN as exc:
            log.warning("Redis unreachable at startup (%s); /healthz says 503 until it is "
                        "back", exc)
        yield
        await store.close()

    app = FastAPI(title="strands-durable", version=__version__, description=DESCRIPTION,
                  lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None,
                  generate_unique_id_function=operation_id)
    app.state.settings = settings
    app.state.store = store
    app.state.render_stage = render_stage
    app.state.prepared = False
    errors.install(app)
    # An import's body is a whole session: its own, larger, limit.
    app.add_middleware(BodyLimit, larger={routes_transfer.IMPORT_PATH: settings.max_import_bytes})
    authed = [Depends(require_token)]
    # BodyLimit answers 413 before any route runs, so every route may answer it.
    responses = error_responses(401, 403, 404, 413, 422, 429, 503)
    app.include_router(routes_transfer.router, dependencies=authed,
                       responses={**responses, **error_responses(409)})
    app.include_router(routes_sessions.router, dependencies=authed, responses=responses)
    app.include_router(routes_control.router, dependencies=authed, responses=responses)
    app.include_router(routes_ops.router, dependencies=authed, responses=responses)
    app.include_router(routes_fleet.router, dependencies=authed, responses=responses)
    app.include_router(routes_schedules.router, dependencies=authed, responses=responses)
    app.include_router(routes_access.router, dependencies=authed, responses=responses)
    app.include_router(routes_webhooks.router, dependencies=authed, responses=responses)
    app.include_router(routes_quotas.router, dependencies=authed, responses=responses)
    app.include_router(routes_system.router)
    install_console(app)  # /ui, and /docs, /redoc, /openapi.json served offline
    return app
