"""Google Gemini through the Gemini API (extra: gemini), as strands-cli builds it: the
model id defaults to gemini-2.5-flash and max_tokens is Gemini's max_output_tokens.

The SDK (google-genai) reads the key itself, GOOGLE_API_KEY before GEMINI_API_KEY, so it
never enters our config. The endpoint is the spec's `host`, else the SDK's own
GOOGLE_GEMINI_BASE_URL, else Google's (a proxy, or a local fake in the tests).

Strands reports a stream that ended without a `finishReason` as a whole reply; here the
client's streams must end with one (or with a blocked prompt's `blockReason`, a whole
answer too), or they end in `ProviderStreamCutShort` (worker/providers/sdk.py)."""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import AsyncIterator
from typing import Any, cast

from strands.models.model import Model

from strands_durable.errors import ProviderError
from strands_durable.worker.providers.config import ModelConfig, sampling
from strands_durable.worker.providers.sdk import StopWatched, Watched, load_class

__all__ = ["GEMINI_DEFAULT_MODEL_ID", "GEMINI_KEY_VARIABLES", "build"]

# strands-cli's default (runtime/providers.py, create_gemini_model).
GEMINI_DEFAULT_MODEL_ID = "gemini-2.5-flash"
# The variables google-genai reads the key from, in its order of precedence.
GEMINI_KEY_VARIABLES: tuple[str, ...] = ("GOOGLE_API_KEY", "GEMINI_API_KEY")


def build(cfg: ModelConfig) -> Model:
    cls = _finish_watched(load_class(cfg, "strands.models.gemini", "GeminiModel", "gemini"))
    # The SDK would only complain when the first step calls it: fail at build time.
    if not any(os.environ.get(name) for name in GEMINI_KEY_VARIABLES):
        raise ProviderError(
            f"agent {cfg.agent_id!r}: provider 'gemini' needs GOOGLE_API_KEY or "
            "GEMINI_API_KEY in the environment (any value for a local Gemini-compatible "
            "server)"
        )
    # One attempt: call_agent owns retries. Without retry_options google-genai's aiohttp
    # transport would retry a refused connection itself, after sleeping 1 to 10 s.
    http_options: dict[str, Any] = {"retry_options": {"attempts": 1}}
    if cfg.host:
        http_options["base_url"] = cfg.host
    client_args: dict[str, Any] = {"http_options": http_options}
    params = sampling(cfg, with_max_tokens=False)
    if cfg.max_tokens is not None:
        params["max_output_tokens"] = cfg.max_tokens  # GenerateContentConfig's name
    return cast(
        Model,
        cls(
            client_args=client_args,
            model_id=cfg.model_id or GEMINI_DEFAULT_MODEL_ID,
            params=params,
        ),
    )


@functools.cache
def _finish_watched(base: type[Any]) -> type[Any]:
    """Strands' GeminiModel class `base`, its streams watched for a `finishReason`, each
    request's client closed when the request ends."""

    class FinishWatchedGeminiModel(base):
        async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            # Strands makes a client per request and leaves it to the garbage collector,
            # whose google-genai finalizer schedules the close on whatever loop runs then
            # (in one process running loop after loop: "Event loop is closed"). Each
            # request here is given its own client, closed when the request ends.
            client = base._get_client(self)
            model_id = str(self.config.get("model_id") or "") or None

            def watch(stream: Any, _request: dict[str, Any]) -> Any:
                return StopWatched(stream, _finished, "gemini", model_id)

            per_request = copy.copy(self)
            per_request._custom_client = Watched(
                client, ("aio", "models", "generate_content_stream"), watch)
            try:
                async for event in base.stream(per_request, *args, **kwargs):
                    yield event
            finally:
                await client.aio.aclose()

    return FinishWatchedGeminiModel


def _finished(chunk: Any) -> bool:
    """A GenerateContentResponse that ends its candidate, or refuses the prompt."""
    feedback = getattr(chunk, "prompt_feedback", None)
    return bool(getattr(feedback, "block_reason", None)) or any(
        getattr(candidate, "finish_reason", None)
        for candidate in getattr(chunk, "candidates", None) or ())
