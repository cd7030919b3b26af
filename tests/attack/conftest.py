"""Fixtures of the attack suite: specs written as an attacker would, a canary secret in
the environment, and the API's helpers (tests/api/apihelp.py) on the path."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))

CANARY = "sk-canary-7f3a9c"


@pytest.fixture
def canary(monkeypatch: pytest.MonkeyPatch) -> str:
    """A provider key in this process's environment, as every role has one."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    return CANARY


@pytest.fixture
def set_limits(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Set DURABLE_* limits for this test: set_limits(render_timeout_s=1). The process
    reads them once, so the cache is cleared on each change and afterwards."""

    from sessions.settings import current_limits

    def apply(**values: object) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"DURABLE_{name.upper()}", str(value))
        current_limits.cache_clear()

    yield apply
    current_limits.cache_clear()


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a `durable` process: no Redis unless given, the canary set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DURABLE_")}
    env.update({"OPENAI_API_KEY": CANARY, "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env
