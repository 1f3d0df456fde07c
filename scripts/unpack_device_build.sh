#!/usr/bin/env bash
# On the device machine: unpacks the programs scripts/stage_device_build.sh
# staged compressed (STAGE_XZ=1) in .devbuild/bin, once. Every device-side
# entry point (bench/device_bench.sh, tests/parity/device_gpu.sh) calls it
# first, through scripts/device_env.sh, so none depends on another having
# run before it on that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
for z in .devbuild/bin/*.xz; do
  [ -e "$z" ] || continue
  if command -v xz >/dev/null; then
    xz -d -f "$z"
  else  # (python3's lzma where the image lacks xz)
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[1][:-3], "wb"))' "$z"
    rm "$z"
  fi
  chmod +x "${z%.xz}"
done
