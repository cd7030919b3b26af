"""The HTTP API: `create_app()` builds the FastAPI app that `durable api` serves.

Routes live in small modules (sessions, control, operations, system...), each router
complete where it is declared: token check, error responses, operation ids
(api/wiring.py). This module gives an app those routes, the store, the size limits
and the error envelope.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

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
from strands_durable.api.console import install as install_console
from strands_durable.api.limits import BodyLimit
from strands_durable.api.render_stage import RenderStage
from strands_durable.api.schemas import operation_id
from strands_durable.settings import DurableSettings
from strands_durable.store.connect import open_store
from strands_durable.store.outage import REDIS_DOWN
from strands_durable.version import __version__

log = logging.getLogger("durable.api")

DESCRIPTION = """Submit strands-cli workflows to a fleet of `arq worker` processes and
operate them. Errors are `{"error": {"code", "message", "details"}}`. When the server
has `DURABLE_API_TOKEN`, every route but /healthz needs `Authorization: Bearer <token>`."""


# In the order a request is matched against them.
ROUTERS = (routes_transfer.router, routes_sessions.router, routes_control.router,
           routes_ops.router, routes_fleet.router, routes_schedules.router,
           routes_access.router, routes_webhooks.router, routes_quotas.router,
           routes_system.router)


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
    app.add_middleware(BodyLimit, larger={routes_transfer.IMPORT_PATH: settings.max_import_bytes},
                       timeout_s=settings.api_body_timeout_s)
    # The routers' own route objects, made once at import and shared by every app of the
    # process (api/wiring.py): not included, which would build each route again per app.
    for router in ROUTERS:
        app.router.routes.extend(router.routes)
    install_console(app)  # /ui, and /docs, /redoc, /openapi.json served offline
    return app
