"""A spec arriving over HTTP (YAML text or a JSON object) loaded like `durable submit`
loads a file: size checked first, then the loader's validation, nothing stored yet.

Loading and planning a spec is CPU work bounded by the limits (sessions/settings.py),
not by the event loop: `prepare_submission` runs it in a worker thread, a few at a
time, so /healthz and every other request keep being answered meanwhile."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from strands_durable.api.errors import ApiError
from strands_durable.api.limits import too_large
from strands_durable.scheduler.spec.loader import (
    LoadedSpec,
    check_data_shape,
    load_spec_data,
    load_spec_text,
)
from strands_durable.scheduler.spec.script import ScriptConfig
from strands_durable.settings import Limits, current_limits

SOURCE = "spec"  # what SpecError messages name as the file: "spec: <path>: <problem>"
# Specs loaded and planned at once; more wait their turn (each is over within about
# DURABLE_RENDER_TIMEOUT_S per template, so the wait is bounded too).
LOADING_THREADS = 4
_pool = ThreadPoolExecutor(LOADING_THREADS, thread_name_prefix="durable-spec")
T = TypeVar("T")


def spec_size(spec: str | Mapping[str, Any]) -> int:
    if isinstance(spec, str):
        # A lone surrogate (which JSON can carry) is counted here and refused by the
        # loader with a clear message.
        return len(spec.encode("utf-8", "surrogatepass"))
    return len(json.dumps(spec, separators=(",", ":")).encode("utf-8"))


def load_submitted(spec: str | Mapping[str, Any], variables: Mapping[str, Any] | None = None,
                   provider: str | None = None, script: ScriptConfig | None = None,
                   limits: Limits | None = None) -> LoadedSpec:
    """The loaded spec; ApiError 413 when too large, SpecError (422) when invalid."""
    limits = limits or current_limits()
    if not isinstance(spec, str):
        # Shape (and valid Unicode) first: json.dumps recurses into it.
        check_data_shape(spec, SOURCE, "", limits)
    if variables:
        check_data_shape(dict(variables), SOURCE, "variables", limits)
    size = spec_size(spec)
    if size > limits.max_spec_bytes:
        body = too_large("the spec", size, limits.max_spec_bytes)["error"]
        raise ApiError(413, body["code"], body["message"] + " (DURABLE_MAX_SPEC_BYTES)",
                       body["details"])
    if isinstance(spec, str):
        return load_spec_text(spec, SOURCE, variables, provider=provider, script=script,
                              limits=limits)
    return load_spec_data(spec, SOURCE, variables, provider=provider, script=script,
                          limits=limits)


async def off_loop(work: Callable[[], T]) -> T:
    """Run CPU-bound spec work in a thread, at most LOADING_THREADS at once."""
    return await asyncio.get_running_loop().run_in_executor(_pool, work)
