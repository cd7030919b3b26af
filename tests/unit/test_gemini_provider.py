"""Provider gemini, built as strands-cli builds it (runtime/providers.py,
create_gemini_model): its settings, its key, its missing SDK, and which google-genai
errors are worth a retry. The wire API is tests/integration/test_gemini_http.py."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import REPO
from helpers.cli import durable

from strands_durable.errors import ProviderError, SpecError
from strands_durable.provider_policy import ProviderPolicy
from strands_durable.spec.loader import load_spec_data
from strands_durable.worker.providers import ModelConfig, build_model, is_transient
from strands_durable.worker.providers.credentials import check_credentials
from strands_durable.worker.providers.transient import permanent_cause

# Imported where used: google-genai costs every pytest process about 0.9 s at collection.
if importlib.util.find_spec("google.genai") is None:
    pytest.skip("google-genai missing", allow_module_level=True)

# The tests that import the provider SDKs (anthropic alone ~2.5 s of CPU) on one xdist
# process, so that they are imported once, not once per process.
pytestmark = pytest.mark.xdist_group("provider-sdks")

SPEC = """
version: 0
name: keyless-gemini
runtime: {provider: gemini}
agents:
  writer: {prompt: "You write."}
pattern: {type: chain, config: {steps: [{agent: writer, input: "hi"}]}}
"""


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def _cfg(**settings: Any) -> ModelConfig:
    return ModelConfig(provider="gemini", agent_id="writer", **settings)


def test_defaults_are_strands_clis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    model: Any = build_model(_cfg()).inner  # the provider's own, its turns checked
    assert "GeminiModel" in {klass.__name__ for klass in type(model).__mro__}
    assert model.get_config()["model_id"] == "gemini-2.5-flash"
    assert model.get_config()["params"] == {}  # unset: Gemini's own defaults
    # The SDK reads the key itself; our options only pin one attempt per call.
    assert model.client_args == {"http_options": {"retry_options": {"attempts": 1}}}


def test_inference_params_and_host_map_as_strands_cli_maps_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k")
    model: Any = build_model(_cfg(model_id="gemini-2.5-pro", temperature=0.7, top_p=0.9,
                                  max_tokens=2048, host="http://proxy:8080"),
                             policy=ProviderPolicy(gemini_hosts="http://proxy:8080")).inner
    config = model.get_config()
    assert config["model_id"] == "gemini-2.5-pro"
    assert config["params"] == {"temperature": 0.7, "top_p": 0.9, "max_output_tokens": 2048}
    assert model.client_args["http_options"]["base_url"] == "http://proxy:8080"


def test_a_missing_key_is_a_clear_provider_error() -> None:
    with pytest.raises(ProviderError) as info:
        build_model(_cfg())
    message = str(info.value)
    assert "agent 'writer'" in message and "provider 'gemini'" in message
    assert "GOOGLE_API_KEY or GEMINI_API_KEY" in message
    assert permanent_cause(info.value) == "the provider is misconfigured"


def test_durable_run_refuses_gemini_without_a_key(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_REDIS_URL", raising=False)
    spec = tmp_path / "keyless.yaml"
    spec.write_text(SPEC)
    result = CliRunner().invoke(durable(), ["run", str(spec)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "runtime.provider" in flat and "agent 'writer'" in flat
    assert "GOOGLE_API_KEY or GEMINI_API_KEY" in flat and "Traceback" not in flat


@pytest.mark.parametrize("variable", ["GOOGLE_API_KEY", "GEMINI_API_KEY"])
def test_either_key_variable_suffices(variable: str) -> None:
    import yaml

    loaded = load_spec_data(yaml.safe_load(SPEC))
    check_credentials(loaded.spec, "s", {variable: "k"})
    with pytest.raises(SpecError):
        check_credentials(loaded.spec, "s", {variable: ""})


def test_the_sdk_is_imported_only_when_a_model_is_built() -> None:
    code = ("import sys, strands_durable.worker.providers as p, strands_durable.worker; "
            "assert 'google.genai' not in sys.modules, 'imported early'; "
            "p.build_model(p.ModelConfig(provider='gemini', agent_id='a')); "
            "assert 'google.genai' in sys.modules")
    env = {"PATH": "/usr/bin:/bin", "GOOGLE_API_KEY": "k"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k")
    import google

    # `from google import genai` finds an imported submodule as an attribute first.
    monkeypatch.delattr(google, "genai", raising=False)
    monkeypatch.setitem(sys.modules, "google.genai", None)
    monkeypatch.delitem(sys.modules, "strands.models.gemini", raising=False)
    with pytest.raises(ProviderError) as info:
        build_model(_cfg())
    message = str(info.value)
    assert "provider 'gemini' is not available" in message
    assert "pip install 'strands-durable[gemini]'" in message


# --- which google-genai errors are worth a retry -------------------------------------
def _api_error(code: int, status: str, reason: str | None = None) -> Exception:
    body: dict[str, Any] = {"error": {"code": code, "message": "m", "status": status}}
    if reason:
        body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                     "reason": reason, "domain": "googleapis.com"}]
    from google.genai import errors as genai_errors

    cls = genai_errors.ClientError if code < 500 else genai_errors.ServerError
    return cls(code, body, None)  # as from aiohttp: no response.status_code


@pytest.mark.parametrize(("code", "status"), [(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"),
                                              (503, "UNAVAILABLE"), (504, "DEADLINE_EXCEEDED")])
def test_throttling_and_server_trouble_are_transient(code: int, status: str) -> None:
    error = _api_error(code, status)
    assert is_transient(error) and permanent_cause(error) is None


@pytest.mark.parametrize(("code", "status", "why"), [
    (400, "INVALID_ARGUMENT", "HTTP 400: the request was rejected as invalid"),
    (401, "UNAUTHENTICATED", "HTTP 401: the credentials are missing or were rejected"),
    (403, "PERMISSION_DENIED", "HTTP 403: the credentials may not use this model"),
    (404, "NOT_FOUND", "HTTP 404: the model (or endpoint) was not found"),
])
def test_client_errors_are_permanent(code: int, status: str, why: str) -> None:
    error = _api_error(code, status)
    assert not is_transient(error)
    assert permanent_cause(error) == f"permanent provider error, {why}"


def test_a_rejected_api_key_is_named_though_gemini_says_400() -> None:
    error = _api_error(400, "INVALID_ARGUMENT", reason="API_KEY_INVALID")
    assert permanent_cause(error) == "permanent provider error, HTTP 400: the API key was rejected"


def test_aiohttp_connection_trouble_is_transient() -> None:
    aiohttp = pytest.importorskip("aiohttp")
    assert is_transient(aiohttp.ServerDisconnectedError())
    assert is_transient(aiohttp.ClientPayloadError("truncated"))
    assert is_transient(aiohttp.ClientConnectionError("refused"))
    assert not is_transient(aiohttp.ClientError("other"))
