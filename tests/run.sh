#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: installs what it needs, then pytest in
# parallel (pytest-xdist; docs/testing.md).
#
#   bash tests/run.sh               the whole suite
#   bash tests/run.sh --fast        the fast lane: the tests not marked slow (docs/testing.md:
#                                   80-84 s on a quiet 2-core machine)
#   bash tests/run.sh ARGS...       pytest's own arguments too (a path, -k, -m, -n 0, -x)
#
# Unit tests need nothing; integration, end-to-end and chaos tests start their own
# redis-server on a free port (never the one on 6379; each xdist worker has its own
# ports) and their own `arq worker`s. DURABLE_TEST_WORKERS sets the number of pytest
# processes (default 6, 4 for --fast: the tests mostly wait on processes and Redis, so
# more of them than cores pays). Python packages go into a virtualenv (./.venv, or the
# active one) through install.sh, with the locked versions of requirements/constraints.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }
apt_updated=""
apt_install() {
  [ -n "$apt_updated" ] || { as_root apt-get update -qq && apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server not found: installing it" >&2
  apt_install redis-server
fi

# promtool and prometheus (Debian's `prometheus`): alert rule unit tests and the
# real-Prometheus test of tests/deploy/. They skip, saying why, only if apt cannot.
if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool not found: installing Debian's prometheus" >&2
  apt_install prometheus || echo "could not install prometheus" >&2
fi

# Debian's chromium for the console's browser tests (tests/browser, Playwright drives it;
# Playwright's own browser download is not used). They skip, saying why, only if apt cannot.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  echo "chromium not found: installing Debian's chromium" >&2
  apt_install chromium || echo "could not install chromium" >&2
fi

bash install.sh --dev
# Bytecode cached (__pycache__, git-ignored) even where the machine's environment turns it
# off: otherwise every pytest process compiles our modules and rewrites every test
# module's assertions again (the fast lane: 128 s wall without, 93-96 s with a warm cache).
unset PYTHONDONTWRITEBYTECODE
venv="${VIRTUAL_ENV:-${DURABLE_VENV:-.venv}}"
export PATH="$(cd "$venv" && pwd)/bin:$PATH"
workers="${DURABLE_TEST_WORKERS:-6}"
lane=()
if [ "${1:-}" = "--fast" ]; then
  # The fast lane: the tests not marked slow, of the folders that hold any (the others
  # are slow as a whole: not even imported); fewer processes, as each one collects.
  shift
  workers="${DURABLE_TEST_WORKERS:-4}"
  # schemathesis's pytest plugin (it imports hypothesis whole: ~1 CPU-s in each pytest
  # process) serves only tests/api/test_openapi_fuzz.py, which is not in this lane.
  lane=(-p no:schemathesis -m "not slow" tests/unit tests/uvloop tests/api tests/attack
        tests/integration)
fi
# --dist loadgroup: one test at a time to whichever process is free, except the tests of a
# module sharing a module-scoped fixture (tests/conftest.py groups them), kept together.
exec python -m pytest -q -n "$workers" --dist loadgroup "${lane[@]}" "$@"
