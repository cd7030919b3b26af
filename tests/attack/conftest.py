"""Fixtures of the attack suite (the app and its client come from tests/conftest.py; the
canary, the CLI's environment and Redis snapshots from helpers.attack): a canary secret
in the environment, and DURABLE_* limits set for one test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from helpers.attack import CANARY


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A provider key in this process's environment, as every role has one."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    return CANARY


@pytest.fixture
def set_limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set DURABLE_* limits for this test: set_limits(render_timeout_s=1). The process
    reads them once, so the cache is cleared on each change and afterwards."""

    from strands_durable.settings import current_limits

    def apply(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"DURABLE_{name.upper()}", str(value))
        current_limits.cache_clear()

    yield apply
    current_limits.cache_clear()
