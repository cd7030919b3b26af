"""The API's routers, complete where they are declared: each route carries the token check
and the error responses it may give, and its operation id, from the moment it is made.

Why not `app.include_router(router, dependencies=..., responses=...)`: FastAPI builds an
included route's state (its dependencies, fields and validators) again for each app, on
the app's first request, about 75 ms of CPU an app for this API. Complete routes are made
once, at import, and `create_app` hands every app of the process the same route objects
(they hold no app's state: settings and store are read from `request.app.state`).
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, Depends
from fastapi.params import Depends as Dependency

from strands_durable.api.auth import require_token
from strands_durable.api.schemas import error_responses, operation_id

# BodyLimit answers 413 and 415 before any route runs, so every route may answer them.
ERRORS = (401, 403, 404, 413, 415, 422, 429, 503)


def api_router(prefix: str = "", *, tags: list[str], errors: Sequence[int] = (),
               dependencies: Sequence[Dependency] = ()) -> APIRouter:
    """A router of routes that need a token (checked first, before `dependencies`) and
    may answer ERRORS and `errors`."""
    return APIRouter(prefix=prefix, tags=list(tags),
                     dependencies=[Depends(require_token), *dependencies],
                     responses=error_responses(*ERRORS, *errors),
                     generate_unique_id_function=operation_id)


def open_router(prefix: str = "", *, tags: list[str]) -> APIRouter:
    """A router of routes that check (or need) no token themselves (/healthz...)."""
    return APIRouter(prefix=prefix, tags=list(tags), generate_unique_id_function=operation_id)
