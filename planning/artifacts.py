"""Artifacts: `outputs.artifacts` rendered when a session completes, and written to a
directory only on request, never outside it."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from strands_durable.errors import InvalidInput, TemplateError
from strands_durable.patterns import pattern_for
from strands_durable.settings import Limits, current_limits
from strands_durable.spec.cross_checks import ARTIFACT_NAMES
from strands_durable.spec.model import Spec
from strands_durable.spec.templates import KNOWN_GLOBALS, render, undeclared_names


class ArtifactPathError(InvalidInput):
    """An artifact path would land outside the output directory."""

    code = "invalid_artifact_path"


TraceSource = Callable[[int], str]
"""The session's `{{ TRACE }}` JSON cut to at most so many bytes (planning/trace.py)."""


def render_artifacts(spec: Spec, context: Mapping[str, Any], limits: Limits | None = None,
                     trace: TraceSource | None = None) -> dict[str, str]:
    """{rendered path: rendered content}; raises TemplateError naming the artifact.

    `context` is the planner's (strands-cli's variables + execution_context). On top,
    as strands-cli's artifact writer and graph executor give them: `TRACE` (the
    session's trace as strands-cli renders it, from `trace`; "" without one: telemetry
    off), `name` (the spec's) and `timestamp` (now, ISO 8601 UTC). The context wins
    over these, as variables and execution_context do in strands-cli.

    An artifact may be up to DURABLE_MAX_ARTIFACT_BYTES (its template renders with
    that as its character budget); a larger one is a TemplateError naming it. TRACE
    gets what the artifact's other text leaves of it: its oldest spans are evicted
    to fit, as strands-cli evicts past its span limit.
    """
    outputs = spec.outputs
    if outputs is None:
        return {}
    full = {"TRACE": "", "name": spec.name, "timestamp": datetime.now(UTC).isoformat(),
            **context}
    limits = limits or current_limits()
    rendered: dict[str, str] = {}
    for i, artifact in enumerate(outputs.artifacts):
        path = artifact_name(render(artifact.path, full, f"outputs.artifacts[{i}].path",
                                    limits).strip())
        where = f"outputs.artifacts[{i}].from"
        body = _render_body(artifact.from_, full, where, limits, trace)
        size = len(body.encode("utf-8"))
        if size > limits.max_artifact_bytes:
            raise TemplateError(where, f"the artifact is {size:,} bytes; the limit is "
                                f"{limits.max_artifact_bytes:,} (DURABLE_MAX_ARTIFACT_BYTES)")
        rendered[path] = body
    return rendered


# What render_artifacts adds that a run does not change: the spec's name, and the time
# (a different instant at the end, but never a different path shape).
_BEFORE_RUN_NAMES = frozenset({"name", "timestamp"})


def paths_before_run(spec: Spec, variables: Mapping[str, Any], limits: Limits | None = None
                     ) -> dict[int, str]:
    """{index: rendered path} of the artifacts whose path reads the spec's variables
    alone (and `name`, `timestamp`): it renders now as it will when the session completes,
    so it can be checked before anything runs. A path that reads anything a run adds (a
    step's result, the session's id, TRACE...) is left out: it renders only then."""
    outputs = spec.outputs
    if outputs is None:
        return {}
    run_names = (pattern_for(spec.pattern.type).template_names | ARTIFACT_NAMES) \
        - _BEFORE_RUN_NAMES
    readable = set(variables) | _BEFORE_RUN_NAMES
    context = {"name": spec.name, "timestamp": datetime.now(UTC).isoformat(), **variables}
    paths: dict[int, str] = {}
    for i, artifact in enumerate(outputs.artifacts):
        where = f"outputs.artifacts[{i}].path"
        names = undeclared_names(artifact.path, where) - KNOWN_GLOBALS
        if names <= readable and not names & run_names:
            paths[i] = artifact_name(render(artifact.path, context, where, limits).strip())
    return paths


def _render_body(template: str, context: dict[str, Any], where: str, limits: Limits,
                 trace: TraceSource | None) -> str:
    budget = limits.max_artifact_bytes
    # (A variable named TRACE wins over the trace, as in strands-cli.)
    if trace is None or "TRACE" not in template or context.get("TRACE") != "":
        return render(template, context, where, limits, budget, "DURABLE_MAX_ARTIFACT_BYTES")
    # The rest of the artifact first (TRACE empty), then TRACE cut to what it leaves.
    rest = render(template, context, where, limits, budget, "DURABLE_MAX_ARTIFACT_BYTES")
    room = max(budget - len(rest.encode("utf-8")), 0)
    return render(template, {**context, "TRACE": trace(room)}, where, limits, budget,
                  "DURABLE_MAX_ARTIFACT_BYTES")


def sanitize_filename(part: str, max_length: int = 100) -> str:
    """strands-cli's `sanitize_filename`, for one path component: anything but word
    characters, '-', '_' and '.' becomes '_', runs of '_' collapse, leading and trailing
    '.' and '_' go, at most `max_length` characters, never empty."""
    safe = re.sub(r"_+", "_", re.sub(r"[^\w\-_.]", "_", part).strip("._"))
    if len(safe) > max_length:
        safe = safe[:max_length].rstrip("._")
    return safe or "unnamed"


def artifact_name(rendered: str) -> str:
    """A rendered artifact path with each component sanitized as strands-cli does. A
    leading '/' and '..' components are kept as they are, for `safe_target` to refuse
    (strands-cli refuses them before sanitizing too)."""
    if not rendered.strip():
        return rendered
    parts = [part for part in rendered.replace("\\", "/").split("/") if part not in ("", ".")]
    safe = [part if part == ".." else sanitize_filename(part) for part in parts]
    return ("/" if rendered.startswith(("/", "\\")) else "") + "/".join(safe)


def safe_target(out_dir: Path, name: str) -> Path:
    """Where artifact `name` goes under `out_dir`; refuses anything that escapes it."""
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise ArtifactPathError(f"artifact path {name!r} contains a control character")
    relative = PurePosixPath(name.replace("\\", "/"))
    if relative.is_absolute() or not name.strip():
        raise ArtifactPathError(f"artifact path {name!r} must be relative to the output dir")
    root = out_dir.resolve()
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise ArtifactPathError(f"artifact path {name!r} escapes the output dir {out_dir}")
    return target


def write_artifacts(artifacts: Mapping[str, str], out_dir: Path) -> list[Path]:
    """Write every artifact, after checking all paths first so nothing is half-written."""
    targets = [(safe_target(out_dir, name), body) for name, body in artifacts.items()]
    written = []
    for target, body in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        except OSError as error:
            raise ArtifactPathError(f"cannot write artifact {str(target)!r}: "
                                    f"{error.strerror or error}") from None
        written.append(target)
    return written
