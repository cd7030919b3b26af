"""/docs (Swagger UI), /redoc and /openapi.json, offline: their JavaScript and CSS are
served from the installed `fastapi-offline` package, never from a CDN.

A browser cannot send `Authorization: Bearer` when it loads a page or when Swagger
fetches the schema, so these three also accept the console's sign-in cookie; a browser
without either is sent to the sign-in form, any other client gets the API's 401. The
API routes themselves take the bearer token only (Swagger's Authorize button sets it)."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from strands_durable.api.auth import TooManyFailures, principal_of
from strands_durable.api.console import auth
from strands_durable.api.errors import ApiError

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_URL = "/docs-assets"

router = APIRouter(include_in_schema=False)
# Nothing from another host, even where the bundles would fetch something (ReDoc's logo):
# the pages work air-gapped, and a browser never tries.
DOCS_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
            "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; "
            "connect-src 'self'; frame-ancestors 'none'")


def assets() -> StaticFiles:
    return StaticFiles(directory=ASSETS)


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value if scheme.lower() == "bearer" and value else None


async def allowed(request: Request) -> bool:
    """Any token the API takes, or a valid console cookie (or no token configured)."""
    bearer = _bearer(request)
    if bearer is not None:
        try:
            return await principal_of(request, bearer) is not None
        except TooManyFailures:
            return False
    try:
        await auth.current_user(request)
    except auth.SignInRequired:
        return await auth.is_open(request)
    return True


def refuse(request: Request) -> Response:
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse(auth.sign_in_url(request.url.path), status_code=303)
    raise ApiError(401, "unauthorized",
                   "missing, wrong, expired or revoked bearer token "
                   "(Authorization: Bearer <token>)",
                   headers={"WWW-Authenticate": "Bearer"})


@router.get("/openapi.json")
async def openapi(request: Request) -> Response:
    if not await allowed(request):
        return refuse(request)
    return JSONResponse(request.app.openapi())


@router.get("/docs")
async def docs(request: Request) -> Response:
    if not await allowed(request):
        return refuse(request)
    page = get_swagger_ui_html(
        openapi_url="/openapi.json", title=f"{request.app.title} · API",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
        # Authorize once (the bearer token); it is kept across reloads in this browser.
        swagger_ui_parameters={"persistAuthorization": True,
                               "displayOperationId": True})
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


@router.get("/redoc")
async def redoc(request: Request) -> Response:
    if not await allowed(request):
        return refuse(request)
    page = get_redoc_html(openapi_url="/openapi.json", title=f"{request.app.title} · API",
                          redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
                          redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
                          with_google_fonts=False)
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page
