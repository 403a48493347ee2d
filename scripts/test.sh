#!/usr/bin/env bash
# The whole test suite from a fresh clone: virtualenv, dependencies, chromium, PostgreSQL check, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --dev
scripts/setup_local_model.sh  # the live_local tier's real model (built once, cached under ~/.cache)
export VERILOOP_TEST_POSTGRES_URL=${VERILOOP_TEST_POSTGRES_URL:-postgresql://postgres@127.0.0.1:5432/veriloop_test}
scripts/ensure_postgres.sh "$VERILOOP_TEST_POSTGRES_URL"
unset OPENAI_API_KEY OPENAI_BASE_URL
export LANGSMITH_TRACING=false LANGGRAPH_CLI_NO_ANALYTICS=1
set +e
# Two workers, each test file whole on one (module fixtures run once) and its own database
# (tests/conftest.py): about half the tests wait on browsers, servers and subprocesses.
# Schemathesis gives its fuzzed operations one node id, and xdist would run only one of them: that
# file runs in a second, serial pass.
FUZZ=tests/server/test_openapi_fuzz.py
.venv/bin/python -m pytest -n "${VERILOOP_TEST_WORKERS:-2}" --dist loadfile --ignore="$FUZZ" "$@"
rc=$?
.venv/bin/python -m pytest "$@" "$FUZZ"
fuzz_rc=$?
set -e
if [ "$rc" = 5 ] || [ "$fuzz_rc" = 5 ]; then
  echo "no test ran: failing" >&2
  exit 1
fi
[ "$rc" = 0 ] || exit "$rc"
exit "$fuzz_rc"
