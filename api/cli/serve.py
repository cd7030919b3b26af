"""The long-running roles: `durable api` and `durable scheduler`."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from strands_durable.api.cli.common import (
    EXIT_USAGE,
    JsonOpt,
    app,
    env_settings,
    fail,
    run_async,
)
from strands_durable.settings import DurableSettings

if TYPE_CHECKING:
    import httpx


@app.command("api")
def api_serve(
    host: Annotated[str | None, typer.Option(help="Default DURABLE_API_HOST.")] = None,
    port: Annotated[int | None, typer.Option(help="Default DURABLE_API_PORT.",
                                             min=1, max=65535)] = None,
    as_json: JsonOpt = False,
) -> None:
    """Serve the HTTP API with uvicorn (OpenAPI at /docs); --json: an error that stops it
    from starting (a bad setting) as JSON."""
    import uvicorn

    from strands_durable.api.app import create_app

    settings = env_settings()
    run_async(_check_shards(settings))
    # Live event streams would hold a graceful shutdown open: give them 5 s. asyncio's
    # loop, as the worker's: uvicorn would pick uvloop wherever some other package
    # installed it, so what runs would depend on what else is in the image.
    uvicorn.run(create_app(settings), host=host or settings.api_host,
                port=port or settings.api_port, timeout_graceful_shutdown=5, loop="asyncio")


# -- scheduler role ------------------------------------------------------------------
@app.command("scheduler")
def scheduler_serve(
    metrics_port: Annotated[int | None, typer.Option(
        help="Serve /metrics here (0: off). Default DURABLE_METRICS_PORT.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the scheduler role: promote due timers, enforce max_duration_s, flag stuck
    sessions. Any number of replicas; one leads. Stops on SIGTERM."""
    from strands_durable.scheduler.service import run_scheduler

    settings = env_settings()
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise fail(f"--metrics-port {metrics_port}: not a port (0-65535)", EXIT_USAGE)
    from strands_durable.scheduler.webhook_delivery import check_settings

    try:
        check_settings(settings)
    except ValueError as exc:  # a setting that cannot work: a usage error, before Redis
        raise fail(str(exc), EXIT_USAGE) from None
    run_async(run_scheduler(settings, metrics_port, webhook_transport(settings)))


def webhook_transport(settings: DurableSettings) -> Callable[[], httpx.AsyncBaseTransport]:
    """Webhooks leave through the HTTP tools' network guard: public addresses, and the
    private ones DURABLE_WEBHOOK_ALLOW lists, checked where each socket is opened."""
    from strands_durable.webhooks import ALLOW_SETTING
    from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

    reach = Reach(settings.webhook_allow_list, ALLOW_SETTING)
    return lambda: guarded_async_transport(reach, strip_credentials=True)


async def _check_shards(settings: DurableSettings) -> None:
    """Refuse to serve a keyspace set up with another DURABLE_SHARDS (exit 2, one line);
    with Redis down the API starts anyway and checks on the first request."""
    from strands_durable.store.connect import open_store
    from strands_durable.store.outage import REDIS_DOWN

    store = open_store(settings)
    try:
        await store.prepare()
    except REDIS_DOWN:
        pass
    finally:
        await store.close()
