#!/usr/bin/env bash
# The whole test suite: ruff, mypy (scripts/typecheck.sh), lit (FileCheck goldens), pytest (unit, property and numeric tests).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m ruff check .
bash scripts/typecheck.sh
"$PY" -c "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()" -s tests/lit
# PyTorch's own Inductor tests with FIR in Inductor's place, where the suite lies beside the
# checkout (CI, developers): a fixed sample of 250 (every second test of the file first), each
# wrong result, error or fallback not accepted in scripts/conformance_known.txt fails the run.
# The whole suite: python scripts/conformance.py --table docs/conformance.md
suite=${FIR_CONFORMANCE:-../shared/conformance}
if [ -f "$suite/harness.py" ]; then
  "$PY" scripts/conformance.py --suite "$suite" --sample 250 --check
else
  echo "conformance: no suite at $suite (set FIR_CONFORMANCE); not run"
fi
# pytest last: its closing line ("N passed") is the suite's summary
"$PY" -m pytest -q -p no:cacheprovider tests
