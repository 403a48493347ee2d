#!/usr/bin/env bash
# Both lints, the second even when the first fails; non-zero when either found something.
# Needs the dev venv (scripts/setup.sh --dev).
set -uo pipefail
cd "$(dirname "$0")/.."
rc=0
echo "== ruff check ."
.venv/bin/ruff check . || rc=1
echo "== ruff format --check ."
.venv/bin/ruff format --check . || rc=1
exit "$rc"
