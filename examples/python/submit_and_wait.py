"""Submit a workflow, wait for it to finish, and print what it produced.

Against a running `durable api` (with `arq worker` processes behind it):

    DURABLE_API_URL=http://127.0.0.1:8080 DURABLE_API_TOKEN=... \\
        python examples/python/submit_and_wait.py --var topic="tide pools"

Or with no API server, on the fleet's Redis directly (or, with no URL, your local store):

    python examples/python/submit_and_wait.py --redis redis://127.0.0.1:6379/0

The default spec, examples/chain-research.yaml, uses the offline `scripted` provider.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from strands_durable import Client, DurableError

DEFAULT_SPEC = Path(__file__).resolve().parents[1] / "chain-research.yaml"


def connect(redis: str | None) -> Client:
    """An HTTP client from the environment, or one on Redis when --redis was given."""
    if redis is not None:
        return Client.connect_redis(redis or None)  # "" means the settings' store
    url = os.environ.get("DURABLE_API_URL", "http://127.0.0.1:8080")
    return Client(url, token=os.environ.get("DURABLE_API_TOKEN"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", nargs="?", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--var", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--redis", nargs="?", const="", metavar="URL",
                        help="use Redis directly instead of the HTTP API")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    variables = dict(item.split("=", 1) for item in args.var)

    with connect(args.redis) as client:
        try:
            # A Path is read and sent as the spec's text; the server checks it as
            # `durable validate` would and answers 422 (ApiInvalidInput) if it is wrong.
            submitted = client.submit(args.spec, variables=variables)
            print(f"submitted {submitted.session_id}")
            done = client.wait(submitted.session_id, timeout=args.timeout)
        except DurableError as error:  # every error the client raises is one of these
            print(f"error: {error}", file=sys.stderr)
            return 1
        print(f"status: {done.status}, {done.steps_committed} steps")
        for artifact in client.artifacts(done.session_id):
            print(f"artifact: {artifact.name} ({artifact.size_bytes} bytes)")
        print("final response:")
        print((done.final_response or "").rstrip())
    return 0 if done.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(main())
