"""Entry ids a client resumes or pages from (`after`, `Last-Event-ID`, the audit trail's
`before`), through the ASGI app on a real redis-server. An id of the right form whose part
is above 2^64 - 1, which Redis refuses, is a 4xx naming the field, on the API and in the
console, before any stream starts; the largest id (after it) and 0-0 (before it), which
Redis refuses as exclusive bounds, read as an empty page. Each was a 500, or a stream cut
off after its headers."""

from __future__ import annotations

from attack import test_tenancy
from attack.test_tenancy import Tenants, console_as

from strands_durable.store.codec import MAX_STREAM_ID_PART

tenants = test_tenancy.tenants  # the tenancy suite's fixture: six tokens, two namespaces

LARGEST = f"{MAX_STREAM_ID_PART}-{MAX_STREAM_ID_PART}"
TOO_BIG = ("99999999999999999999", f"{MAX_STREAM_ID_PART + 1}", f"1-{MAX_STREAM_ID_PART + 1}")


async def test_an_id_past_redis_range_is_a_422_naming_the_field(tenants: Tenants) -> None:
    sid = tenants.sessions["team-a"]
    async with tenants.client("a_operate", "team-a") as http:
        for bad in TOO_BIG:
            for path, params, headers, field in (
                    (f"/v1/sessions/{sid}/events", {"after": bad}, {}, "after"),
                    (f"/v1/sessions/{sid}/events", {"follow": "1"}, {"Last-Event-ID": bad},
                     "Last-Event-ID"),
                    (f"/v1/sessions/{sid}/stream", {"after": bad}, {}, "after"),
                    (f"/v1/sessions/{sid}/stream", {}, {"Last-Event-ID": bad},
                     "Last-Event-ID"),
                    ("/v1/audit", {"before": bad}, {}, "before")):
                r = await http.get(path, params=params, headers=headers)
                assert r.status_code == 422, (path, bad, r.status_code, r.text[:200])
                assert field in r.text and "18446744073709551615" in r.text, r.text[:300]


async def test_the_bounds_redis_refuses_read_as_an_empty_page(tenants: Tenants) -> None:
    sid = tenants.sessions["team-a"]
    async with tenants.client("a_operate", "team-a") as http:
        r = await http.get(f"/v1/sessions/{sid}/events", params={"after": LARGEST})
        assert r.status_code == 200, r.text
        assert r.json()["items"] == [] and r.json()["last_id"] == LARGEST
        everything = (await http.get(f"/v1/sessions/{sid}/events")).json()["items"]
        assert everything  # the session has events: the empty page is the bound's
        await http.post(f"/v1/sessions/{sid}/pause")  # one entry in team-a's trail
        r = await http.get("/v1/audit", params={"before": "0-0"})
        assert r.status_code == 200, r.text
        assert r.json()["items"] == []
        assert (await http.get("/v1/audit")).json()["items"]


async def test_the_console_refuses_them_too(tenants: Tenants) -> None:
    sid = tenants.sessions["team-a"]
    async with console_as(tenants.app, tenants.tokens["a_operate"]) as console:
        for bad in TOO_BIG:
            for path in (f"/ui/sessions/{sid}/feed", f"/ui/sessions/{sid}/stream"):
                r = await console.get(path, headers={"Last-Event-ID": bad})
                assert r.status_code == 422, (path, bad, r.status_code, r.text[:200])
                assert "Last-Event-ID" in r.text or "after" in r.text
            page = await console.get("/ui/audit", params={"before": bad})
            assert page.status_code == 400 and "before" in page.text, page.text[:200]
        page = await console.get("/ui/audit", params={"before": "0-0"})
        assert page.status_code == 200, page.text[:300]
