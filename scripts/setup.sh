#!/usr/bin/env bash
# Creates .venv with an editable install of veriloop, plus the Debian packages it needs when missing.
#   scripts/setup.sh         the runtime dependencies (what `make demo` needs), chromium and bubblewrap
#   scripts/setup.sh --dev   also the dev extra (tests, lint, notebooks, benchmarks) and graphviz
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Unattended upgrades hold the dpkg lock for minutes on real Debian machines: wait instead of failing.
APT_LOCK_TIMEOUT=${APT_LOCK_TIMEOUT:-600}
case "${1:-}" in
  "") mode=runtime spec=. ;;
  --dev) mode=dev spec=.[dev] ;;
  *) echo "usage: scripts/setup.sh [--dev]" >&2; exit 2 ;;
esac

if [ ! -x .venv/bin/python ]; then
  echo "== creating .venv"
  "$PY" -m venv .venv
fi
# Installed, and every compiled module built from the current source (pip builds them on install).
installed() {
  [ -f ".venv/.veriloop-$1" ] && [ ! pyproject.toml -nt ".venv/.veriloop-$1" ] \
    && [ -z "$(find engines schemas \( -name '*.pyx' -o -name '*.pxi' \) -newer ".venv/.veriloop-$1")" ] \
    && compgen -G "engines/skeleton_walk*.so" >/dev/null
}
if ! installed "$mode" && ! installed dev; then  # a dev install includes the runtime
  echo "== installing veriloop ($mode dependencies) into .venv: pip lists each package as it goes"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install --progress-bar on -e "$spec"
  touch ".venv/.veriloop-$mode"
fi

apt_update() {
  # apt-get update ignores DPkg::Lock::Timeout for its lists lock (apt 2.6): retry while it is held.
  local deadline=$((SECONDS + APT_LOCK_TIMEOUT)) out
  until out=$(apt-get -q update 2>&1); do
    if ! grep -q "Could not get lock" <<<"$out" || [ "$SECONDS" -ge "$deadline" ]; then
      echo "$out" >&2
      return 1
    fi
    echo "   another apt is updating the package lists; waiting for it..."
    sleep 5
  done
}
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "missing Debian package(s) $* and this is not root: run 'sudo apt-get install $*'" >&2
    exit 1
  fi
  echo "== installing Debian's $* (waits up to ${APT_LOCK_TIMEOUT}s if another apt/dpkg holds its lock)"
  echo "   apt-get update"
  apt_update
  echo "   apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT" install -y -q "$@"
}
missing=()
if [ ! -x "${VERILOOP_CHROMIUM:-/usr/bin/chromium}" ]; then
  missing+=(chromium)  # or set VERILOOP_CHROMIUM to a Chromium you have
fi
if ! command -v bwrap >/dev/null; then
  missing+=(bubblewrap)  # the sandbox of plan steps' processes (docs/plans.md, Security)
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then
  missing+=(libseccomp2)  # the sandbox's seccomp filter, built through pyseccomp (docs/plans.md)
fi
if ! command -v prlimit >/dev/null || ! command -v setpriv >/dev/null; then
  missing+=(util-linux)  # prlimit (step limits) and setpriv (the step's own uid)
fi
if [ "$mode" = dev ] && ! command -v dot >/dev/null; then
  missing+=(graphviz)  # the notebooks draw the graph with graphviz's dot, offline
fi
if [ "$mode" = dev ] && ! command -v valgrind >/dev/null; then
  missing+=(valgrind)  # benchmarks.verification_instructions counts instructions with callgrind
fi
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
