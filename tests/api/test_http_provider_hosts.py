"""Issue 33's reproduction, end to end: a spec's `runtime.host` cannot take the fleet's
provider keys. A listener on a free loopback port records every request; every provider
is refused at submit (the HTTP API, and `durable submit`), a worker given such a spec
(written to Redis with the host listed, then run by a worker whose operator lists
nothing) refuses to call, and a keyless server's host is checked where the socket opens.
In every case the listener receives nothing."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest
from helpers import REPO, send_json, serve_http, wait_for
from helpers.fleet import durable_bin

from strands_durable.models import SessionStatus
from strands_durable.provider_policy import current_provider_policy, host_setting
from strands_durable.sessions.start import start_session
from strands_durable.settings import DurableSettings
from strands_durable.spec.loader import load_spec_text
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer

PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "ollama", "llamacpp", "litellm")
KEYS = {"OPENAI_API_KEY": "sk-fleet-secret", "ANTHROPIC_API_KEY": "sk-ant-fleet-secret",
        "GOOGLE_API_KEY": "g-fleet-secret", "AWS_ACCESS_KEY_ID": "AKIAFLEETSECRET",
        "AWS_SECRET_ACCESS_KEY": "fleet-secret", "AWS_DEFAULT_REGION": "us-east-1"}

SPEC = """
version: 0
name: leak-host
runtime: {{provider: {provider}, model_id: m, host: "{host}", region: us-east-1,
          failure_policy: {{retries: 0}}}}
agents: {{a: {{prompt: hi}}}}
pattern: {{type: chain, config: {{steps: [{{agent: a, input: go}}]}}}}
"""


class Listener:
    """What reached the attacker's endpoint: (method, path, headers) per request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.port = 0

    def url(self, path: str = "/v1") -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def listener() -> Iterator[Listener]:
    seen = Listener()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _record(self) -> None:
            seen.requests.append((self.command, self.path, dict(self.headers.items())))
            send_json(self, 500, {"error": "the listener answers nothing useful"})

        do_GET = do_POST = _record

    with serve_http(Handler) as port:
        seen.port = port
        yield seen


@pytest.fixture
def fleet_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    for provider in PROVIDERS:
        monkeypatch.delenv(host_setting(provider), raising=False)
    current_provider_policy.cache_clear()


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_api_refuses_the_spec_naming_the_field_and_the_setting(
        provider: str, listener: Listener, client: httpx.AsyncClient, store: Store) -> None:
    r = await client.post("/v1/sessions",
                          json={"spec": SPEC.format(provider=provider, host=listener.url())})
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert "runtime.host" in message and host_setting(provider) in message
    assert "secret" not in r.text
    assert await store.list_sessions() == []  # nothing half-written
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["openai", "ollama"])
def test_durable_submit_and_run_refuse_it_with_exit_2(provider: str, listener: Listener,
                                                      tmp_path: Any, settings: DurableSettings
                                                      ) -> None:
    spec = tmp_path / "leak.yaml"
    spec.write_text(SPEC.format(provider=provider, host=listener.url()))
    env = {**os.environ, "DURABLE_REDIS_URL": settings.redis_url,
           "DURABLE_KEY_PREFIX": settings.key_prefix}
    for command in (["submit", str(spec)], ["run", str(spec), "--ephemeral"]):
        done = subprocess.run([*durable_bin(), *command], env=env, cwd=REPO, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "runtime.host" in done.stderr and host_setting(provider) in done.stderr
        assert "Traceback" not in done.stderr
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
def test_durable_run_grants_a_host_explicitly(listener: Listener, tmp_path: Any) -> None:
    """On one's own machine the user may send their key where they choose, by saying so."""
    spec = tmp_path / "mine.yaml"
    spec.write_text(SPEC.format(provider="openai", host=listener.url()))
    env = {key: value for key, value in os.environ.items() if key != "DURABLE_REDIS_URL"}
    done = subprocess.run([*durable_bin(), "run", str(spec), "--ephemeral", "--allow-host",
                           listener.url("")], env=env, cwd=REPO, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 1, (done.stdout, done.stderr)  # the listener answers 500
    assert listener.requests and listener.requests[0][1] == "/v1/chat/completions"
    assert listener.requests[0][2]["Authorization"] == "Bearer sk-fleet-secret"


async def _written_past_submit(store: Store, spec_text: str, provider: str,
                               allow: Callable[[str, str], None], url: str) -> str:
    """A session whose spec names the host, as if written to Redis some other way: loaded
    while the host is listed, then the listing is gone before any worker runs it."""
    allow(provider, url)
    loaded = load_spec_text(spec_text, "leak.yaml")
    os.environ.pop(host_setting(provider))
    current_provider_policy.cache_clear()
    sid, _ = await start_session(store, loaded)
    return sid


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_worker_refuses_to_call_a_host_it_does_not_allow(
        provider: str, listener: Listener, store: Store, consumer: StepConsumer,
        allow_provider_host: Callable[[str, str], None]) -> None:
    sid = await _written_past_submit(store, SPEC.format(provider=provider, host=listener.url()),
                                     provider, allow_provider_host, listener.url(""))

    async def failed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.FAILED

    await wait_for(failed, what="the session to fail")
    error = (await store.get_session(sid)).error or ""
    assert "runtime.host" in error and host_setting(provider) in error
    kinds = [f["type"] for _, f in await store.events(sid)]
    assert kinds.count("step_failed") == 1 and "step_retried" not in kinds  # at once
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["ollama", "llamacpp"])
async def test_a_keyless_host_that_resolves_to_loopback_is_refused_where_it_connects(
        provider: str, listener: Listener, store: Store, consumer: StepConsumer) -> None:
    """2130706433 is 127.0.0.1 written as one number: no literal address to refuse at
    submit, so the spec passes; the network guard resolves it where the socket opens and
    refuses, and the listener hears nothing."""
    if provider == "ollama":
        pytest.importorskip("ollama")
    host = f"http://2130706433:{listener.port}"
    sid, _ = await start_session(store, load_spec_text(
        SPEC.format(provider=provider, host=host), "keyless.yaml"))

    async def failed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.FAILED

    await wait_for(failed, timeout_s=60, what="the session to fail")
    error = (await store.get_session(sid)).error or ""
    assert "127.0.0.1" in error and host_setting(provider) in error, error
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
async def test_a_host_listed_later_is_honoured_by_the_api_at_once(
        listener: Listener, settings: DurableSettings,
        allow_provider_host: Callable[[str, str], None]) -> None:
    """The API's render process reads the policy the API has now, not the one it read
    first (one render process: the same one answers both)."""
    from helpers.api import asgi_client, make_app

    body = {"spec": SPEC.format(provider="openai", host=listener.url())}
    async with asgi_client(make_app(settings, api_render_workers=1)) as client:
        assert (await client.post("/v1/sessions", json=body)).status_code == 422
        allow_provider_host("openai", listener.url(""))
        r = await client.post("/v1/sessions", json=body)
        assert r.status_code == 201, r.text
