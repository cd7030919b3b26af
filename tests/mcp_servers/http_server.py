"""The tools of `stdio_server.py` over streamable HTTP at /mcp:
`python tests/mcp_servers/http_server.py --port N [--counter-file PATH]`."""

from __future__ import annotations

import argparse

# Run as a script (never imported): this directory is sys.path[0].
from stdio_server import build_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--counter-file", default=None)
    args = parser.parse_args()
    build_server(args.counter_file).run("streamable-http", host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
