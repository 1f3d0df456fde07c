#!/usr/bin/env bash
# Copies a CUDA build's programs, plus the Debian shared libraries the device
# machine's Ubuntu image lacks, into .devbuild/ (git-ignored) so that the
# device tool can carry them: run(..., carry=[".devbuild", ...]).
# Usage: scripts/stage_device_build.sh [BUILD_DIR] [DEST]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/cuda}
DEST=${2:-.devbuild}
rm -rf "$DEST" && mkdir -p "$DEST/bin" "$DEST/lib"
cp "$BUILD"/tools/hipformers/hipformers "$DEST/bin/"
# The GPU-relevant tests, the benchmarks and the examples (not every test: the
# carried tree is limited to 64 MiB).
for f in "$BUILD"/tests/test_runtime_* "$BUILD"/tests/test_kernels_gpu_* "$BUILD"/bench/* "$BUILD"/examples/example_*; do
  if [ -f "$f" ] && [ -x "$f" ]; then cp "$f" "$DEST/bin/"; fi
done
# Ubuntu 24.04 there has PCRE2, OpenBLAS and libgomp, but not utf8proc.
for lib in libutf8proc.so.2; do
  p=$(ldconfig -p | awk -v l="$lib" '$1==l && !p {p=$NF} END {print p}')
  if [ -n "$p" ]; then cp -L "$p" "$DEST/lib/"; fi
done
strip "$DEST"/bin/* 2>/dev/null || true
du -sh "$DEST"
