"""The console's audit page (/ui/audit): the current namespace's audit trail, newest first,
fifty entries a page with a link to older ones: who did what, on what, when and from
where, as `durable audit` and GET /v1/audit show it (an operator's role, as the API's)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from strands_durable.api.console.auth import ConsoleUser
from strands_durable.api.console.common import (
    AUDIT_ROLE,
    ConsoleError,
    guarded,
    page,
    require,
)
from strands_durable.api.deps import get_store
from strands_durable.errors import InvalidInput
from strands_durable.models import utc_text
from strands_durable.sessions.access import audit_page

router = APIRouter(prefix="/ui", include_in_schema=False)
PAGE = 50


@router.get("/audit")
async def audit(request: Request, before: str | None = None) -> Response:
    async def work(user: ConsoleUser) -> Response:
        require(user, AUDIT_ROLE)
        try:
            entries = await audit_page(get_store(request), user.namespace, PAGE, before)
        except InvalidInput as exc:
            raise ConsoleError(400, "invalid_input", str(exc)) from None
        older = entries[-1].id if len(entries) == PAGE else None
        return page(request, "audit.html", entries=entries, older=older, utc=utc_text,
                    namespace=user.namespace, paged=before is not None)
    return await guarded(request, work)
