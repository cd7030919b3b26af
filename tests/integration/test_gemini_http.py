"""Provider gemini works by configuration alone: google-genai, Strands' GeminiModel and
everything above them run against a local fake of the Gemini API (tests/fake_gemini.py:
streamGenerateContent as SSE, usageMetadata, functionCall parts, Google's error bodies).

google-genai streams through aiohttp when it is installed, else through httpx: the
in-process tests run on both transports."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_gemini import CANDIDATE_TOKENS, PROMPT_TOKENS, FakeGemini, fake_gemini, reply_for
from helpers import FIXTURES, REPO, RedisServer, status_doc, wait_for
from helpers.fleet import durable_bin

from strands_durable.models import SessionStatus
from strands_durable.sessions.history import event_docs
from strands_durable.sessions.start import start_session
from strands_durable.spec.loader import load_spec_data
from strands_durable.store.store import Store
from strands_durable.worker.agent_call import RetryPolicy, call_agent
from strands_durable.worker.consumer import StepConsumer
from strands_durable.worker.providers import ModelConfig, build_model

pytestmark = pytest.mark.integration
genai_client = pytest.importorskip("google.genai._api_client", reason="google-genai missing")

FAST_RETRY = RetryPolicy(attempts=3, wait_min_s=0.01, wait_max_s=0.05)
KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                 "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, allow_provider_host: Callable[[str, str], None]
         ) -> Iterator[FakeGemini]:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "test-key")
    with fake_gemini() as server:
        allow_provider_host("gemini", server.url)
        yield server


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """An install without aiohttp (the gemini extra alone) streams through httpx."""
    if request.param == "aiohttp" and not genai_client.has_aiohttp:
        pytest.skip("aiohttp is not installed")
    if request.param == "httpx":
        monkeypatch.setattr(genai_client, "has_aiohttp", False)
    return str(request.param)


def _model(fake: FakeGemini, **settings: Any) -> Any:
    return build_model(ModelConfig(provider="gemini", agent_id="writer", host=fake.url,
                                   **settings))


async def test_reply_usage_and_request_come_from_the_wire(fake: FakeGemini,
                                                          transport: str) -> None:
    model = _model(fake, temperature=0.3, top_p=0.9, max_tokens=100)
    reply = await call_agent(model, system_prompt="Be brief.", history=[],
                             prompt="Say hello to the world")

    assert reply.text == reply_for("Say hello to the world")
    assert (reply.input_tokens, reply.output_tokens) == (PROMPT_TOKENS, CANDIDATE_TOKENS)
    assert [m["role"] for m in reply.messages] == ["user", "assistant"]
    (request,) = fake.requests
    assert fake.paths == ["/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"]
    assert fake.headers[0]["x-goog-api-key"] == "test-key"
    assert request["systemInstruction"]["parts"] == [{"text": "Be brief."}]
    assert request["contents"] == [{"role": "user",
                                    "parts": [{"text": "Say hello to the world"}]}]
    assert request["generationConfig"] == {"temperature": 0.3, "topP": 0.9,
                                           "maxOutputTokens": 100}


async def test_the_sdks_own_variables_alone_reach_the_server(
        fake: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    """No host in the spec: GOOGLE_GEMINI_BASE_URL (google-genai's own) points it at a
    proxy or, here, the fake; GEMINI_API_KEY alone is a key."""
    monkeypatch.delenv("GOOGLE_API_KEY")
    monkeypatch.setenv("GEMINI_API_KEY", "second-key")
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    model = build_model(ModelConfig(provider="gemini", agent_id="writer",
                                    model_id="gemini-2.5-pro"))
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi")
    assert reply.text == reply_for("hi")
    assert fake.paths[0].startswith("/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert fake.headers[0]["x-goog-api-key"] == "second-key"
    assert "generationConfig" not in fake.requests[0]  # nothing set: Gemini's defaults


async def test_history_is_sent_back_as_model_turns(fake: FakeGemini) -> None:
    model = _model(fake)
    first = await call_agent(model, system_prompt=None, history=[], prompt="one")
    await call_agent(model, system_prompt=None, history=first.messages, prompt="two")
    sent = [(c["role"], c["parts"][0]["text"]) for c in fake.requests[1]["contents"]]
    assert sent == [("user", "one"), ("model", reply_for("one")), ("user", "two")]


@pytest.mark.parametrize("failures", [[429], [503], [500, 429]])
async def test_transient_statuses_are_retried_in_place(fake: FakeGemini, transport: str,
                                                       failures: list[int]) -> None:
    model = _model(fake)
    fake.failures = list(failures)
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY)
    assert reply.text == reply_for("hi")
    assert len(fake.requests) == len(failures) + 1  # the SDK itself retried nothing
    assert all(r["contents"] == fake.requests[0]["contents"] for r in fake.requests)


async def test_each_request_closes_its_own_client(fake: FakeGemini, transport: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Strands leaves each request's client to the garbage collector, whose finalizer
    closes it on whatever loop runs then (a later run's, in one process: a task failing
    with "Event loop is closed"). Every request closes its own, a refused one too."""
    from google.genai.client import AsyncClient
    made: list[AsyncClient] = []  # held here, so none is garbage-collected meanwhile
    closed: list[AsyncClient] = []
    init, close = AsyncClient.__init__, AsyncClient.aclose

    def counted_init(client: AsyncClient, *args: Any, **kwargs: Any) -> None:
        made.append(client)
        init(client, *args, **kwargs)

    async def counted_close(client: AsyncClient) -> None:
        closed.append(client)
        await close(client)

    monkeypatch.setattr(AsyncClient, "__init__", counted_init)
    monkeypatch.setattr(AsyncClient, "aclose", counted_close)
    model = _model(fake)
    fake.failures = [429]
    await call_agent(model, system_prompt=None, history=[], prompt="one", retry=FAST_RETRY)
    await call_agent(model, system_prompt=None, history=[], prompt="two", retry=FAST_RETRY)
    assert len(fake.requests) == 3
    assert len(made) == 3
    assert all(any(c is client for c in closed) for client in made)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_permanent_statuses_are_not_retried(fake: FakeGemini, transport: str,
                                                  status: int) -> None:
    model = _model(fake)
    fake.failures = [status] * 5
    with pytest.raises(Exception, match=str(status)) as info:
        await call_agent(model, system_prompt=None, history=[], prompt="hi",
                         retry=FAST_RETRY)
    assert len(fake.requests) == 1
    # the transport this case meant to exercise is the one that answered
    response = getattr(info.value, "response", None)
    assert type(response).__module__.partition(".")[0] == transport


async def test_a_hung_server_times_out_and_is_retried(fake: FakeGemini,
                                                      transport: str) -> None:
    model = _model(fake)
    fake.hangs = 1
    # The limit is what the hung first attempt waits out; the second attempt must answer
    # within it, so it is generous (a loaded machine can take a second to answer).
    reply = await call_agent(model, system_prompt=None, history=[], prompt="hi",
                             retry=FAST_RETRY, timeout_s=2.0)
    assert reply.text == reply_for("hi")
    assert len(fake.requests) == 2


# -- whole sessions: a real redis-server and the in-process worker --------------------
CHAIN = {
    "version": 0, "name": "gemini-chain",
    "runtime": {"provider": "gemini", "model_id": "gemini-2.5-flash",
                "failure_policy": {"retries": 3, "backoff": "constant", "wait_min": 0,
                                   "wait_max": 0}},
    "agents": {"writer": {"prompt": "You write."}},
    "pattern": {"type": "chain", "config": {"steps": [{"agent": "writer",
                                                       "input": "hello there"}]}},
}


async def _ended(store: Store, sid: str) -> bool:
    return (await store.get_session(sid)).status != SessionStatus.RUNNING


async def _run(store: Store, fake: FakeGemini, data: dict[str, Any]) -> str:
    data = {**data, "runtime": {**data["runtime"], "host": fake.url}}
    sid, _ = await start_session(store, load_spec_data(data))
    await wait_for(lambda: _ended(store, sid), timeout_s=60, what="the session to end")
    return sid


@pytest.mark.parametrize(("status", "cause"), [
    (401, "HTTP 401: the credentials are missing or were rejected"),
    (403, "HTTP 403: the credentials may not use this model"),
])
async def test_a_rejected_key_fails_the_step_at_once_naming_the_cause(
        status: int, cause: str, fake: FakeGemini, store: Store,
        consumer: StepConsumer) -> None:
    fake.failures = [status] * 10
    sid = await _run(store, fake, CHAIN)
    record = await store.get_session(sid)
    assert record.status == SessionStatus.FAILED
    assert cause in (record.error or "")
    kinds = [f["type"] for _, f in await store.events(sid)]
    assert kinds.count("step_failed") == 1 and "step_retried" not in kinds, kinds
    assert len(fake.requests) == 1


async def test_a_tool_call_round_trip(fake: FakeGemini, store: Store,
                                      consumer: StepConsumer) -> None:
    """The fake calls strands-cli's native calculator twice (functionCall); each result
    goes back as a functionResponse; every model turn's usageMetadata is counted."""
    fake.tool_calls = 2
    data = {**CHAIN, "tools": {"python": ["calculator"]},
            "agents": {"writer": {"prompt": "You write.", "tools": ["calculator"]}}}
    sid = await _run(store, fake, data)
    record = await store.get_session(sid)
    assert record.status == SessionStatus.COMPLETED, record.error
    (result,) = await store.results(sid, 0)
    assert result.response == reply_for("hello there")
    assert (result.input_tokens, result.output_tokens) == (3 * PROMPT_TOKENS,
                                                           3 * CANDIDATE_TOKENS)
    assert len(fake.requests) == 3
    declared = [f["name"] for t in fake.requests[0]["tools"] for f in t["functionDeclarations"]]
    assert declared == ["calculator"]
    responses = [p["functionResponse"] for c in fake.requests[2]["contents"]
                 for p in c["parts"] if "functionResponse" in p]
    assert [(r["id"], r["name"]) for r in responses] == [("call-1", "calculator"),
                                                          ("call-2", "calculator")]
    assert all("42" in json.dumps(r["response"]) for r in responses)
    done = [d for d in event_docs(await store.events(sid)) if d["type"] == "tool_call_completed"]
    assert [(d["tool"], d["call"], d["outcome"]) for d in done] == [
        ("calculator", 1, "ok"), ("calculator", 2, "ok")]


# -- `durable run`, a real process, the corpus spec as written ------------------------
async def test_durable_run_runs_strands_clis_gemini_example(
        fake: FakeGemini, redis_server: RedisServer, prefix: str, store: Store,
        tmp_path: Path) -> None:
    """strands-cli's own example, unchanged: the key and the endpoint come from the
    environment alone; the session is kept in a private Redis to read its usage back."""
    spec = FIXTURES / "strands-cli-corpus" / "examples" / "single-agent-chain-gemini.yaml"
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("DURABLE_", "OTEL_"))},
           "GOOGLE_GEMINI_BASE_URL": fake.url, "DURABLE_REDIS_URL": redis_server.url,
           "DURABLE_KEY_PREFIX": prefix, "OTEL_SDK_DISABLED": "true"}
    proc = await asyncio.to_thread(
        subprocess.run, [*durable_bin(), "run", str(spec), "--var", "topic=AI ethics",
                         "--out", str(tmp_path)], cwd=REPO, env=env, capture_output=True,
        text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    expected = reply_for("Analyze the following topic and provide a brief overview:")
    assert (tmp_path / "analysis-gemini.md").read_text().strip() == expected
    assert f"{PROMPT_TOKENS} in / {CANDIDATE_TOKENS} out tokens" in proc.stdout
    (request,) = fake.requests
    assert fake.paths[0].startswith("/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    assert request["generationConfig"] == {"temperature": 0.7, "topP": 0.9,
                                           "maxOutputTokens": 2048}
    assert "Topic: AI ethics" in request["contents"][0]["parts"][0]["text"]
    assert "concise technical analyst" in request["systemInstruction"]["parts"][0]["text"]
    sid = proc.stdout.split()[1]
    usage = (await status_doc(store, sid))["token_usage"]
    assert (usage["total_input_tokens"], usage["total_output_tokens"]) == (PROMPT_TOKENS,
                                                                          CANDIDATE_TOKENS)


async def test_durable_run_loads_a_skill_through_gemini_function_calls(
        fake: FakeGemini, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """strands-cli's other gemini example, as written: the model calls `Skill`, the
    skill's text goes back as a functionResponse, the answer becomes the artifact."""
    from typer.testing import CliRunner

    from strands_durable.api.cli import app

    for name in [n for n in os.environ if n.startswith("DURABLE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", fake.url)
    fake.tool, fake.tool_args, fake.tool_calls = "Skill", {"skill_id": "mermaid-master"}, 1
    spec = FIXTURES / "strands-cli-corpus" / "examples" / "mermaid-diagram-generator.yaml"
    args = ["run", str(spec), "--ephemeral", "--out", str(tmp_path), "--var",
            "diagram_type=flowchart", "--var", "topic=User authentication flow"]
    result = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert result.exit_code == 0, result.output
    assert fake.paths[0].startswith("/v1beta/models/gemini-2.5-pro:streamGenerateContent")
    assert fake.requests[0]["generationConfig"] == {"temperature": 0.7,
                                                    "maxOutputTokens": 4096}
    (response,) = [p["functionResponse"] for c in fake.requests[1]["contents"]
                   for p in c["parts"] if "functionResponse" in p]
    assert response["name"] == "Skill"
    assert "# Loaded Skill" in json.dumps(response["response"])
    assert f"{2 * PROMPT_TOKENS} in / {2 * CANDIDATE_TOKENS} out tokens" in result.output
    artifact = tmp_path / "diagrams" / "flowchart-diagram.md"
    expected = reply_for("Create a flowchart diagram for the following topic:")
    assert artifact.read_text().strip() == expected
