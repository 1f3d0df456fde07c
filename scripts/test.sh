#!/usr/bin/env bash
# The project's test command (what the README and CI run): builds the CPU
# preset and runs every test through CTest. Every GPU source is compiled for
# CUDA and HIP by scripts/setup.sh (target gpu_build_check of the cuda and
# hip presets, where nvcc and hipcc are found), which CI runs first.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset cpu >/dev/null
cmake --build --preset cpu
ctest --preset cpu -j "$(nproc)"
