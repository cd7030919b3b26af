"""Request bodies at the HTTP edge, over real HTTP (uvicorn on a free port) on a real
redis-server: a body that never arrives whole is answered 408 once
DURABLE_API_BODY_TIMEOUT_S has passed and its connection closed (a client that declared
100 bytes and sent 2 held its connection for good), and a body sent to /v1 that does not
say it is JSON is a 415 naming the type it said, before any route runs; nothing stored."""

from __future__ import annotations

import asyncio
import json
from urllib.parse import urlsplit

from helpers.api import chain_spec, make_app, served_client, uvicorn_server

from strands_durable.settings import DurableSettings
from strands_durable.store.store import Store


async def test_a_body_that_never_arrives_whole_is_a_408(settings: DurableSettings) -> None:
    app = make_app(settings, api_body_timeout_s=0.5)
    async with uvicorn_server(app) as url:
        where = urlsplit(url)
        reader, writer = await asyncio.open_connection(where.hostname, where.port)
        writer.write(b"POST /v1/sessions HTTP/1.1\r\nHost: api\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{}")
        await writer.drain()
        # The server answers by itself: the read waits for its reply, then its close.
        reply = await asyncio.wait_for(reader.read(), timeout=30)
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), reply[:200]
    error = json.loads(body)["error"]
    assert error["code"] == "request_timeout" and error["details"] == {"received_bytes": 2}


async def test_a_body_not_sent_as_json_is_a_415_naming_its_type(
        settings: DurableSettings, store: Store) -> None:
    body = json.dumps({"spec": chain_spec(1)})
    async with served_client(make_app(settings)) as http:
        for content_type in ("text/plain", "application/x-www-form-urlencoded",
                             "application/xml", ""):
            r = await http.post("/v1/sessions", content=body,
                                headers={"content-type": content_type})
            assert r.status_code == 415, (content_type, r.status_code, r.text[:200])
            error = r.json()["error"]
            assert error["code"] == "unsupported_media_type"
            assert "application/json" in error["message"]
            assert error["details"] == {"content_type": content_type}
        assert await store.list_sessions() == []
        for content_type in ("application/json", "application/json; charset=utf-8",
                             "application/vnd.api+json"):
            r = await http.post("/v1/sessions", content=body,
                                headers={"content-type": content_type})
            assert r.status_code == 201, (content_type, r.text[:200])
        # A POST without a body needs no type (pause, cancel...).
        sid = r.json()["session_id"]
        assert (await http.post(f"/v1/sessions/{sid}/pause")).status_code == 200
