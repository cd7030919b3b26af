"""The models of /v1/tokens and /v1/audit."""

from __future__ import annotations

from pydantic import BaseModel, Field

from strands_durable.access import AuditEntry, Role, TokenRecord


class TokenCreateRequest(BaseModel):
    role: Role
    namespaces: list[str] = Field(min_length=1, max_length=100,
                                  description="Namespaces the token may use; ['*'] for every one",
                                  examples=[["team-a"]])
    name: str = Field(default="", max_length=100, description="What the token is for")
    expires_in_s: float | None = Field(default=None, gt=0, le=10 * 365 * 86_400,
                                       description="Seconds until it expires; none: never")


class TokenOut(BaseModel):
    """A token as listed: never its text, never its digest."""

    id: str
    name: str
    role: Role
    namespaces: list[str]
    state: str = Field(description="active, expired or revoked")
    created_ms: int
    created_by: str
    expires_ms: int | None
    revoked_ms: int | None

    @classmethod
    def of(cls, record: TokenRecord, now_ms: int) -> TokenOut:
        return cls(id=record.id, name=record.name, role=record.role,
                   namespaces=record.namespaces, state=record.state(now_ms),
                   created_ms=record.created_ms, created_by=record.created_by,
                   expires_ms=record.expires_ms, revoked_ms=record.revoked_ms)


class TokenCreated(BaseModel):
    token: str = Field(description="The token: shown this once, kept nowhere")
    info: TokenOut


class TokenList(BaseModel):
    items: list[TokenOut]


class AuditPage(BaseModel):
    items: list[AuditEntry]
    next_before: str | None = Field(description="`before` of the next (older) page")
