#!/usr/bin/env bash
# Install advisor-chat and run the demo: a generated 16-rank profile where rank 12 is slow,
# diagnosed by the embedded offline advisor. Usage: bash tools/demo.sh [advisor-chat demo args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then "$PY" -m venv .venv; fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[mcp]'   # with the MCP server's SDK
exec .venv/bin/advisor-chat demo "$@"
