"""`durable tokens create|list|revoke`, `durable audit` and `--namespace` as an operator
runs them: real `durable` processes on a real redis-server; the token is printed once and
never again, bad input exits 2 naming what is wrong, every change is audited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import EXAMPLES
from helpers.fleet import Fleet

from strands_durable.store.store import Store

pytestmark = pytest.mark.integration


def error_of(result: object, rc: int) -> str:
    assert result.returncode == rc, (result.stdout, result.stderr)  # type: ignore[attr-defined]
    text = result.stdout + result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in text
    return str(text)


async def test_tokens_and_the_audit_trail_from_the_command_line(
        redis_server: object, prefix: str, tmp_path: Path, store: Store) -> None:
    fleet = Fleet.create(redis_server.url, prefix, tmp_path)  # type: ignore[attr-defined]
    created = fleet.cli("tokens", "create", "--role", "operate", "--namespace", "team-a",
                        "--name", "ci bot", "--expires-in", "30d")
    token = created.stdout.strip()
    assert token.startswith("sdt_") and "\n" not in token
    assert token not in created.stderr and "shown" in created.stderr
    listed = fleet.cli_json("tokens", "list")
    assert len(listed) == 1 and listed[0]["role"] == "operate"
    assert listed[0]["namespaces"] == ["team-a"] and listed[0]["state"] == "active"
    token_id = listed[0]["id"]
    assert token not in json.dumps(listed) and token[17:] not in fleet.cli("tokens", "list").stdout

    sid = fleet.cli("submit", str(EXAMPLES / "chain-research.yaml"), "--namespace", "team-a",
                    "--var", "topic=x").stdout.strip()
    assert (await store.get_session(sid)).namespace == "team-a"
    in_a = fleet.cli_json("sessions", "list", "--namespace", "team-a")
    assert [s["session_id"] for s in in_a] == [sid] and in_a[0]["namespace"] == "team-a"
    assert fleet.cli_json("sessions", "list", "--namespace", "team-b") == []

    revoked = fleet.cli_json("tokens", "revoke", token_id)
    assert revoked["state"] == "revoked"
    fleet.cli("pause", sid)
    trail = fleet.cli_json("audit", "--namespace", "team-a")
    assert [(e["action"], e["target"]) for e in trail] == [
        ("pause", sid), ("token_revoke", token_id), ("submit", sid),
        ("token_create", token_id)]
    assert all(e["actor"].startswith("cli:") and e["source"] == "cli" for e in trail)

    # Hostile or mistaken input: exit 2 naming it, nothing written.
    assert "--role" in error_of(fleet.cli("tokens", "create", "--role", "god", "--namespace",
                                          "a", check=False), 2)
    assert "Bad NS" in error_of(fleet.cli("tokens", "create", "--role", "read", "--namespace",
                                          "Bad NS", check=False), 2)
    assert "--expires-in" in error_of(fleet.cli("tokens", "create", "--role", "read",
                                                "--namespace", "a", "--expires-in", "soon",
                                                check=False), 2)
    assert "token id" in error_of(fleet.cli("tokens", "revoke", "../x", check=False), 2)
    assert "no token" in error_of(fleet.cli("tokens", "revoke", "0123456789ab",
                                            check=False), 1)
    assert "--namespace" in error_of(fleet.cli("audit", "--namespace", "-x-", check=False), 2)
    assert len(await store.tokens()) == 1


async def test_the_redis_backed_client_audits_its_control_actions(store: Store,
                                                                  settings: object) -> None:
    from helpers.api import chain_spec

    from strands_durable.client import AsyncClient

    async with AsyncClient.connect_redis(settings.redis_url,  # type: ignore[attr-defined]
                                         key_prefix=store.keys.prefix) as client:
        sid = (await client.submit(chain_spec(2))).session_id
        await client.pause(sid)
        await client.cancel(sid)
        await client.delete(sid)
        trail = (await client.audit(limit=10)).items
    assert [(e.action, e.target) for e in trail] == [("delete", sid), ("cancel", sid),
                                                     ("pause", sid), ("submit", sid)]
    assert all(e.actor.startswith("python:") and e.source == "python" for e in trail)
