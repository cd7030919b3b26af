"""tests/integration/test_locks.py, run unchanged on a 3+3 Redis Cluster (the `settings`
fixture of tests/cluster/conftest.py points them at it)."""

from __future__ import annotations

from integration.test_locks import *  # noqa: F403
