#!/usr/bin/env bash
# Makes this checkout importable as `fir` without pip (a machine where pip cannot install it,
# such as the GPU machines of the device tool): a folder of links shaped like the installed
# package, and a dist-info that registers the `fir` backend of torch.compile. Prints the folder
# to put on PYTHONPATH:  export PYTHONPATH=$(bash scripts/path_install.sh /tmp/firpkg)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-/tmp/firpkg}"
mkdir -p "$dest/fir" "$dest/fir-0.1.0.dist-info"
cp "$root/fir/__init__.py" "$dest/fir/__init__.py"
for d in ir passes frontend backends tools; do ln -sfn "$root/$d" "$dest/fir/$d"; done
printf 'Metadata-Version: 2.1\nName: fir\nVersion: 0.1.0\n' > "$dest/fir-0.1.0.dist-info/METADATA"
printf '[torch_dynamo_backends]\nfir = fir.frontend.dynamo:fir_backend\n' \
  > "$dest/fir-0.1.0.dist-info/entry_points.txt"
echo "$dest"
