"""tests/integration/test_failover_in_process.py, run unchanged on a 3+3 Redis Cluster (the
`settings` fixture of tests/cluster/conftest.py points them at it): beats, declarations and the
re-run of a dead consumer's entries, per shard, each shard a slot of its own node's."""

from __future__ import annotations

from integration.test_failover_in_process import *  # noqa: F403
