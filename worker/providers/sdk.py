"""Loading a provider's Strands model class, whose SDK is an optional extra: it is
imported only when a model is built, and a missing SDK says which extra to install.

And watching a provider's wire for its stop event, where Strands' class would make one
up: Strands turns a stream that ended without OpenAI's `finish_reason` or Gemini's
`finishReason` into a `messageStop` of `end_turn`, so a reply cut short would pass for a
whole one. `Watched` wraps the SDK's client so that its stream of chunks is `StopWatched`:
it raises `ProviderStreamCutShort` where it ends without a chunk that carries the stop,
inside Strands' own loop. worker/model_wrapper.py's `StopChecked` covers the providers
whose missing stop Strands does not hide."""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from strands_durable.errors import ProviderError, ProviderStreamCutShort
from strands_durable.provider_policy import host_setting
from strands_durable.worker.providers.config import ModelConfig
from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

__all__ = ["Delegate", "ProviderStreamMalformed", "StopWatched", "Watched",
           "guarded_transport", "load_class", "malformed", "require_model_id"]


def require_model_id(cfg: ModelConfig) -> None:
    if not cfg.model_id:
        raise ProviderError(f"agent {cfg.agent_id!r}: provider {cfg.provider!r} needs a model_id")


def load_class(cfg: ModelConfig, module_name: str, class_name: str, extra: str | None) -> Any:
    """`class_name` of the strands.models module `module_name`; `extra` is the
    strands-durable extra that installs its SDK (None: a core dependency suffices)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        install = (
            f"pip install 'strands-durable[{extra}]'" if extra else "pip install -U strands-agents"
        )
        raise ProviderError(
            f"agent {cfg.agent_id!r}: provider {cfg.provider!r} is not available "
            f"({exc.name or exc} cannot be imported); install it with: {install}"
        ) from exc
    return getattr(module, class_name)


# A model's whole reply as read, at most: a keyless server a spec names may be anyone's,
# and one that streams without end must not fill the worker before the model timeout.
MAX_REPLY_BYTES = 32 * 1024 * 1024


def guarded_transport(cfg: ModelConfig) -> httpx.AsyncHTTPTransport:
    """For a keyless server a spec names: public addresses only, checked and pinned
    where each connection opens (redirects too), no credential header, and a reply of at
    most MAX_REPLY_BYTES, uncompressed; the provider's DURABLE_<P>_HOSTS lists the
    private ones it may reach (and where a key may go), and a listed host never gets
    here."""
    return guarded_async_transport(Reach((), host_setting(cfg.provider)),
                                   strip_credentials=True, max_body_bytes=MAX_REPLY_BYTES)


class Delegate:
    """`target` as it is, but for the attributes a subclass defines."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_target" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self._target, name)


class Watched(Delegate):
    """`target` as it is, but for the coroutine method at `path` (attribute names from
    `target`), whose result goes through `wrap(result, the call's keyword arguments)`."""

    def __init__(self, target: Any, path: tuple[str, ...],
                 wrap: Callable[[Any, dict[str, Any]], Any]) -> None:
        super().__init__(target)
        self._path = path
        self._wrap = wrap

    def __getattr__(self, name: str) -> Any:
        value = super().__getattr__(name)
        if name != self._path[0]:
            return value
        if len(self._path) > 1:
            return Watched(value, self._path[1:], self._wrap)
        method: Callable[..., Awaitable[Any]] = value

        async def call(*args: Any, **kwargs: Any) -> Any:
            return self._wrap(await method(*args, **kwargs), kwargs)

        return call


class ProviderStreamMalformed(ValueError):
    """A line of a model's reply stream that its SDK could not read as JSON: the reply is
    broken, so it is no reply. The message names the provider and where the line broke,
    never the line (it may hold the reply's text)."""

    def __init__(self, provider: str, model_id: str | None, problem: str) -> None:
        self.provider = provider
        self.model_id = model_id
        super().__init__(f"the {provider} reply stream was malformed: {problem}")


def malformed(exc: BaseException, provider: str, model_id: str | None
              ) -> ProviderStreamMalformed | None:
    """`exc` as a `ProviderStreamMalformed`, if it is (or wraps, as google-genai's
    UnknownApiResponseError does) a JSON decoding error; else None."""
    for error in (exc, exc.__cause__):
        if isinstance(error, json.JSONDecodeError):
            return ProviderStreamMalformed(
                provider, model_id, f"a line is not JSON ({error.msg} at line "
                                    f"{error.lineno} column {error.colno})")
    return None


class StopWatched:
    """An SDK's stream of reply chunks that raises `ProviderStreamCutShort` if it ends
    before a chunk `is_stop` accepts; iterated again after a stop (Strands reads the usage
    that follows), it goes on where it was. Anything else is the stream's own."""

    def __init__(self, stream: Any, is_stop: Callable[[Any], bool], provider: str,
                 model_id: str | None) -> None:
        self._stream = stream
        self._chunks: AsyncIterator[Any] = aiter(stream)
        self._is_stop = is_stop
        self._stopped = False
        self._provider = provider
        self._model_id = model_id

    def __aiter__(self) -> StopWatched:
        return self

    async def __anext__(self) -> Any:
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            if not self._stopped:
                raise ProviderStreamCutShort(self._provider, self._model_id) from None
            raise
        except ValueError as exc:  # a bare JSONDecodeError would name no provider
            if (named := malformed(exc, self._provider, self._model_id)) is not None:
                raise named from exc
            raise
        self._stopped = self._stopped or self._is_stop(chunk)
        return chunk

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or "_stream" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self._stream, name)
