"""`build_model` per provider (settings land where the SDK reads them) and `is_transient`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from typing import Any, cast

import pytest

from strands_durable.errors import DurableError, ProviderError
from strands_durable.provider_policy import ProviderPolicy
from strands_durable.spec.script import ScriptConfig, ScriptRule
from strands_durable.worker.model_wrapper import StopChecked
from strands_durable.worker.providers import (
    SUPPORTED_PROVIDERS,
    ModelConfig,
    build_model,
    is_transient,
)
from strands_durable.worker.providers.scripted import ScriptedModel
from strands_durable.worker.providers.transient import permanent_cause

# The tests that import the provider SDKs (anthropic alone ~2.5 s of CPU) on one xdist
# process, so that they are imported once, not once per process.
pytestmark = pytest.mark.xdist_group("provider-sdks")

SAMPLING = {"temperature": 0.2, "top_p": 0.9, "max_tokens": 77}


def _cfg(provider: str, **kw: Any) -> ModelConfig:
    return ModelConfig(provider=provider, agent_id="writer", **kw)


def _needs(module: str) -> Any:
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None, reason=f"{module} is not installed"
    )


def _built(cfg: ModelConfig, **kwargs: Any) -> Any:
    """The provider's own model, which `build_model` wraps (its turns checked for their
    stop event)."""
    model = build_model(cfg, **kwargs)
    assert isinstance(model, StopChecked)
    return model.inner


def _is_a(model: Any, class_name: str) -> bool:
    """`model` is (a subclass of) the Strands class of that name."""
    return class_name in {klass.__name__ for klass in type(model).__mro__}


@pytest.fixture(autouse=True)
def _openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")


# --- each provider builds with the right settings --------------------------------------


@_needs("boto3")
def test_bedrock() -> None:
    model: Any = _built(
        _cfg("bedrock", model_id="anthropic.claude", region="eu-west-1", **SAMPLING)
    )
    assert _is_a(model, "BedrockModel")
    config = model.get_config()
    assert config["model_id"] == "anthropic.claude"
    assert {k: config[k] for k in SAMPLING} == SAMPLING
    assert model.client.meta.region_name == "eu-west-1"


@_needs("boto3")
def test_bedrock_host_is_the_endpoint_url() -> None:
    model: Any = _built(
        _cfg("bedrock", model_id="m", region="us-east-1", host="https://vpce.example.com"),
        policy=ProviderPolicy(bedrock_hosts="https://vpce.example.com"),
    )
    assert model.client.meta.endpoint_url == "https://vpce.example.com"


@_needs("openai")
def test_openai() -> None:
    model: Any = _built(_cfg("openai", model_id="gpt-4o", host="http://h:1/v1", **SAMPLING),
                        policy=ProviderPolicy(openai_hosts="http://h:1"))
    assert _is_a(model, "OpenAIModel")
    config = model.get_config()  # Strands may add context_window_limit for known models
    assert (config["model_id"], config["params"]) == ("gpt-4o", SAMPLING)
    # the key stays with the SDK (read from the environment), retries stay with us
    assert model.client_args == {"base_url": "http://h:1/v1", "max_retries": 0}


@_needs("openai")
def test_openai_without_host_uses_the_sdk_default_url() -> None:
    model: Any = _built(_cfg("openai", model_id="gpt-4o"))
    assert model.client_args == {"max_retries": 0}
    assert model.get_config()["params"] == {}


@_needs("openai")
def test_openai_without_api_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ProviderError, match=r"'writer'.*OPENAI_API_KEY"):
        build_model(_cfg("openai", model_id="gpt-4o"))


@_needs("anthropic")
def test_anthropic() -> None:
    model: Any = _built(_cfg("anthropic", model_id="claude-x", host="http://h:2", **SAMPLING),
                        policy=ProviderPolicy(anthropic_hosts="http://h:2"))
    assert _is_a(model, "AnthropicModel")
    config = model.get_config()
    assert (config["model_id"], config["max_tokens"]) == ("claude-x", 77)
    assert config["params"] == {"temperature": 0.2, "top_p": 0.9}
    assert str(model.client.base_url).rstrip("/") == "http://h:2"
    assert model.client.max_retries == 0


@_needs("anthropic")
def test_anthropic_max_tokens_defaults_to_4096() -> None:
    model: Any = _built(_cfg("anthropic", model_id="claude-x"))
    assert model.get_config()["max_tokens"] == 4096
    assert model.get_config()["params"] == {}


@_needs("ollama")
def test_ollama() -> None:
    model: Any = _built(_cfg("ollama", model_id="llama3", host="http://h:3", **SAMPLING))
    assert _is_a(model, "OllamaModel")
    assert model.get_config() == {"model_id": "llama3", **SAMPLING}
    assert model.host == "http://h:3"


def test_llamacpp() -> None:
    model: Any = _built(_cfg("llamacpp", host="http://h:4", **SAMPLING))
    assert _is_a(model, "LlamaCppModel")
    assert model.get_config() == {"model_id": "default", "params": SAMPLING}
    assert model.base_url == "http://h:4"


@_needs("litellm")
def test_litellm() -> None:
    model: Any = _built(_cfg("litellm", model_id="openai/gpt-4o", host="http://h:5"),
                        policy=ProviderPolicy(litellm_hosts="http://h:5"))
    assert _is_a(model, "LiteLLMModel")
    assert model.client_args == {"api_base": "http://h:5"}


def test_scripted_defaults_to_an_empty_script() -> None:
    model = _built(_cfg("scripted"))
    assert isinstance(model, ScriptedModel)
    assert model.get_config() == {"agent_id": "writer", "script": ScriptConfig()}


def test_scripted_uses_the_given_script() -> None:
    script = ScriptConfig(delay_s=0.1, rules=(ScriptRule(reply="hi"),))
    assert build_model(_cfg("scripted", script=script)).get_config()["script"] is script


def test_each_build_returns_a_fresh_model() -> None:
    # SDK clients bind to an event loop; a model must never be shared by accident.
    assert build_model(_cfg("llamacpp")) is not build_model(_cfg("llamacpp"))


# --- configuration errors ----------------------------------------------------------------


def test_unknown_provider_lists_the_supported_ones() -> None:
    with pytest.raises(ProviderError) as info:
        build_model(_cfg("gpt5-magic"))
    message = str(info.value)
    assert "'writer'" in message and "'gpt5-magic'" in message
    for name in ("bedrock", "openai", "anthropic", "ollama", "litellm", "llamacpp", "scripted"):
        assert name in message
    assert set(SUPPORTED_PROVIDERS) >= {"bedrock", "scripted", "llamacpp"}


@pytest.mark.parametrize("provider", ["bedrock", "openai", "anthropic", "ollama", "litellm"])
def test_missing_model_id_names_the_agent(provider: str) -> None:
    with pytest.raises(
        ProviderError, match=f"agent 'writer': provider '{provider}' needs a model_id"
    ):
        build_model(_cfg(provider))


@pytest.mark.parametrize(
    ("provider", "sdk", "module"),
    [
        ("bedrock", "boto3", "strands.models.bedrock"),
        ("openai", "openai", "strands.models.openai"),
        ("anthropic", "anthropic", "strands.models.anthropic"),
        ("ollama", "ollama", "strands.models.ollama"),
        ("litellm", "litellm", "strands.models.litellm"),
    ],
)
def test_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, provider: str, sdk: str, module: str
) -> None:
    # A None entry in sys.modules makes `import sdk` fail as if it were not installed;
    # dropping the cached strands module forces it to be imported again.
    monkeypatch.setitem(sys.modules, sdk, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    # A litellm model id routes to an endpoint of its own: one of the keyed providers'.
    model_id = "openai/m" if provider == "litellm" else "m"
    with pytest.raises(ProviderError) as info:
        build_model(_cfg(provider, model_id=model_id))
    message = str(info.value)
    assert f"provider {provider!r} is not available" in message
    assert f"pip install 'strands-durable[{provider}]'" in message
    assert "'writer'" in message
    assert isinstance(info.value, DurableError)


# --- is_transient ------------------------------------------------------------------------


def _transient_cases() -> list[Any]:
    from strands.types.exceptions import (
        ContextWindowOverflowException,
        EventLoopException,
        ModelThrottledException,
    )

    cases: list[Any] = [
        pytest.param(ModelThrottledException("slow down"), True, id="strands-throttled"),
        pytest.param(ContextWindowOverflowException("too long"), False, id="strands-overflow"),
        pytest.param(EventLoopException(ConnectionResetError()), True, id="wrapped-transient"),
        pytest.param(EventLoopException(ValueError("bad")), False, id="wrapped-permanent"),
        pytest.param(ConnectionRefusedError(), True, id="builtin-connection"),
        pytest.param(TimeoutError(), True, id="builtin-timeout"),
        pytest.param(ValueError("nope"), False, id="value-error"),
        pytest.param(ProviderError("misconfigured"), False, id="provider-error"),
        pytest.param(_chained(RuntimeError("outer"), ConnectionError()), True, id="cause-chain"),
        pytest.param(_named("RateLimitError", "litellm.exceptions"), True, id="by-name-absent-pkg"),
        pytest.param(_named("RateLimitError", "myapp.errors"), False, id="same-name-other-pkg"),
        pytest.param(
            _named("ReadTimeoutError", "botocore.exceptions", "HTTPClientError"),
            True,
            id="botocore-by-base-name",
        ),
    ]
    cases += _httpx_cases() + _openai_cases() + _anthropic_cases()
    cases += _ollama_cases() + _botocore_cases()
    return cases


def _chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def _named(name: str, module: str, base_name: str | None = None) -> BaseException:
    """An exception whose class looks like `module.name` without importing `module`."""
    bases: tuple[type, ...] = (Exception,)
    if base_name:
        bases = (type(base_name, (Exception,), {"__module__": module}),)
    return type(name, bases, {"__module__": module})("simulated")


def _httpx_cases() -> list[Any]:
    import httpx

    request = httpx.Request("POST", "http://127.0.0.1/x")

    def status(code: int) -> BaseException:
        response = httpx.Response(code, request=request)
        return httpx.HTTPStatusError("status", request=request, response=response)

    return [
        pytest.param(httpx.ConnectError("refused"), True, id="httpx-connect"),
        pytest.param(httpx.ReadTimeout("slow"), True, id="httpx-read-timeout"),
        pytest.param(httpx.RemoteProtocolError("eof"), True, id="httpx-remote-protocol"),
        pytest.param(httpx.UnsupportedProtocol("ftp"), False, id="httpx-bad-url"),
        pytest.param(status(503), True, id="httpx-503"),
        pytest.param(status(404), False, id="httpx-404"),
    ]


def _sdk_cases(name: str, prefix: str) -> list[Any]:
    """The SDK's errors, each made by a function the test calls: importing the SDKs here
    would cost every pytest process their imports at collection (about 2.5 s for
    anthropic, 1.5 s for openai on 2 cores), whether or not it runs these cases."""
    if importlib.util.find_spec(name) is None:
        return []

    def status(cls_name: str, code: int) -> Callable[[], BaseException]:
        def make() -> BaseException:
            sdk = importlib.import_module(name)
            http = _http_module_of(sdk)
            request = http.Request("POST", "http://127.0.0.1/v1")
            response = http.Response(code, request=request)
            return cast(BaseException, getattr(sdk, cls_name)("e", response=response, body=None))

        return make

    def no_response(cls_name: str) -> Callable[[], BaseException]:
        def make() -> BaseException:
            sdk = importlib.import_module(name)
            request = _http_module_of(sdk).Request("POST", "http://127.0.0.1/v1")
            return cast(BaseException, getattr(sdk, cls_name)(request=request))

        return make

    return [
        pytest.param(status("RateLimitError", 429), True, id=f"{prefix}-429"),
        pytest.param(status("InternalServerError", 500), True, id=f"{prefix}-500"),
        pytest.param(status("APIStatusError", 503), True, id=f"{prefix}-503"),
        pytest.param(status("APIStatusError", 501), False, id=f"{prefix}-501"),
        pytest.param(status("BadRequestError", 400), False, id=f"{prefix}-400"),
        pytest.param(status("AuthenticationError", 401), False, id=f"{prefix}-401"),
        pytest.param(no_response("APIConnectionError"), True, id=f"{prefix}-connection"),
        pytest.param(no_response("APITimeoutError"), True, id=f"{prefix}-timeout"),
    ]


def _openai_cases() -> list[Any]:
    return _sdk_cases("openai", "openai")


def _anthropic_cases() -> list[Any]:
    cases = _sdk_cases("anthropic", "anthropic")
    if not cases:
        return []
    return [*cases, pytest.param(_anthropic_overloaded, True, id="anthropic-529")]


def _anthropic_overloaded() -> BaseException:
    """Anthropic's 529 (overloaded)."""
    import anthropic

    request = _http_module_of(anthropic).Request("POST", "http://127.0.0.1/v1")
    response = _http_module_of(anthropic).Response(529, request=request)
    return anthropic.APIStatusError("overloaded", response=response, body=None)


def _http_module_of(sdk: Any) -> Any:
    """The httpx flavour the SDK is built on (recent SDKs use the `httpx2` fork)."""
    exceptions = sys.modules[f"{sdk.__name__}._exceptions"]
    return getattr(exceptions, "httpx2", None) or exceptions.httpx


def _ollama_error(*args: Any) -> Callable[[], BaseException]:
    def make() -> BaseException:
        import ollama

        return ollama.ResponseError(*args)

    return make


def _ollama_cases() -> list[Any]:
    if importlib.util.find_spec("ollama") is None:
        return []
    return [
        pytest.param(_ollama_error("busy", 503), True, id="ollama-503"),
        pytest.param(_ollama_error("slow down", 429), True, id="ollama-429"),
        pytest.param(_ollama_error("model not found", 404), False, id="ollama-404"),
        pytest.param(_ollama_error("error inside the stream"), False, id="ollama-no-status"),
    ]


def _botocore_cases() -> list[Any]:
    if importlib.util.find_spec("botocore") is None:
        return []
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    def client_error(code: str) -> BaseException:
        return ClientError({"Error": {"Code": code, "Message": code}}, "ConverseStream")

    return [
        pytest.param(client_error("ThrottlingException"), True, id="aws-throttling"),
        pytest.param(client_error("ServiceUnavailableException"), True, id="aws-unavailable"),
        pytest.param(client_error("ValidationException"), False, id="aws-validation"),
        pytest.param(client_error("AccessDeniedException"), False, id="aws-denied"),
        pytest.param(EndpointConnectionError(endpoint_url="https://x"), True, id="aws-endpoint"),
        pytest.param(ReadTimeoutError(endpoint_url="https://x"), True, id="aws-read-timeout"),
    ]


def _made(error: BaseException | Callable[[], BaseException]) -> BaseException:
    """The error of a case; an SDK's is made now (`_sdk_cases`)."""
    return error if isinstance(error, BaseException) else error()


@pytest.mark.parametrize(("error", "expected"), _transient_cases())
def test_is_transient(error: BaseException | Callable[[], BaseException],
                      expected: bool) -> None:
    assert is_transient(_made(error)) is expected


@pytest.mark.parametrize(("error", "expected"), _transient_cases())
def test_a_transient_error_is_never_permanent(error: BaseException | Callable[[], BaseException],
                                              expected: bool) -> None:
    if expected:
        assert permanent_cause(_made(error)) is None


def _permanent_cases() -> list[Any]:
    import httpx

    request = httpx.Request("POST", "http://127.0.0.1/x")

    def status(code: int) -> BaseException:
        response = httpx.Response(code, request=request)
        return httpx.HTTPStatusError("status", request=request, response=response)

    cases: list[Any] = [
        pytest.param(ProviderError("no model_id"), "misconfigured", id="provider-error"),
        pytest.param(status(401), "HTTP 401: the credentials are missing or were rejected",
                     id="httpx-401"),
        pytest.param(status(404), "HTTP 404: the model (or endpoint) was not found",
                     id="httpx-404"),
        pytest.param(_chained(RuntimeError("outer"), status(403)), "HTTP 403", id="wrapped-403"),
        pytest.param(_named("NoCredentialsError", "botocore.exceptions"),
                     "no AWS credentials", id="aws-no-credentials-by-name"),
        # Unknown or transient: the durable retry policy decides, as before.
        pytest.param(status(503), None, id="httpx-503"),
        pytest.param(status(429), None, id="httpx-429"),
        pytest.param(ValueError("nope"), None, id="value-error"),
        pytest.param(ConnectionRefusedError(), None, id="connection-refused"),
    ]
    if importlib.util.find_spec("botocore") is not None:
        from botocore.exceptions import ClientError

        def client_error(code: str) -> BaseException:
            return ClientError({"Error": {"Code": code, "Message": code}}, "ConverseStream")

        cases += [
            pytest.param(client_error("AccessDeniedException"), "AccessDeniedException",
                         id="aws-denied"),
            pytest.param(client_error("ResourceNotFoundException"), "model was not found",
                         id="aws-no-model"),
            pytest.param(client_error("ThrottlingException"), None, id="aws-throttling"),
        ]
    if importlib.util.find_spec("ollama") is not None:
        cases.append(pytest.param(_ollama_error("model not found", 404), "HTTP 404",
                                  id="ollama-404"))
    return cases


@pytest.mark.parametrize(("error", "expected"), _permanent_cases())
def test_permanent_cause_names_why_no_retry_can_help(
        error: BaseException | Callable[[], BaseException], expected: str | None) -> None:
    cause = permanent_cause(_made(error))
    if expected is None:
        assert cause is None
    else:
        assert cause is not None and expected in cause


# --- one list of providers ---------------------------------------------------------------


def test_the_spec_accepts_exactly_the_providers_the_worker_builds() -> None:
    """strands_durable.providers is the one list: the spec's validation takes its names
    from it, and every name has a builder module in worker/providers/."""
    from strands_durable.errors import SpecError
    from strands_durable.providers import PROVIDERS
    from strands_durable.spec.agents import check_providers
    from strands_durable.worker.providers import BUILDERS

    assert tuple(BUILDERS) == PROVIDERS == SUPPORTED_PROVIDERS
    for name in PROVIDERS:
        assert callable(BUILDERS[name])
        check_providers({"runtime": {"provider": name}, "agents": {}}, "spec")
    with pytest.raises(SpecError, match="unsupported provider 'gpt5-magic'"):
        check_providers({"runtime": {"provider": "gpt5-magic"}, "agents": {}}, "spec")
