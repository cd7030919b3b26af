"""Specs from a program: load one (a file, YAML text, a dict) or check one built as
objects, with exactly the checks `durable validate`, `durable run` and the API's submit
apply (spec/loader.py, under this process's settings: its limits and tool policy).

Exported by the package as `strands_durable.load_spec` and `strands_durable.validate_spec`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from strands_durable.errors import InvalidInput, SpecError
from strands_durable.spec.dump import spec_data
from strands_durable.spec.loader import (
    LoadedSpec,
    load_spec_data,
    load_spec_file,
    load_spec_text,
)
from strands_durable.spec.model import Spec

__all__ = ["SpecSource", "load_spec", "validate_spec"]

SpecSource = Spec | Mapping[str, Any] | str | os.PathLike[str]


def load_spec(source: SpecSource, *, variables: Mapping[str, Any] | None = None) -> Spec:
    """Read and check a spec as `durable validate` does, and return its model.

    `source` is a file (a `pathlib.Path`; `$ref` agents and skills are read relative to
    it), YAML or JSON text (a `str`, as `Client.submit` takes it), the parsed data (a
    dict), or a `Spec` built as objects (checked again).
    `variables` are values for the spec's inputs, as `durable run --var` gives them.

    Raises `SpecError` (an `InvalidInput`) naming the source, the field and the
    problem, at the first problem found.

    Example:

        >>> from strands_durable import load_spec
        >>> from pathlib import Path
        >>> spec = load_spec(Path("examples/chain-research.yaml"), variables={"topic": "tides"})
        >>> spec.pattern.type
        'chain'
    """
    return _loaded(source, variables).spec


def validate_spec(source: SpecSource, *,
                  variables: Mapping[str, Any] | None = None) -> list[str]:
    """The problems `durable validate` would report for `source` (any form `load_spec`
    takes); an empty list when the spec is valid.

    Each problem is one line naming the source, the field and what is wrong. The checks
    stop at the first problem, as `durable validate` does, so today the list holds at
    most one. A misconfigured process (its settings) still raises `Unavailable`.

    Example:

        >>> from pathlib import Path
        >>> from strands_durable import load_spec, validate_spec
        >>> spec = load_spec(Path("examples/chain-research.yaml"))
        >>> validate_spec(spec.model_copy(update={"name": ""}))
        ['<spec>: name: must not be empty']
    """
    try:
        _loaded(source, variables)
    except InvalidInput as error:
        return [str(error)]
    return []


def _loaded(source: SpecSource, variables: Mapping[str, Any] | None) -> LoadedSpec:
    if isinstance(source, Spec):
        return load_spec_data(spec_data(source), "<spec>", variables)
    if isinstance(source, Mapping):
        return load_spec_data(source, "<data>", variables)
    if isinstance(source, str):
        if "\n" not in source.strip() and not source.lstrip().startswith("{"):
            # One line of YAML is never a whole spec: most likely a file's name.
            raise SpecError("<text>", "", "one line of text is not a whole spec; to "
                            "load a file, pass a pathlib.Path")
        return load_spec_text(source, "<text>", variables)
    return load_spec_file(Path(source), variables)
