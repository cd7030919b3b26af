#!/usr/bin/env bash
# Install strands-durable into a virtualenv, with the versions CI tested.
#
#   bash install.sh                  runtime only, into ./.venv (made if missing), and
#                                    redis-server (apt-get) for durable run's local store
#   bash install.sh --dev            plus the test, lint and deploy-check tools
#   bash install.sh --extras openai  plus provider extras (comma-separated)
#
# An active virtualenv ($VIRTUAL_ENV) is used as it is; otherwise ./.venv, or the folder
# in DURABLE_VENV. Every version comes from requirements/constraints.txt, the one lock of
# every runtime and dev dependency: upgrading one is a deliberate commit to that file
# (regenerate it with the command in its header).
set -euo pipefail
cd "$(dirname "$0")"

extras=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="${extras:+$extras,}dev" ;;
    --extras) [ $# -ge 2 ] || { echo "install.sh: --extras needs a value" >&2; exit 2; }
              extras="${extras:+$extras,}$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

if [ -n "${VIRTUAL_ENV:-}" ]; then
  venv="$VIRTUAL_ENV"
else
  venv="${DURABLE_VENV:-.venv}"
  python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || { echo "install.sh: $python not found; install Python 3.11 or newer" >&2; exit 1; }
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || { echo "install.sh: $("$python" --version 2>&1) is too old; strands-durable needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 1; }
  if [ ! -x "$venv/bin/python" ]; then
    if ! "$python" -m venv "$venv" >/dev/null 2>&1; then
      # Debian and Ubuntu ship venv's pip bootstrap as a separate package.
      rm -rf "$venv"
      pkg="python$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')-venv"
      echo "install.sh: $python cannot make a virtualenv; installing $pkg" >&2
      as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$pkg" >/dev/null \
        || { echo "install.sh: run 'apt-get install $pkg' (as root), then this again" >&2; exit 1; }
      "$python" -m venv "$venv"
    fi
  fi
fi

# `durable run` keeps its sessions in a private redis-server (the local store, in
# $XDG_STATE_HOME/strands-durable): install it where apt-get can; otherwise say so.
if ! command -v redis-server >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && { as_root apt-get update -qq && \
      DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends redis-server >/dev/null; }; then
    echo "install.sh: installed redis-server (for durable run's local session store)" >&2
  else
    echo "install.sh: redis-server not found: install it (it keeps durable run's sessions), or run with --ephemeral" >&2
  fi
fi

spec="."
[ -n "$extras" ] && spec=".[${extras}]"
# A strict editable install: build/__editable__*/strands_durable/ is a tree of links to the
# role folders (store/, scheduler/, worker/, api/), so the one import name maps onto them for
# Python and for mypy alike. A new module needs this script run again.
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  -c requirements/constraints.txt -e "$spec" --config-settings editable_mode=strict
echo "installed strands-durable${extras:+ [$extras]} in $venv (activate: . $venv/bin/activate)" >&2
