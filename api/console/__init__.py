"""The web console at /ui and the offline API docs (/docs, /redoc).

Server-rendered Jinja2 templates (already a dependency), plain HTML forms and a small
script of our own for the live parts (server-sent events, counts): nothing to build,
no Node, every file in the package. See pages.py, session.py and docs.py."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from strands_durable.api.console import audit_page, docs, pages, schedules_page, session
from strands_durable.api.console.common import STATIC


def install(app: FastAPI) -> None:
    """Mount the console, its files and the docs on `app` (before the API's routers)."""
    app.mount("/ui/static", StaticFiles(directory=STATIC), name="console-static")
    app.mount(docs.ASSETS_URL, docs.assets(), name="docs-assets")
    # The routers' route objects as they are, shared by every app (api/wiring.py says why).
    for router in (docs.router, pages.router, session.router, schedules_page.router,
                   audit_page.router):
        app.router.routes.extend(router.routes)
