"""Tenancy on a 3+3 Redis Cluster: tests/attack/test_tenancy.py (namespaces, scoped
tokens, revocation, the audit trail) and tests/integration/test_quotas.py (quotas, their
atomic places) run unchanged against it (tests/cluster/conftest.py's `settings`)."""

from __future__ import annotations

from attack.test_tenancy import *  # noqa: F403
from integration.test_quotas import *  # noqa: F403
