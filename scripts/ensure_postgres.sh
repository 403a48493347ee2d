#!/usr/bin/env bash
# Makes sure the PostgreSQL at $1 answers and its database exists; starts the local cluster if it is down.
# Fails loudly rather than letting the PostgreSQL tests skip.
set -euo pipefail
url=${1:?usage: ensure_postgres.sh postgresql://user@host:port/db}
db=${url##*/}
admin=${url%/*}/postgres
if ! psql "$admin" -Atqc 'select 1' >/dev/null 2>&1; then
  echo "== PostgreSQL is not answering at ${admin}; trying to start the local cluster"
  if command -v pg_ctlcluster >/dev/null 2>&1; then
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
    for _ in $(seq 1 30); do psql "$admin" -Atqc 'select 1' >/dev/null 2>&1 && break; sleep 1; done
  fi
fi
if ! psql "$admin" -Atqc 'select 1' >/dev/null 2>&1; then
  echo "ERROR: PostgreSQL is not reachable at ${admin}; the PostgreSQL tests cannot run." >&2
  exit 1
fi
if [ "$(psql "$admin" -Atqc "select 1 from pg_database where datname='${db}'")" != 1 ]; then
  psql "$admin" -qc "create database \"${db}\"" >/dev/null
fi
echo "== PostgreSQL ready: ${url}"
