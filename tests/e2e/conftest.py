from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet import Fleet

from helpers import RedisServer


@pytest.fixture
def fleet_factory(redis_server: RedisServer, prefix: str, tmp_path: Path
                  ) -> Iterator[object]:
    fleets: list[Fleet] = []

    def make(**settings: object) -> Fleet:
        fleet = Fleet.create(redis_server.url, prefix, tmp_path, **settings)
        fleets.append(fleet)
        return fleet

    yield make
    for fleet in fleets:
        fleet.stop_all()
