"""One trace per session, whichever worker runs its steps and however often: the ids and
the sampling decision are functions of the session id alone.

The trace id is the session's UUID (a trace found in a backend names its session: the
id without dashes). The session span's id is derived from it, so every step span, on
any worker, before or after a crash, has the same parent. The sampling decision hashes
the session id rather than reading the trace id's low bits (a UUID4's variant bits sit
there, which would skew a ratio).
"""

from __future__ import annotations

import hashlib

# The trace id is the planner's too: it names the trace in the `{{ TRACE }}` artifact.
from strands_durable.planning.trace import session_trace_id

__all__ = ["sampled", "session_span_id", "session_trace_id"]

_SPAN_ID_MASK = (1 << 64) - 1


def _digest(session_id: str, purpose: str) -> bytes:
    return hashlib.sha256(f"strands-durable:{purpose}:{session_id}".encode()).digest()


def session_span_id(session_id: str) -> int:
    return (int.from_bytes(_digest(session_id, "span")[:8], "big") & _SPAN_ID_MASK) or 1


def sampled(session_id: str, ratio: float) -> bool:
    """The session's sampling decision: the same on every worker and every re-run."""
    if ratio >= 1.0:
        return True
    if ratio <= 0.0:
        return False
    draw = int.from_bytes(_digest(session_id, "sample")[:8], "big")
    return draw < int(ratio * (1 << 64))
