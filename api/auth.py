"""Bearer-token auth: when DURABLE_API_TOKEN is set, a request needs
`Authorization: Bearer <token>`; the comparison takes constant time."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from strands_durable.api.errors import ApiError

# auto_error=False: we answer 401 in our own envelope (FastAPI would send 403).
bearer = HTTPBearer(auto_error=False, description="DURABLE_API_TOKEN, when the server sets one")


def token_matches(expected: str | None, presented: str | None) -> bool:
    """Pure: no token configured lets everyone in; otherwise the two must be equal."""
    if expected is None:
        return True
    if presented is None:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


async def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)],
) -> None:
    expected: str | None = request.app.state.settings.api_token
    presented = credentials.credentials if credentials is not None else None
    if not token_matches(expected, presented):
        raise ApiError(401, "unauthorized",
                       "missing or wrong bearer token (Authorization: Bearer <token>)",
                       headers={"WWW-Authenticate": "Bearer"})
