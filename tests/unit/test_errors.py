"""Every error the package raises on purpose is of exactly one kind, which alone decides
how an interface answers (HTTP status, CLI exit code)."""

from __future__ import annotations

import importlib
import pkgutil

import strands_durable
from strands_durable.errors import KINDS, DurableError, kind_of


def every_error_class() -> set[type[DurableError]]:
    for info in pkgutil.walk_packages(strands_durable.__path__, prefix="strands_durable."):
        if info.name.endswith(".__main__"):  # runs the CLI when imported
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional provider's SDK is not installed
            continue
    found: set[type[DurableError]] = set()
    todo = [DurableError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


# Bases that only add fields to their subclasses and are never raised themselves: the
# client's errors carry status and code whatever their kind.
FIELD_BASES = {"strands_durable.client.errors.ClientError"}


def test_every_error_is_of_exactly_one_kind() -> None:
    classes = every_error_class()
    assert len(classes) > 20, sorted(c.__name__ for c in classes)
    for cls in classes:
        if f"{cls.__module__}.{cls.__qualname__}" in FIELD_BASES:
            assert not any(issubclass(cls, kind) for kind in KINDS), cls
            assert cls.__subclasses__(), f"{cls.__qualname__} is a base with no subclass"
            continue
        kinds = [kind for kind in KINDS if issubclass(cls, kind)]
        assert len(kinds) == 1, f"{cls.__module__}.{cls.__name__} is of kinds {kinds}"


def test_a_kind_is_found_through_subclasses_and_a_bare_error_has_none() -> None:
    from strands_durable.errors import InvalidId, InvalidInput, NotFound, SessionNotFound

    assert kind_of(InvalidId("session id", "x", "a UUID")) is InvalidInput
    assert kind_of(SessionNotFound("s")) is NotFound
    assert kind_of(DurableError("bare")) is None


def test_codes_are_machine_names() -> None:
    for cls in every_error_class():
        assert cls.code.replace("_", "").isalpha() and cls.code.islower(), cls
