"""Where a spec's model requests may go: the pure decision (spec/provider_hosts.py)
at submit and where a worker builds the model, and the audit of every spec field that can
carry a URL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strands_durable.errors import ProviderError, SpecError
from strands_durable.provider_policy import HOST_PROVIDERS, ProviderPolicy
from strands_durable.providers import PROVIDERS
from strands_durable.spec.loader import load_spec_data
from strands_durable.spec.provider_hosts import (
    KEYED_PROVIDERS,
    KEYLESS_PROVIDERS,
    Origin,
    check_provider_hosts,
    judge_host,
    parse_base_url,
)
from strands_durable.worker.providers import ModelConfig, build_model

SCHEMA = Path(__file__).resolve().parents[2] / "spec/schema/strands-workflow.schema.json"


def _spec(provider: str, host: str | None, region: str | None = None) -> dict[str, Any]:
    runtime: dict[str, Any] = {"provider": provider, "model_id": "m"}
    if host is not None:
        runtime["host"] = host
    if region is not None:
        runtime["region"] = region
    return {"version": 0, "name": "hosts", "runtime": runtime,
            "agents": {"a": {"prompt": "hi"}},
            "pattern": {"type": "chain", "config": {"steps": [{"agent": "a", "input": "go"}]}}}


def _check(provider: str, host: str | None, policy: ProviderPolicy | None = None,
           granted: tuple[str, ...] = (), region: str | None = None) -> None:
    # The schema and the models first (as submit does), then the host check alone with
    # the given policy.
    spec = load_spec_data(_spec("scripted", None, region)).spec
    runtime = spec.runtime.model_copy(update={"provider": provider, "host": host})
    spec = spec.model_copy(update={"runtime": runtime})
    check_provider_hosts(spec, "spec.yaml", policy or ProviderPolicy(), granted)


# --- the reproduction: a spec cannot pick where the fleet's key goes --------------------


@pytest.mark.parametrize("provider", sorted(KEYED_PROVIDERS))
@pytest.mark.parametrize("host", [
    "http://127.0.0.1:39999/v1", "http://[::1]:39999", "http://localhost:39999",
    "https://attacker.example/v1", "http://169.254.169.254/latest", "http://10.0.0.7:8000",
    "http://2130706433:39999", "https://api.openai.com.attacker.example/v1",
])
def test_a_keyed_provider_refuses_any_host_the_operator_did_not_list(provider: str,
                                                                     host: str) -> None:
    with pytest.raises(SpecError) as info:
        _check(provider, host)
    message = str(info.value)
    assert "runtime.host" in message and f"DURABLE_{provider.upper()}_HOSTS" in message
    assert "agents 'a'" in message and "--allow-host" in message


def test_the_reproduction_is_refused_at_load_naming_field_and_setting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from strands_durable.provider_policy import current_provider_policy

    monkeypatch.delenv("DURABLE_OPENAI_HOSTS", raising=False)
    current_provider_policy.cache_clear()
    with pytest.raises(SpecError, match=r"runtime\.host: .*DURABLE_OPENAI_HOSTS, not to"):
        load_spec_data(_spec("openai", "http://127.0.0.1:39999/v1"))


@pytest.mark.parametrize(("provider", "host"), [
    ("openai", "https://api.openai.com/v1"),
    ("anthropic", "https://api.anthropic.com"),
    ("gemini", "https://generativelanguage.googleapis.com/"),
    ("bedrock", "https://bedrock-runtime.eu-central-1.amazonaws.com"),
    ("bedrock", "https://bedrock-runtime-fips.us-east-1.amazonaws.com"),
])
def test_each_providers_own_endpoint_needs_no_entry(provider: str, host: str) -> None:
    _check(provider, host)


@pytest.mark.parametrize("host", [
    "http://api.openai.com/v1",  # the key in clear text
    "https://api.openai.com:8443/v1",
    "https://bedrock-runtime.us-east-1.amazonaws.com.attacker.example",
])
def test_an_official_name_on_another_scheme_port_or_domain_is_not_official(host: str) -> None:
    provider = "bedrock" if "bedrock" in host else "openai"
    with pytest.raises(SpecError):
        _check(provider, host)


def test_a_listed_base_url_allows_its_origin_and_the_paths_under_it() -> None:
    policy = ProviderPolicy(openai_hosts="https://gateway.internal:8443/openai, http://10.1.2.3")
    _check("openai", "https://gateway.internal:8443/openai/v1", policy)
    _check("openai", "https://GATEWAY.internal:8443/openai", policy)
    _check("openai", "http://10.1.2.3/v1", policy)
    for other in ("https://gateway.internal:8443/other", "https://gateway.internal/openai/v1",
                  "http://gateway.internal:8443/openai/v1", "https://gateway.internal:8443/openaix",
                  "http://10.1.2.3:8080/v1"):
        with pytest.raises(SpecError):
            _check("openai", other, policy)
    # A list is per provider: openai's entry lets no other provider's key go there.
    with pytest.raises(SpecError, match="DURABLE_ANTHROPIC_HOSTS"):
        _check("anthropic", "http://10.1.2.3/v1", policy)


def test_a_local_grant_allows_a_host_as_a_listed_one_does() -> None:
    _check("openai", "http://127.0.0.1:39999/v1", granted=("http://127.0.0.1:39999",))
    with pytest.raises(SpecError):
        _check("openai", "http://127.0.0.1:40000/v1", granted=("http://127.0.0.1:39999",))


@pytest.mark.parametrize("host", [
    "http://user:pass@api.openai.com/v1", "https://api.openai.com@attacker.example/",
    "https://api.openai.com\\@attacker.example/", "https://api.openai.com/v1?x=1",
    "https://api.openai.com/v1#frag", "https://api.openai.com /v1", "ftp://api.openai.com",
    "https://api.openai.com:99999/", "https://%61pi.openai.com/", "javascript:alert(1)",
    "https://" + "a" * 3000 + ".com", "https://api.openai.com\x00.attacker.example/",
])
def test_urls_that_parsers_read_differently_go_nowhere(host: str) -> None:
    assert isinstance(parse_base_url(host), str)
    with pytest.raises(SpecError) as info:
        _check("openai", host)
    assert "\x00" not in str(info.value) and "user:pass" not in str(info.value)
    assert len(str(info.value)) < 1000


def test_parse_base_url_reads_origins() -> None:
    assert parse_base_url("https://API.OpenAI.com/v1/") == Origin("https", "api.openai.com", 443,
                                                                 "/v1")
    assert parse_base_url("http://[::1]:8080") == Origin("http", "::1", 8080, "")
    assert parse_base_url("http://h") == Origin("http", "h", 80, "")


# --- keyless servers: public hosts through the guard, private ones only where listed ------


@pytest.mark.parametrize("provider", sorted(KEYLESS_PROVIDERS))
@pytest.mark.parametrize("host", [
    "http://127.0.0.1:11435", "http://[::1]:11434", "http://localhost:9999",
    "http://ollama.localhost:11434", "http://169.254.169.254", "http://192.168.1.20:11434",
    "http://[::ffff:127.0.0.1]:11434", "http://[64:ff9b::7f00:1]:80", "http://0.0.0.0:11434",
])
def test_a_keyless_provider_refuses_private_and_loopback_hosts_not_listed(provider: str,
                                                                         host: str) -> None:
    with pytest.raises(SpecError, match=f"DURABLE_{provider.upper()}_HOSTS"):
        _check(provider, host)
    _check(provider, host, ProviderPolicy(**{f"{provider}_hosts": host}))


def test_a_keyless_public_host_is_allowed_through_the_guard_and_the_default_as_it_is() -> None:
    assert judge_host("ollama", "https://models.example.com", ()).guarded
    assert judge_host("ollama", "http://2130706433:11434", ()).guarded  # resolved at connect
    for provider, default in (("ollama", "http://localhost:11434"),
                              ("llamacpp", "http://127.0.0.1:8080")):
        verdict = judge_host(provider, default, ())
        assert verdict.allowed and not verdict.guarded
    listed = judge_host("ollama", "http://10.0.0.5:11434", ("http://10.0.0.5:11434",))
    assert listed.allowed and not listed.guarded


def test_providers_without_a_network_ignore_the_host() -> None:
    assert judge_host("scripted", "http://127.0.0.1:1", ()).allowed


@pytest.mark.parametrize("region", ["us-east-1.attacker.example", "x/y", "a b", "-x", "A" * 70])
def test_a_bedrock_region_is_one_aws_region_name(region: str) -> None:
    with pytest.raises(SpecError, match=r"runtime\.region"):
        _check("bedrock", None, region=region)
    _check("openai", None, region=region)  # the region is Bedrock's alone


# --- the worker holds the same line (a spec that reached Redis some other way) -----------


@pytest.mark.parametrize("provider", sorted(KEYED_PROVIDERS | KEYLESS_PROVIDERS))
def test_build_model_refuses_what_submit_refuses(provider: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cfg = ModelConfig(provider=provider, agent_id="a", model_id="m",
                      host="http://127.0.0.1:39999/v1")
    with pytest.raises(ProviderError, match=r"agent 'a': runtime\.host: .*_HOSTS"):
        build_model(cfg, ProviderPolicy())
    bad_region = ModelConfig(provider="bedrock", agent_id="a", model_id="m",
                             region="us-east-1.attacker.example")
    with pytest.raises(ProviderError, match=r"runtime\.region"):
        build_model(bad_region, ProviderPolicy())


def test_a_keyless_model_built_for_a_public_host_connects_through_the_guard() -> None:
    pytest.importorskip("ollama")
    from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

    model: Any = build_model(ModelConfig(provider="ollama", agent_id="a", model_id="m",
                                         host="https://models.example.com"), ProviderPolicy())
    guarded_type = type(guarded_async_transport(Reach((), "X")))
    assert isinstance(model.inner.client_args["transport"], guarded_type)
    llama: Any = build_model(ModelConfig(provider="llamacpp", agent_id="a",
                                         host="https://models.example.com"), ProviderPolicy())
    assert isinstance(llama.inner.client._transport, guarded_type)
    plain: Any = build_model(ModelConfig(provider="llamacpp", agent_id="a",
                                         host="http://localhost:8080"), ProviderPolicy())
    assert not isinstance(plain.inner.client._transport, guarded_type)


def test_every_provider_with_a_host_has_a_setting_and_a_kind() -> None:
    with_network = set(PROVIDERS) - {"scripted"}
    assert with_network == set(HOST_PROVIDERS) == KEYED_PROVIDERS | KEYLESS_PROVIDERS
    assert not KEYED_PROVIDERS & KEYLESS_PROVIDERS


def test_a_bad_listed_entry_stops_the_process_naming_the_setting() -> None:
    from pydantic import ValidationError

    from strands_durable.settings import describe_settings_error

    for value in ("api.example.com", "http://u:p@api.example.com", "ftp://x"):
        with pytest.raises(ValidationError) as info:
            ProviderPolicy(openai_hosts=value)
        assert "openai_hosts" in str(info.value)
    with pytest.raises(ValidationError) as info:
        from strands_durable.settings import DurableSettings

        DurableSettings(anthropic_hosts="http://u:secret@x")
    message = describe_settings_error(info.value)
    assert message.startswith("DURABLE_ANTHROPIC_HOSTS") and "secret" not in message


# --- the audit: every spec field that can carry a URL, and its guard ---------------------

# Every field of the spec's schema whose value can name a place on the network (a URL, a
# host, an endpoint, a region) or a secret, with what guards it. A new such field in the
# schema fails test_every_url_field_of_the_schema_is_guarded until it is added here with
# its guard (and the guard exists).
URL_FIELDS: dict[str, str] = {
    "runtime.host": "provider hosts: official or DURABLE_<PROVIDER>_HOSTS (keyed), network "
                    "guard (keyless); at submit and in build_model",
    "runtime.region": "one AWS region name (the Bedrock endpoint stays on amazonaws.com)",
    "runtime.space_id": "used by no provider here (DanskeGPT is not one)",
    "telemetry.otel.endpoint": "DURABLE_OTEL_ENDPOINTS or the fleet's own OTLP endpoint",
    "tools.mcp[].url": "network guard (DURABLE_TOOL_HTTP_ALLOW), pinned at connect",
    "tools.mcp[].headers": "${VAR} only from DURABLE_TOOL_SECRETS",
    "tools.mcp[].env": "${VAR} only from DURABLE_TOOL_SECRETS; stdio command from "
                       "DURABLE_MCP_COMMANDS",
    "tools.mcp[].command": "DURABLE_MCP_COMMANDS",
    "tools.http_executors[].base_url": "network guard (DURABLE_TOOL_HTTP_ALLOW), pinned",
    "tools.http_executors[].headers": "${VAR} only from DURABLE_TOOL_SECRETS",
    "tools.http_executors[].common_endpoints": "paths for the prompt, joined to base_url",
    "tools.http_executors[].common_endpoints[].path": "joined to the guarded base_url",
    "tools.http_executors[].examples[].path": "text for the prompt; calls go to base_url",
    "env": "its secrets and mounts, below",
    "env.secrets": "each below",
    "security": "guardrails: kept or refused at submit, no URL",
    "env.secrets[].source": "only `env`, names checked against DURABLE_TOOL_SECRETS",
    "env.secrets[].key": "a variable a ${NAME} reads: DURABLE_TOOL_SECRETS",
    "env.secrets[].path": "refused unless source env (no files read)",
    "env.mounts": "refused",
    "skills[].path": "read at load relative to the spec's own file, bounded; text submits "
                     "have none",
    "agents[].$ref": "resolved at load relative to the spec's own file; refused in text",
    "context_policy.notes.file": "an artifact path, sanitized under --out",
    "context_policy.compaction.summarization_model": "a model id on the agent's provider and "
                                                     "host, which build_model checks",
    "outputs.artifacts[].path": "sanitized under --out; never a URL",
}
_URLISH = ("url", "uri", "host", "endpoint", "region", "base", "path", "file", "ref",
           "secret", "env", "header", "command", "mount", "source", "key", "space",
           "summarization_model")


def _schema_fields(node: Any, path: str, defs: dict[str, Any],
                   seen: frozenset[str] = frozenset()) -> Iterator[tuple[str, dict[str, Any]]]:
    if not isinstance(node, dict):
        return
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name not in seen:
            yield from _schema_fields(defs.get(name, {}), path, defs, seen | {name})
        return
    for name, sub in (node.get("properties") or {}).items():
        here = f"{path}.{name}" if path else name
        yield here, sub
        yield from _schema_fields(sub, here, defs, seen)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _schema_fields(node[key], f"{path}[]", defs, seen)
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(key) or []:
            yield from _schema_fields(sub, path, defs, seen)


def test_every_url_field_of_the_schema_is_guarded() -> None:
    schema = json.loads(SCHEMA.read_text())
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    found = set()
    for path, node in _schema_fields(schema, "", defs):
        leaf = path.rsplit(".", 1)[-1].lower()
        if node.get("format") in ("uri", "url", "hostname") or any(
                word in leaf for word in _URLISH):
            found.add(path)
    # Fields the pattern configs name `key`-like but that are ids, not places.
    found = {path for path in found if not path.startswith("pattern.")}
    unguarded = sorted(found - set(URL_FIELDS))
    assert not unguarded, f"spec fields that can carry a URL, host or secret without a " \
                          f"guard in URL_FIELDS: {unguarded}"
    gone = sorted(set(URL_FIELDS) - found)
    assert not gone, f"URL_FIELDS names fields the schema no longer has: {gone}"


@pytest.mark.parametrize("extra", [
    {"telemetry": {"otel": {"endpoint": "http://localhost:4318", "headers": {"a": "b"}}}},
    {"runtime": {"provider": "openai", "model_id": "m", "base_url": "http://127.0.0.1:1"}},
    {"runtime": {"provider": "openai", "model_id": "m", "endpoint": "http://127.0.0.1:1"}},
    {"agents": {"a": {"prompt": "hi", "host": "http://127.0.0.1:1"}}},
])
def test_no_other_field_can_carry_a_url(extra: dict[str, Any]) -> None:
    """Unknown fields (otel headers, base_url, endpoint, an agent's own host) are refused by
    the schema, naming the field: the audit above covers every field there is."""
    data = {**_spec("scripted", None), **extra}
    with pytest.raises(SpecError) as info:
        load_spec_data(data)
    assert any(word in str(info.value) for word in ("headers", "base_url", "endpoint", "host"))


# --- litellm: the model id picks the endpoint -------------------------------------------


def _litellm(model_id: str, host: str | None = None, **extra: Any) -> dict[str, Any]:
    data = _spec("litellm", host)
    data["runtime"]["model_id"] = model_id
    return {**data, **extra}


@pytest.mark.parametrize("model_id", [
    "oobabooga/http://127.0.0.1:5000", "llamafile/m", "deepinfra/meta-llama/x", "gpt-4o",
    "lemonade/m", "openai/http://x", "hosted_vllm/m",
])
def test_a_litellm_model_id_without_a_listed_proxy_names_a_fixed_route(model_id: str) -> None:
    with pytest.raises(SpecError, match=r"runtime\.model_id: .*litellm model id"):
        load_spec_data(_litellm(model_id))
    with pytest.raises(ProviderError, match="model_id"):
        build_model(ModelConfig(provider="litellm", agent_id="a", model_id=model_id),
                    ProviderPolicy())


def test_litellm_routes_with_fixed_endpoints_or_a_listed_proxy_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for model_id in ("openai/gpt-4o", "anthropic/claude-x", "gemini/gemini-2.5-pro",
                     "bedrock/anthropic.claude-3:0"):
        load_spec_data(_litellm(model_id))
    # Behind the operator's LiteLLM proxy any route name is the proxy's business, but a
    # URL in the id still goes nowhere (a route may prefer it over the proxy).
    policy = ProviderPolicy(litellm_hosts="https://litellm.internal")
    spec = load_spec_data(_spec("scripted", None)).spec
    runtime = spec.runtime.model_copy(update={"provider": "litellm", "host":
                                              "https://litellm.internal", "model_id": "my-m"})
    check_provider_hosts(spec.model_copy(update={"runtime": runtime}), "s", policy, ())
    runtime = runtime.model_copy(update={"model_id": "oobabooga/http://127.0.0.1:1"})
    with pytest.raises(SpecError, match="names no URL"):
        check_provider_hosts(spec.model_copy(update={"runtime": runtime}), "s", policy, ())


def test_a_summarization_model_is_held_to_the_same_rule() -> None:
    data = _litellm("openai/gpt-4o", context_policy={"compaction": {
        "enabled": True, "summarization_model": "llamafile/m"}})
    with pytest.raises(SpecError, match=r"context_policy\.compaction\.summarization_model"):
        load_spec_data(data)


@pytest.mark.parametrize("host", ["http://10.1.2.3/tenant-a/../admin",
                                  "http://10.1.2.3/tenant-a/./x", "http://10.1.2.3/tenant-a/%2e%2e"])
def test_dot_segments_cannot_leave_a_listed_path(host: str) -> None:
    policy = ProviderPolicy(openai_hosts="http://10.1.2.3/tenant-a")
    with pytest.raises(SpecError, match="segments"):
        _check("openai", host, policy)


def test_a_refusal_names_the_setting_but_not_what_it_lists() -> None:
    policy = ProviderPolicy(openai_hosts="https://gw.corp.internal/openai")
    with pytest.raises(SpecError) as info:
        _check("openai", "https://attacker.example/v1", policy)
    assert "DURABLE_OPENAI_HOSTS" in str(info.value) and "corp.internal" not in str(info.value)


async def test_a_keyless_servers_guarded_requests_carry_no_credentials() -> None:
    """ollama's SDK sends OLLAMA_API_KEY to any host it is given: through the guard a
    spec's host gets no credential header at all (a loopback server stands in for it,
    reachable here because this Reach lists 127.0.0.1)."""
    from http.server import BaseHTTPRequestHandler

    import httpx
    from helpers import send_json, serve_http

    from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            send_json(self, 200, {})

    with serve_http(Handler) as port:
        transport = guarded_async_transport(Reach(("127.0.0.1",), "X"), strip_credentials=True)
        async with httpx.AsyncClient(transport=transport) as client:
            r = await client.get(f"http://127.0.0.1:{port}/api/chat", headers={
                "Authorization": "Bearer k", "x-api-key": "k", "X-Goog-Api-Key": "k",
                "Accept": "application/json"})
    assert r.status_code == 200 and len(seen) == 1
    assert {"authorization", "x-api-key", "x-goog-api-key"}.isdisjoint(seen[0])
    assert seen[0]["accept"] == "application/json"


async def test_a_bounded_transport_reads_no_more_than_its_bound_and_nothing_compressed(
        ) -> None:
    """A keyless server a spec names may be anyone's: its reply is read uncompressed and
    up to the bound (worker/providers/sdk.py MAX_REPLY_BYTES), never grown past it."""
    import gzip
    from http.server import BaseHTTPRequestHandler

    import httpx
    from helpers import serve_http

    from strands_durable.worker.tools.net_guard import (
        BodyTooLarge,
        Reach,
        guarded_async_transport,
    )

    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.headers.get("Accept-Encoding", ""))
            size = int(self.path.rsplit("/", 1)[1])
            body = b"x" * size
            self.send_response(200)
            if self.path.startswith("/gz/"):
                body = gzip.compress(body)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serve_http(Handler) as port:
        transport = guarded_async_transport(Reach(("127.0.0.1",), "X"), max_body_bytes=1000)
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/plain/1000")).content == \
                b"x" * 1000
            with pytest.raises(BodyTooLarge, match="longer than 1,000 bytes"):
                await client.get(f"http://127.0.0.1:{port}/plain/1001")
            with pytest.raises(BodyTooLarge, match="compressed"):
                await client.get(f"http://127.0.0.1:{port}/gz/100000")  # 100 KB, inflated
    assert asked == ["identity"] * 3
