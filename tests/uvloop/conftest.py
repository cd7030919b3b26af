"""The async tests of this folder run on uvloop's event loop, not asyncio's.

pytest-asyncio asks this hook about the items under this folder only (a hook of a
conftest applies to the tests beside and below it); the rest of the suite keeps
asyncio's loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                   ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    import uvloop

    return {"uvloop": uvloop.new_event_loop}
