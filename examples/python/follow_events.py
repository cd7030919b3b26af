"""Submit a workflow and print its events as they happen, until it ends.

    DURABLE_API_URL=http://127.0.0.1:8080 python examples/python/follow_events.py
    python examples/python/follow_events.py --redis redis://127.0.0.1:6379/0

Over HTTP the events come as server-sent events; a dropped connection is picked up
again after the last event seen (Last-Event-ID), so no event is missed or repeated.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from strands_durable import Client

DEFAULT_SPEC = Path(__file__).resolve().parents[1] / "chain-research.yaml"


def connect(redis: str | None) -> Client:
    """An HTTP client from the environment, or one on Redis when --redis was given."""
    if redis is not None:
        return Client.connect_redis(redis or None)
    url = os.environ.get("DURABLE_API_URL", "http://127.0.0.1:8080")
    return Client(url, token=os.environ.get("DURABLE_API_TOKEN"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--redis", nargs="?", const="", metavar="URL")
    args = parser.parse_args()

    with connect(args.redis) as client:
        sid = client.submit(args.spec).session_id
        print(f"session {sid}")
        # The iterator ends by itself once the session has ended: no polling here.
        for event in client.events(sid):
            where = f" {event.step}" if event.step else ""
            attempt = f" (attempt {event.attempt})" if event.attempt > 1 else ""
            print(f"{event.type}{where}{attempt}")
        status = client.get(sid).status
        print(f"ended: {status}")
    return 0 if status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
