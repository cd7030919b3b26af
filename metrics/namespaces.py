"""Per-namespace metrics: the model tokens of each namespace's committed steps, as the
worker counts them for its quota of tokens per day (sessions/token_quota.py)."""

from __future__ import annotations

from prometheus_client import Counter

from strands_durable.metrics.process import CappedLabels

MAX_NAMESPACE_LABELS = 200  # distinct namespaces per process before the rest are "other"

NAMESPACE_TOKENS = Counter("durable_namespace_tokens", "Model tokens (input + output) of "
                           "the steps this worker committed, by namespace", ["namespace"])

namespace_label = CappedLabels(MAX_NAMESPACE_LABELS)


def namespace_tokens(namespace: str, tokens: int) -> None:
    if tokens > 0:
        NAMESPACE_TOKENS.labels(namespace_label(namespace)).inc(tokens)
