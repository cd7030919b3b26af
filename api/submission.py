"""A spec arriving over HTTP (YAML text or a JSON object) loaded like `durable submit`
loads a file: size checked first, then the loader's validation, nothing stored yet."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from api.errors import ApiError
from api.limits import MAX_SPEC_BYTES, too_large
from scheduler.loader import LoadedSpec, load_spec_data, load_spec_text
from scheduler.script import ScriptConfig

SOURCE = "spec"  # what SpecError messages name as the file: "spec: <path>: <problem>"


def spec_size(spec: str | Mapping[str, Any]) -> int:
    if isinstance(spec, str):
        return len(spec.encode("utf-8"))
    return len(json.dumps(spec, separators=(",", ":")).encode("utf-8"))


def load_submitted(spec: str | Mapping[str, Any], variables: Mapping[str, Any] | None = None,
                   provider: str | None = None,
                   script: ScriptConfig | None = None) -> LoadedSpec:
    """The loaded spec; ApiError 413 when too large, SpecError (422) when invalid."""
    size = spec_size(spec)
    if size > MAX_SPEC_BYTES:
        body = too_large("the spec", size, MAX_SPEC_BYTES)["error"]
        raise ApiError(413, body["code"], body["message"], body["details"])
    if isinstance(spec, str):
        return load_spec_text(spec, SOURCE, variables, provider=provider, script=script)
    return load_spec_data(spec, SOURCE, variables, provider=provider, script=script)
