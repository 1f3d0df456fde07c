#!/usr/bin/env bash
# Copies a CUDA build's programs, plus the Debian shared libraries the device
# machine's Ubuntu image lacks, into .devbuild/ (git-ignored) so that the
# device tool can carry them: run(..., carry=[".devbuild", ...]).
# Usage: scripts/stage_device_build.sh [BUILD_DIR] [DEST]
# STAGE_ONLY="hipformers test_models_gpu_decode_step_gpu_test" stages just
# those programs (found under BUILD_DIR): everything is ~100 MB, over the
# device tool's 64 MiB carry limit. STAGE_EXTRA="NAME=PATH ..." adds programs
# under other names (e.g. base=/tmp/hipformers-base, an older build for A/B).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/cuda}
DEST=${2:-.devbuild}
rm -rf "$DEST" && mkdir -p "$DEST/bin" "$DEST/lib"
if [ -n "${STAGE_ONLY:-}" ]; then
  for name in $STAGE_ONLY; do
    f=$(find "$BUILD" -type f -perm -u+x -name "$name" | head -1)
    if [ -z "$f" ]; then echo "stage_device_build.sh: no program $name under $BUILD" >&2; exit 2; fi
    cp "$f" "$DEST/bin/"
  done
else
  cp "$BUILD"/tools/hipformers/hipformers "$DEST/bin/"
  # The GPU-relevant tests, the benchmarks and the examples (not every test).
  for f in "$BUILD"/tests/test_runtime_* "$BUILD"/tests/test_kernels_gpu_* "$BUILD"/tests/test_models_gpu_* \
           "$BUILD"/bench/* "$BUILD"/examples/example_*; do
    if [ -f "$f" ] && [ -x "$f" ]; then cp "$f" "$DEST/bin/"; fi
  done
fi
for pair in ${STAGE_EXTRA:-}; do cp "${pair#*=}" "$DEST/bin/${pair%%=*}"; done
# Ubuntu 24.04 there has PCRE2, OpenBLAS and libgomp, but not utf8proc.
for lib in libutf8proc.so.2; do
  p=$(ldconfig -p | awk -v l="$lib" '$1==l && !p {p=$NF} END {print p}')
  if [ -n "$p" ]; then cp -L "$p" "$DEST/lib/"; fi
done
strip "$DEST"/bin/* 2>/dev/null || true
# STAGE_XZ=1: the programs compressed (a quarter of the size;
# scripts/unpack_device_build.sh unpacks them there), so two builds and a test
# fit one carry.
if [ -n "${STAGE_XZ:-}" ]; then xz -T2 -6 "$DEST"/bin/*; fi
du -sh "$DEST"
if [ "$(du -sm "$DEST" | cut -f1)" -gt 64 ]; then
  echo "stage_device_build.sh: $DEST is over the 64 MiB a device call can carry; pick programs with STAGE_ONLY" >&2
fi
