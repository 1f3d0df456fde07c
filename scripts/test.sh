#!/usr/bin/env bash
# The project's test command (what the README and CI run): builds the CPU
# preset and runs every test through CTest; with HIPFORMERS_TEST_GPU_COMPILE=1
# (the default in CI) it also compiles every GPU source for CUDA and HIP.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset cpu >/dev/null
cmake --build --preset cpu
ctest --preset cpu -j "$(nproc)"
