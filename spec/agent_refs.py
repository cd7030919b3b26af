"""Agent references (`agents.<id>: {$ref: path, ...overrides}`), resolved as strands-cli
resolves them, before validation: the path is relative to the spec's file; the
referenced file is an atomic agent spec (exactly one agent under `agents`); its schema
paths become relative to it; the fields beside `$ref` override the referenced agent's;
a referenced agent may not reference another.

Only a spec loaded from a file has a place to resolve from: a spec sent as text (the
HTTP API) that holds a `$ref` is refused, never read against the server's disk.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from strands_durable.errors import SpecError
from strands_durable.settings import Limits
from strands_durable.spec.reading import parse_yaml, read_text

__all__ = ["has_agent_refs", "reject_agent_refs", "resolve_agent_refs"]

REF_KEYS = ("$ref", "ref")


def _ref_of(agent: Any) -> Any:
    if not isinstance(agent, dict):
        return None
    return next((agent[key] for key in REF_KEYS if key in agent), None)


def has_agent_refs(data: dict[str, Any]) -> bool:
    agents = data.get("agents")
    return isinstance(agents, dict) and any(_ref_of(a) is not None for a in agents.values())


def reject_agent_refs(data: dict[str, Any], source: str) -> None:
    """A spec with no file to resolve from: a `$ref` agent is refused, naming it."""
    agents = data.get("agents")
    for agent_id, agent in (agents.items() if isinstance(agents, dict) else ()):
        if _ref_of(agent) is not None:
            raise SpecError(source, f"agents.{agent_id}", "an agent reference ($ref) is "
                            "resolved relative to the spec's file: load the spec from its "
                            "file (durable run / durable submit FILE), or define the agent "
                            "inline with its 'prompt'")


def resolve_agent_refs(data: dict[str, Any], spec_path: Path, source: str,
                       limits: Limits) -> str:
    """Replace each `$ref` agent with the referenced agent and its overrides, in place.
    Returns a digest of what was read (it joins the spec's hash: a changed atomic agent
    is a changed spec), '' when there was nothing to resolve."""
    agents = data.get("agents")
    if not isinstance(agents, dict):
        return ""
    read: dict[str, Any] = {}
    for agent_id, agent in agents.items():
        ref = _ref_of(agent)
        if ref is None:
            continue
        where = f"agents.{agent_id}"
        if not isinstance(ref, str) or not ref.strip():
            raise SpecError(source, f"{where}.$ref", "expected the path of an agent spec")
        overrides = {k: v for k, v in agent.items() if k not in REF_KEYS}
        agents[agent_id] = {**_referenced(spec_path.parent / ref, ref, where, source, limits),
                            **overrides}
        read[agent_id] = agents[agent_id]
    if not read:
        return ""
    return hashlib.sha256(json.dumps(read, sort_keys=True, default=str).encode()).hexdigest()


def _referenced(path: Path, ref: str, where: str, source: str, limits: Limits) -> dict[str, Any]:
    if not path.is_file():
        raise SpecError(source, f"{where}.$ref", f"agent reference not found: {ref} "
                        f"(resolved to {path.resolve()})")
    ref_source = str(path)
    spec = parse_yaml(read_text(path, ref_source, limits), ref_source, limits)
    agents = spec.get("agents") if isinstance(spec, dict) else None
    if not isinstance(agents, dict) or len(agents) != 1:
        count = len(agents) if isinstance(agents, dict) else 0
        raise SpecError(source, f"{where}.$ref", f"{ref} is not an atomic agent spec: it "
                        f"must define exactly one agent under 'agents', found {count}")
    agent = next(iter(agents.values()))
    if not isinstance(agent, dict):
        raise SpecError(source, f"{where}.$ref", f"{ref}: its agent is not a mapping")
    if _ref_of(agent) is not None:
        raise SpecError(source, f"{where}.$ref", f"{ref} references another agent; "
                        "an atomic agent must be self-contained")
    resolved = dict(agent)
    for key in ("input_schema", "output_schema"):
        if isinstance(resolved.get(key), str):  # relative to the atomic agent's file
            resolved[key] = str((path.parent / resolved[key]).resolve())
    return resolved
