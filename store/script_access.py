"""The contracts of the tenancy scripts: a namespace's quota place taken only while the
namespace holds fewer than its limit (quota_place.lua), and a token's record rewritten
only while it exists (token_save.lua). Single-key scripts: atomic on a cluster too,
where MULTI/WATCH are not."""

from __future__ import annotations

from dataclasses import dataclass

from strands_durable.store.script_library import ScriptLibrary


# -- quota_place.lua ------------------------------------------------------------------
@dataclass(slots=True)
class QuotaPlaceKeys:
    places: str  # the namespace's active set: member -> when it took its place


@dataclass(slots=True)
class QuotaPlaceArgs:
    member: str
    limit: int
    now_ms: int


# -- token_save.lua -------------------------------------------------------------------
@dataclass(slots=True)
class TokenSaveKeys:
    tokens: str


@dataclass(slots=True)
class TokenSaveArgs:
    token_id: str
    record: str


class AccessScripts(ScriptLibrary):
    async def quota_place(self, *, keys: QuotaPlaceKeys, args: QuotaPlaceArgs) -> bool:
        """True when `member` took a place (or held one already)."""
        return bool(await self._call("quota_place", keys, args))

    async def token_save(self, *, keys: TokenSaveKeys, args: TokenSaveArgs) -> bool:
        """True when the token existed and its record was rewritten."""
        return bool(await self._call("token_save", keys, args))
