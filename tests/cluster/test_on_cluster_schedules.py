"""tests/integration/test_schedules.py, run unchanged on a 3+3 Redis Cluster (the
`settings` fixture of tests/cluster/conftest.py points them at it): schedules, their runs
and their cursor are global keys, each written by single-key commands."""

from __future__ import annotations

from integration.test_schedules import *  # noqa: F403
