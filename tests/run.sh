#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what it needs, then pytest.
# Unit tests need nothing; integration, end-to-end and chaos tests start their own
# redis-server on a free port (never the one on 6379) and their own `arq worker`s.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# promtool and prometheus (Debian's `prometheus`): alert rule unit tests and the
# real-Prometheus test of tests/deploy/. They skip, saying why, only if apt cannot.
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found: installing Debian's prometheus" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends prometheus >/dev/null || echo "could not install prometheus" >&2
fi

python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
exec python3 -m pytest -q "$@"
