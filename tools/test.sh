#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, and chromium + CJK fonts for the
# browser tests when apt-get is available) and run lint + tests.
#
#   bash tools/test.sh [pytest args]         the everyday run: every test not marked `slow`
#   bash tools/test.sh --all [pytest args]   everything (what CI runs: .ci/run), also ADVISOR_TEST_ALL=1
#
# A `-m EXPR` among the pytest args replaces the default selection (e.g. `-m slow`, `-m browser`).
# Tests run on one worker process per core (at most 4); ADVISOR_TEST_WORKERS=N sets how many
# (0 or 1: in one process, e.g. to debug with -x --pdb).
set -euo pipefail
cd "$(dirname "$0")/.."
SELECT=(-m "not slow")
if [ "${1:-}" = "--all" ]; then
  SELECT=()
  shift
elif [ "${ADVISOR_TEST_ALL:-}" = 1 ]; then
  SELECT=()
fi
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
# System packages for the browser tests: Debian's chromium (Playwright drives it; no browser download)
# and CJK/emoji fonts so Chinese answers render in screenshots.
APT_PKGS="chromium fonts-noto-cjk fonts-noto-color-emoji"
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  missing=""
  for p in $APT_PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "installing for the browser tests (apt-get):$missing"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  fi
fi
.venv/bin/ruff check advisor_chat tests tools evals
.venv/bin/ruff format --check advisor_chat tests tools evals
.venv/bin/mypy
# one worker process per core, at most 4 (pytest-xdist; a file's tests share a worker and its
# generated scenarios); ADVISOR_TEST_WORKERS=0 runs in this process
CORES=$(nproc 2>/dev/null || echo 2)
WORKERS=${ADVISOR_TEST_WORKERS:-$(( CORES < 4 ? CORES : 4 ))}
PAR=()
if [ "$WORKERS" -gt 1 ]; then PAR=(-n "$WORKERS" --dist loadfile); fi
.venv/bin/python -m pytest ${PAR[@]+"${PAR[@]}"} ${SELECT[@]+"${SELECT[@]}"} "$@"
