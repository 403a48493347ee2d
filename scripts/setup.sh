#!/usr/bin/env bash
# Creates .venv and installs veriloop with its dev extra, plus Debian's chromium when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.veriloop-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "== installing veriloop[dev] into .venv"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[dev]'
  touch "$stamp"
fi
if [ ! -x "${VERILOOP_CHROMIUM:-/usr/bin/chromium}" ]; then
  echo "== installing Debian's chromium (needs root and the Debian mirror)"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "chromium is missing and this is not root: run 'sudo apt-get install chromium' or set VERILOOP_CHROMIUM" >&2
    exit 1
  fi
fi
