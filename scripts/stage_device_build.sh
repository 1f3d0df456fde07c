#!/usr/bin/env bash
# Copies a CUDA build's programs, plus the Debian shared libraries the device
# machine's Ubuntu image lacks, into .devbuild/ (git-ignored) so that the
# device tool can carry them: run(..., carry=[".devbuild", ...]).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/cuda}
rm -rf .devbuild && mkdir -p .devbuild/bin .devbuild/lib
cp "$BUILD"/tools/hipformers/hipformers .devbuild/bin/
for f in "$BUILD"/tests/test_* "$BUILD"/bench/* "$BUILD"/examples/example_*; do
  [ -f "$f" ] && [ -x "$f" ] && cp "$f" .devbuild/bin/
done
for lib in libutf8proc.so.2 libopenblas.so.0 libgfortran.so.5 libpcre2-8.so.0; do
  p=$(ldconfig -p | awk -v l="$lib" '$1==l {print $NF; exit}')
  [ -n "$p" ] && cp -L "$p" .devbuild/lib/
done
du -sh .devbuild
