"""What routes get from the app: its store (one Redis client per app), settings and
render stage."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, FastAPI, Request

from strands_durable.api.render_stage import RenderStage
from strands_durable.sessions.live import LiveFollowers
from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store

# A live follower looks at the session's status this often while nothing is written:
# a session ends without a live entry, and its `end` frame should not wait long.
LIVE_BLOCK_MS = 1_000


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> DurableSettings:
    settings: DurableSettings = request.app.state.settings
    return settings


def get_render_stage(request: Request) -> RenderStage:
    stage: RenderStage = request.app.state.render_stage
    return stage


def get_live_followers(request: Request) -> LiveFollowers:
    """The app's followers of live streams (one blocking read per followed session),
    made on first use with the blocking read the Redis socket timeout allows."""
    followers: LiveFollowers | None = getattr(request.app.state, "live_followers", None)
    if followers is None:
        settings = get_settings(request)
        socket_ms = int(settings.redis_socket_timeout_s * 1000)
        block_ms = max(100, min(LIVE_BLOCK_MS, socket_ms - 1000))
        grace_s = max(0.5, 10 * settings.live_flush_ms / 1000)  # ten of the workers' flushes
        followers = request.app.state.live_followers = LiveFollowers(
            get_store(request), block_ms, grace_s)
    return followers


StoreDep = Annotated[Store, Depends(get_store)]
LiveFollowersDep = Annotated[LiveFollowers, Depends(get_live_followers)]
SettingsDep = Annotated[DurableSettings, Depends(get_settings)]
RenderStageDep = Annotated[RenderStage, Depends(get_render_stage)]


async def ensure_prepared(app: FastAPI) -> None:
    """Streams and groups exist and the shard count matches, checked once per app (the
    app starts even while Redis is down; the first submit after it is back does this)."""
    if not app.state.prepared:
        await app.state.store.prepare()
        app.state.prepared = True
