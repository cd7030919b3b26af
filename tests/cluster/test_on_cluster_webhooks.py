"""tests/integration/test_webhook_delivery.py, run unchanged on a 3+3 Redis Cluster: the
webhook outbox lives in each shard's slot, recorded and delivered by single-slot scripts."""

from __future__ import annotations

from integration.test_webhook_delivery import *  # noqa: F403
