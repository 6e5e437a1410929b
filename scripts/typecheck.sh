#!/usr/bin/env bash
# Types: mypy over the whole package, 0 errors and no unused `type: ignore` (its settings are
# [tool.mypy] in pyproject.toml). The package's folders lie at the checkout's root and are
# installed as `fir`, which mypy cannot see through an editable install: it reads them through
# a tree of links shaped like the installed package (scripts/path_install.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PY=${PYTHON:-python3}
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
pkg=$(bash "$root/scripts/path_install.sh" "$tree")
cd "$pkg"
MYPYPATH="$pkg" "$PY" -m mypy --config-file "$root/pyproject.toml" \
  --cache-dir "$root/.mypy_cache" -p fir
