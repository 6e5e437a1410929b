#!/usr/bin/env bash
# The whole test suite: ruff, lit (FileCheck goldens), pytest (unit, property and numeric tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m ruff check .
"$PY" -c "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()" -s tests/lit
# pytest last: its closing line ("N passed") is the suite's summary
"$PY" -m pytest -q -p no:cacheprovider tests
