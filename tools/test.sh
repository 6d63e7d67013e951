#!/usr/bin/env bash
# Install everything the test suite needs (Python packages, and chromium + CJK fonts for the
# browser tests when apt-get is available) and run lint + tests. Usage: bash tools/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing chromium and CJK fonts for the browser tests (apt-get)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-noto-cjk fonts-noto-color-emoji >/dev/null
fi
.venv/bin/ruff check advisor_chat tests tools evals
.venv/bin/python -m pytest "$@"
