"""Loading a provider's Strands model class, whose SDK is an optional extra: it is
imported only when a model is built, and a missing SDK says which extra to install."""

from __future__ import annotations

import importlib
from typing import Any

import httpx

from strands_durable.errors import ProviderError
from strands_durable.provider_policy import host_setting
from strands_durable.worker.providers.config import ModelConfig
from strands_durable.worker.tools.net_guard import Reach, guarded_async_transport

__all__ = ["guarded_transport", "load_class", "require_model_id"]


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


def guarded_transport(cfg: ModelConfig) -> httpx.AsyncHTTPTransport:
    """For a keyless server a spec names: public addresses only, checked and pinned
    where each connection opens (redirects too), and no credential header; the provider's
    DURABLE_<P>_HOSTS lists the private ones it may reach (and where a key may go), and a
    listed host never gets here."""
    return guarded_async_transport(Reach((), host_setting(cfg.provider)),
                                   strip_credentials=True)
