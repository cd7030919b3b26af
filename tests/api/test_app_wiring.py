"""How create_app wires the API's routers (api/wiring.py): every app of a process is
handed the same complete route objects, each carrying its token check and error
responses from where it is declared, so a new app builds no route again (an included
router's routes are built again for each app on its first request: ~75 ms of CPU)."""

from __future__ import annotations

from fastapi.routing import APIRoute

from strands_durable.api.app import ROUTERS, create_app
from strands_durable.api.auth import require_token
from strands_durable.api.routes_schedules import default_namespace_only
from strands_durable.api.routes_system import router as system_router
from strands_durable.settings import DurableSettings


def api_routes(app: object) -> list[APIRoute]:
    return [r for r in app.routes if isinstance(r, APIRoute)]  # type: ignore[attr-defined]


def test_two_apps_share_the_same_route_objects() -> None:
    first = create_app(DurableSettings(key_prefix="wiring-a"))
    second = create_app(DurableSettings(key_prefix="wiring-b", api_token="t" * 32))
    assert len(api_routes(first)) == len(api_routes(second)) >= 60
    assert all(a is b for a, b in zip(api_routes(first), api_routes(second), strict=True))
    assert {id(r) for router in ROUTERS for r in router.routes} <= {
        id(r) for r in api_routes(first)}


def test_every_api_route_checks_the_token_first() -> None:
    open_paths = {r.path for r in system_router.routes}  # type: ignore[attr-defined]
    checked = [r for router in ROUTERS for r in router.routes
               if isinstance(r, APIRoute) and r.path not in open_paths]
    assert len(checked) >= 37
    for route in checked:
        assert route.dependencies[0].dependency is require_token, route.path
        assert {401, 403, 404, 413, 422, 429, 503} <= set(route.responses), route.path
    schedules = [r for r in checked if r.path.startswith("/v1/schedules")]
    assert schedules and all(r.dependencies[1].dependency is default_namespace_only
                             for r in schedules)

