#!/usr/bin/env bash
# Installs FIR and everything its tests need into the current Python environment.
# The CPU build of torch is installed first when no torch is present, so that the
# `torch>=2.5` requirement is already met and pip never fetches a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q -e ".[test]"
