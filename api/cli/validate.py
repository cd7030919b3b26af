"""`durable validate SPEC`: load a spec as `run` and `submit` do, run nothing.

Like strands-cli's `validate`: one line naming the spec and its shape, exit 0; a bad
spec is the same one-line error as `durable run` gives, exit 2. A spec the tool policy
refuses only for want of a grant (spec/grants.py) is valid: a "needs grants:" section
(`grants` in --json) names each `durable run --allow*` flag that would run it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from strands_durable.api.cli.common import (
    AllowHostOpt,
    JsonOpt,
    ProviderOpt,
    ScriptOpt,
    ScriptReplaceOpt,
    VarOpt,
    app,
    load,
    out,
    print_json,
    run_async,
)
from strands_durable.patterns import pattern_for
from strands_durable.spec.grants import Grant, surveying
from strands_durable.spec.loader import LoadedSpec
from strands_durable.spec.provider_hosts import grant_hosts


def shape(loaded: LoadedSpec) -> dict[str, Any]:
    spec = loaded.spec
    field = pattern_for(spec.pattern.type).parts_field
    parts = getattr(spec.pattern.config, field, None) if field else None
    return {"valid": True, "source": loaded.source, "name": spec.name,
            "pattern": spec.pattern.type, "agents": len(spec.agents),
            "parts": {field: len(parts)} if field and parts is not None else {},
            "spec_hash": loaded.spec_hash}


@app.command()
def validate(
    spec: Annotated[Path, typer.Argument(help="Workflow spec (strands-cli YAML).")],
    var: VarOpt = None,
    provider: ProviderOpt = None,
    script: ScriptOpt = None,
    script_replace: ScriptReplaceOpt = False,
    allow_host: AllowHostOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Check a spec (schema, references, templates, skills, $ref agents) as `run` and
    `submit` load it; run nothing, store nothing. Exit 0 valid, 2 not."""

    async def body() -> tuple[LoadedSpec, list[Grant]]:
        grant_hosts(tuple(allow_host or ()))  # as `durable run --allow-host` would
        with surveying() as needs:  # what the tool policy refuses: listed, not refused
            return load(spec, var, provider, script, script_replace), needs

    loaded, needs = run_async(body())
    doc = shape(loaded) | {"grants": [
        {"flag": need.flag, "value": need.value, "arg": str(need)} for need in needs]}
    if as_json:
        print_json(doc)
        return
    parts = ", ".join(f"{n} {name}" for name, n in doc["parts"].items()) or \
        "steps decided as it runs"
    out.print(f"valid: {doc['name']} ({doc['pattern']}) from {doc['source']}: "
              f"{doc['agents']} agent{'s' if doc['agents'] != 1 else ''}, {parts}",
              highlight=False, markup=False, soft_wrap=True)
    if needs:
        out.print("needs grants: this fleet's tool policy refuses it; `durable run` on your "
                  "own machine runs it with:\n" + "\n".join(f"  {need}" for need in needs),
                  highlight=False, markup=False, soft_wrap=True)
