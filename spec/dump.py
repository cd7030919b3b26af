"""A spec model written back as YAML that `durable run` and `durable validate` accept.

What is written is what the spec says: the fields that were given (loaded from a file or
passed to a model's constructor), never the defaults the models fill in, so a dumped
spec reads like one a person wrote and keeps meaning the same when a default changes.
Keys keep the models' order (the order of the format's documentation), and mappings
(agents, inputs, routes, nodes) their own order.
"""

from __future__ import annotations

from typing import Any

import yaml

from strands_durable.spec.model import Spec

__all__ = ["dump_spec", "spec_data"]

# Not a spec field: the loader attaches the skills' files here (spec/skills.py), and the
# schema refuses it in what a user writes.
_NOT_WRITTEN = {"skill_library"}


def spec_data(spec: Spec) -> dict[str, Any]:
    """`spec` as the plain data of its YAML (JSON types): the fields that were set, by
    their names in the format (`from`, not `from_`), without nulls (the schema allows
    none: a field set to None means "not given")."""
    data: dict[str, Any] = spec.model_dump(mode="json", by_alias=True, exclude_unset=True,
                                           exclude_none=True, exclude=_NOT_WRITTEN)
    _shorthands(data)
    return data


def _shorthands(data: dict[str, Any]) -> None:
    """The short forms the format has, where the long one says nothing more: a python
    tool as its callable's name, an input as its type (`topic: string`)."""
    tools = data.get("tools") or {}
    if "python" in tools:
        tools["python"] = [tool["callable"] if list(tool) == ["callable"] else tool
                           for tool in tools["python"]]
    for kind in ("required", "optional"):
        declared = (data.get("inputs") or {}).get(kind) or {}
        for name, var in declared.items():
            if list(var) == ["type"]:
                declared[name] = var["type"]


def dump_spec(spec: Spec) -> str:
    """The spec as YAML text that loads back to an equal model.

    Example:

        >>> from strands_durable import AgentSpec, AgentStep, ChainConfig, Pattern, \\
        ...     Runtime, Spec, dump_spec
        >>> spec = Spec(version=0, name="hello", runtime=Runtime(provider="scripted"),
        ...             agents={"writer": AgentSpec(prompt="Say hello.")},
        ...             pattern=Pattern(type="chain",
        ...                             config=ChainConfig(steps=[AgentStep(agent="writer")])))
        >>> print(dump_spec(spec))
        version: 0
        name: hello
        runtime:
          provider: scripted
        agents:
          writer:
            prompt: Say hello.
        pattern:
          type: chain
          config:
            steps:
            - agent: writer
        <BLANKLINE>

    Multi-line strings (prompts, templates) are written as `|` blocks."""
    return yaml.dump(spec_data(spec), Dumper=_SpecDumper, sort_keys=False,
                     allow_unicode=True, width=100)


class _SpecDumper(yaml.SafeDumper):
    """SafeDumper writing multi-line strings as literal blocks, as people write prompts."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML falls back to a quoted scalar by itself where a block cannot hold the text
    # exactly (trailing spaces, some control characters).
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_SpecDumper.add_representer(str, _str)
