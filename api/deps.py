"""What routes get from the app: its store (one Redis client per app), settings and
render stage."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request

from strands_durable.api.render_stage import RenderStage
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> DurableSettings:
    settings: DurableSettings = request.app.state.settings
    return settings


def get_render_stage(request: Request) -> RenderStage:
    stage: RenderStage = request.app.state.render_stage
    return stage


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[DurableSettings, Depends(get_settings)]
RenderStageDep = Annotated[RenderStage, Depends(get_render_stage)]


async def ensure_prepared(app: FastAPI) -> None:
    """Streams and groups exist and the shard count matches, checked once per app (the
    app starts even while Redis is down; the first submit after it is back does this)."""
    if not app.state.prepared:
        await app.state.store.prepare()
        app.state.prepared = True
