"""Tools for the tests: each real execution appends one line to the file named by
DURABLE_TEST_TOOL_LOG, so a test counts executions across worker processes."""

from __future__ import annotations

import json
import os

from strands import tool

from strands_durable.worker.tools.context import current_tool_call


def _log(entry: dict[str, object]) -> None:
    path = os.environ.get("DURABLE_TEST_TOOL_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(entry) + "\n")


@tool
def bump(n: int) -> int:
    """Add one to n (and record that the tool ran, with its idempotency key)."""
    call = current_tool_call()
    _log({"tool": "bump", "n": n, "key": call.idempotency_key if call else None})
    return n + 1


@tool
def explode(reason: str) -> str:
    """Always fails: the model sees the error."""
    _log({"tool": "explode", "reason": reason})
    raise RuntimeError(f"exploded: {reason}")
