"""The console's audit page (/ui/audit) over real HTTP through the ASGI app, on a real
redis-server: a namespace's trail and no other's, an operator's role as the API's, every
field escaped, hostile paging refused with a 4xx naming `before`, and paging through
older entries."""

from __future__ import annotations

import re

from attack import test_tenancy
from attack.test_tenancy import Tenants, console_as, csrf_of

from strands_durable.sessions.access import record_action
from strands_durable.store.store import Store

tenants = test_tenancy.tenants  # the tenancy suite's fixture: six tokens, two namespaces


async def test_an_operator_sees_its_namespaces_actions_and_no_other(tenants: Tenants,
                                                                    store: Store) -> None:
    sid_a, sid_b = tenants.sessions["team-a"], tenants.sessions["team-b"]
    async with console_as(tenants.app, tenants.tokens["a_operate"]) as operator:
        csrf = csrf_of((await operator.get("/ui")).text)
        r = await operator.post("/ui/namespace", data={"csrf": csrf, "namespace": "team-a"})
        assert r.status_code == 303
        assert (await operator.post(f"/ui/sessions/{sid_a}/pause",
                                    data={"csrf": csrf})).status_code == 303
        page = await operator.get("/ui/audit")
        assert page.status_code == 200
        assert 'href="/ui/audit"' in page.text  # in the navigation
        row = re.search(r"<tr><td class=\"mono\">[^<]+</td>(.*?)</tr>", page.text, re.S)
        assert row, page.text
        token_id = tenants.tokens["a_operate"].split("_")[1]
        assert token_id in row.group(1) and "pause" in row.group(1) and sid_a in row.group(1)
        assert tenants.tokens["a_operate"] not in page.text  # the token itself, never
    async with console_as(tenants.app, tenants.tokens["b_operate"]) as other:
        csrf = csrf_of((await other.get("/ui")).text)
        await other.post("/ui/namespace", data={"csrf": csrf, "namespace": "team-b"})
        await other.post(f"/ui/sessions/{sid_b}/cancel", data={"csrf": csrf})
        page = await other.get("/ui/audit")
        assert sid_b in page.text and sid_a not in page.text
        assert token_id not in page.text


async def test_a_role_below_the_apis_for_the_trail_is_refused(tenants: Tenants) -> None:
    async with console_as(tenants.app, tenants.tokens["a_read"]) as reader:
        home = await reader.get("/ui")
        assert 'href="/ui/audit"' not in home.text  # no link to what it may not see
        page = await reader.get("/ui/audit")
        assert page.status_code == 403 and "operate" in page.text


async def test_hostile_paging_is_a_4xx_naming_before(tenants: Tenants) -> None:
    async with console_as(tenants.app, tenants.tokens["a_operate"]) as operator:
        for bad in ("abc", "9" * 2000, "1-2-3", "-1", "<script>"):
            page = await operator.get("/ui/audit", params={"before": bad})
            assert page.status_code == 400, (bad[:20], page.status_code)
            assert "before" in page.text and "<script>" not in page.text


async def test_every_field_is_escaped(tenants: Tenants, store: Store) -> None:
    await record_action(store, "pause", "<b>target</b>", actor="<i>who</i>",
                        source="<u>from</u>", namespace="default",
                        detail="<script>alert(1)</script>")
    async with console_as(tenants.app, tenants.tokens["all_operate"]) as operator:
        page = await operator.get("/ui/audit")
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    for raw in ("<b>target</b>", "<i>who</i>", "<u>from</u>"):
        assert raw not in page.text


async def test_older_entries_a_page_at_a_time(tenants: Tenants, store: Store) -> None:
    for n in range(55):
        await record_action(store, "resume", f"target-{n:02d}", actor="older-test",
                            source="test", namespace="default")
    async with console_as(tenants.app, tenants.tokens["all_operate"]) as operator:
        first = await operator.get("/ui/audit")
        assert first.text.count("older-test") == 50
        assert "target-54" in first.text and "target-04" not in first.text
        older = re.search(r'href="(/ui/audit\?before=[^"]+)" rel="next"', first.text)
        assert older, "no link to older entries"
        second = await operator.get(older.group(1).replace("&amp;", "&"))
    assert second.status_code == 200
    shown = re.findall(r"target-(\d\d)", second.text)
    assert shown[:5] == ["04", "03", "02", "01", "00"]
