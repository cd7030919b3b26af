"""Model providers: a `ModelConfig` (from the spec's runtime) -> a Strands `Model`.

Each real provider's SDK is an optional extra, so provider modules are imported only
when that provider is asked for; a missing SDK becomes a `ProviderError` that says
which extra to install. `is_transient` decides which provider errors are worth
retrying in place (the caller owns the retry loop; see `worker.agent_call`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from strands.models.model import Model

from strands_durable.errors import ProviderError
from strands_durable.scheduler.spec.script import ScriptConfig
from strands_durable.worker.scripted_model import ScriptedModel

# Anthropic's API requires max_tokens; Strands has no default for it.
ANTHROPIC_DEFAULT_MAX_TOKENS = 4096


@dataclass(frozen=True)
class ModelConfig:
    provider: str
    agent_id: str
    model_id: str | None = None
    host: str | None = None
    region: str | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    script: ScriptConfig | None = None


@dataclass(frozen=True)
class _Provider:
    module: str  # the strands.models module that holds the class
    cls: str
    extra: str | None  # the strands-durable extra that installs the SDK
    build: Callable[[Any, ModelConfig], Model]
    needs_model_id: bool = True


def build_model(cfg: ModelConfig) -> Model:
    """A fresh Strands model for `cfg`; raises `ProviderError` on any config problem."""
    if cfg.provider == "scripted":
        return ScriptedModel(cfg.agent_id, cfg.script if cfg.script is not None else ScriptConfig())
    provider = _PROVIDERS.get(cfg.provider)
    if provider is None:
        raise ProviderError(
            f"agent {cfg.agent_id!r}: unknown provider {cfg.provider!r}; "
            f"supported: {', '.join(SUPPORTED_PROVIDERS)}"
        )
    if provider.needs_model_id and not cfg.model_id:
        raise ProviderError(f"agent {cfg.agent_id!r}: provider {cfg.provider!r} needs a model_id")
    model_cls = _load_class(cfg, provider)
    return provider.build(model_cls, cfg)


def _load_class(cfg: ModelConfig, provider: _Provider) -> Any:
    try:
        module = importlib.import_module(provider.module)
    except ImportError as exc:
        install = (
            f"pip install 'strands-durable[{provider.extra}]'"
            if provider.extra
            else "pip install -U strands-agents"
        )
        raise ProviderError(
            f"agent {cfg.agent_id!r}: provider {cfg.provider!r} is not available "
            f"({exc.name or exc} cannot be imported); install it with: {install}"
        ) from exc
    return getattr(module, provider.cls)


def _sampling(cfg: ModelConfig, *, with_max_tokens: bool = True) -> dict[str, Any]:
    """The sampling settings that are set, so provider defaults apply to the rest."""
    values: dict[str, Any] = {"temperature": cfg.temperature, "top_p": cfg.top_p}
    if with_max_tokens:
        values["max_tokens"] = cfg.max_tokens
    return {key: value for key, value in values.items() if value is not None}


def _build_bedrock(cls: Any, cfg: ModelConfig) -> Model:
    kwargs: dict[str, Any] = {"model_id": cfg.model_id, **_sampling(cfg)}
    if cfg.region:
        kwargs["region_name"] = cfg.region
    if cfg.host:  # e.g. a VPC (PrivateLink) endpoint
        kwargs["endpoint_url"] = cfg.host
    return cast(Model, cls(**kwargs))


def _build_openai(cls: Any, cfg: ModelConfig) -> Model:
    # The SDK reads OPENAI_API_KEY itself (the key never enters our config); it would
    # only complain at the first request, so fail at build time with a clear message.
    if not os.environ.get("OPENAI_API_KEY"):
        raise ProviderError(
            f"agent {cfg.agent_id!r}: provider 'openai' needs OPENAI_API_KEY in the "
            "environment (any value for a local OpenAI-compatible server)"
        )
    # max_retries=0: call_agent owns retries, the SDK's own would multiply them.
    client_args: dict[str, Any] = {"max_retries": 0}
    if cfg.host:
        client_args["base_url"] = cfg.host
    return cast(Model, cls(client_args=client_args, model_id=cfg.model_id, params=_sampling(cfg)))


def _build_anthropic(cls: Any, cfg: ModelConfig) -> Model:
    client_args: dict[str, Any] = {"max_retries": 0}  # see _build_openai
    if cfg.host:
        client_args["base_url"] = cfg.host
    return cast(
        Model,
        cls(
            client_args=client_args,
            model_id=cfg.model_id,
            max_tokens=cfg.max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
            params=_sampling(cfg, with_max_tokens=False),
        ),
    )


def _build_ollama(cls: Any, cfg: ModelConfig) -> Model:
    return cast(Model, cls(cfg.host, model_id=cfg.model_id, **_sampling(cfg)))


def _build_litellm(cls: Any, cfg: ModelConfig) -> Model:
    client_args = {"api_base": cfg.host} if cfg.host else {}
    return cast(Model, cls(client_args=client_args, model_id=cfg.model_id, params=_sampling(cfg)))


def _build_llamacpp(cls: Any, cfg: ModelConfig) -> Model:
    kwargs: dict[str, Any] = {"params": _sampling(cfg)}
    if cfg.host:
        kwargs["base_url"] = cfg.host
    if cfg.model_id:  # llama.cpp serves one model; Strands defaults the id to "default"
        kwargs["model_id"] = cfg.model_id
    return cast(Model, cls(**kwargs))


_PROVIDERS: dict[str, _Provider] = {
    "bedrock": _Provider("strands.models.bedrock", "BedrockModel", "bedrock", _build_bedrock),
    "openai": _Provider("strands.models.openai", "OpenAIModel", "openai", _build_openai),
    "anthropic": _Provider(
        "strands.models.anthropic", "AnthropicModel", "anthropic", _build_anthropic
    ),
    "ollama": _Provider("strands.models.ollama", "OllamaModel", "ollama", _build_ollama),
    "litellm": _Provider("strands.models.litellm", "LiteLLMModel", "litellm", _build_litellm),
    # llama.cpp needs only httpx, a core dependency: no extra.
    "llamacpp": _Provider(
        "strands.models.llamacpp", "LlamaCppModel", None, _build_llamacpp, needs_model_id=False
    ),
}
SUPPORTED_PROVIDERS: tuple[str, ...] = (*_PROVIDERS, "scripted")


# --- transient errors -------------------------------------------------------------

# HTTP statuses worth a retry: timeout, rate limit, server trouble (not 501/505,
# which will not change on a retry), Anthropic's 529 "overloaded".
_TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504, 529})

# Transient classes by (top-level package, class name): matched on the class and its
# bases by name so the check works whether or not the package is installed.
_HTTP_NAMES = frozenset({"TimeoutException", "NetworkError", "RemoteProtocolError"})
_SDK_NAMES = frozenset(
    {
        "APIConnectionError",  # includes APITimeoutError
        "RateLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "RetryableError",
        "Timeout",
    }
)
_TRANSIENT_NAMES: dict[str, frozenset[str]] = {
    "strands": frozenset({"ModelThrottledException"}),
    "httpx": _HTTP_NAMES,
    "httpx2": _HTTP_NAMES,  # the httpx fork that recent openai/anthropic SDKs use
    "httpcore": _HTTP_NAMES,
    "openai": _SDK_NAMES,
    "anthropic": _SDK_NAMES,
    "litellm": _SDK_NAMES,
    # botocore's ConnectionError/HTTPClientError cover connect/read timeouts and
    # closed connections (they do not subclass the builtin ConnectionError).
    "botocore": frozenset({"ConnectionError", "HTTPClientError", "EndpointConnectionError"}),
}
_TRANSIENT_AWS_CODES = frozenset(
    {
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
    }
)
# Errors that look transient by their cause but are not: retrying changes nothing.
_NEVER_TRANSIENT_NAMES = frozenset({"ContextWindowOverflowException", "MaxTokensReachedException"})


def is_transient(exc: BaseException) -> bool:
    """True if `exc` (or an exception it wraps) is a provider error worth retrying."""
    return any(_is_transient_one(error) for error in _chain(exc))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it explicitly wraps (`raise ... from`, Strands' EventLoopException)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ProviderError) or type(current).__name__ in _NEVER_TRANSIENT_NAMES:
            return
        seen.add(id(current))
        yield current
        wrapped = getattr(current, "original_exception", None)
        current = wrapped if isinstance(wrapped, BaseException) else current.__cause__


def _is_transient_one(exc: BaseException) -> bool:
    status = _status_code(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS
    aws_code = _aws_error_code(exc)
    if aws_code is not None:
        return aws_code in _TRANSIENT_AWS_CODES
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    return any(
        klass.__name__ in _TRANSIENT_NAMES.get(klass.__module__.partition(".")[0], ())
        for klass in type(exc).__mro__
    )


def _status_code(exc: BaseException) -> int | None:
    """The HTTP status an SDK error carries (openai/anthropic/ollama/httpx), if any."""
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(getattr(exc, "response", None), "status_code", None)
    # ollama uses -1 for "no HTTP status" (an error inside a 200 stream).
    return status if isinstance(status, int) and status > 0 else None


def _aws_error_code(exc: BaseException) -> str | None:
    """The error code of a botocore ClientError, if `exc` is one."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return None
    code = response.get("Error", {}).get("Code")
    return code if isinstance(code, str) else None
