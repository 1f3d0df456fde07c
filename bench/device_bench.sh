#!/usr/bin/env bash
# Speed runs on the device machine (an H200), from a CUDA build staged in
# .devbuild/ (scripts/stage_device_build.sh). Writes logs and JSON under $OUT.
#   bench/device_bench.sh quick     hipformers alone: the three issue cases
#   bench/device_bench.sh profile   per-kernel times of a short decode (ncu)
#   bench/device_bench.sh ab        decode ms/step with each fast path off in turn
#   bench/device_bench.sh compare   the side-by-side table (Transformers too),
#                                   written into $OUT/PERFORMANCE.md
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}
mkdir -p "$OUT"
CUBLAS_DIR=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/.devbuild/lib:${CUBLAS_DIR}:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
HF=${HF:-$PWD/.devbuild/bin/hipformers}
MODEL=/tmp/hipformers_bench_qwen3_0.6b
[ -f "$MODEL/model.safetensors" ] || "$HF" make-model --shape qwen3-0.6b --dtype bfloat16 --output "$MODEL" >/dev/null

for what in "$@"; do
  case "$what" in
    quick)
      for c in "1 128 128" "64 128 128" "1 4096 2"; do
        set -- $c
        echo "== bench batch $1 prompt $2 gen $3"
        timeout 180 "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch "$1" --prompt-len "$2" \
          --gen-len "$3" --json | tee -a "$OUT/bench.jsonl" | python3 -c '
import json,sys
r=json.loads(sys.stdin.read())
print("prefill %.0f tok/s, decode %.0f tok/s (%.3f ms/step), end-to-end %.0f tok/s, peak %.2f GiB, %.0f%% BW" % (
  r["prefill_tokens_per_s"], r["decode_tokens_per_s"], r["ms_per_decode_step"], r["generate_tokens_per_s"],
  r["peak_memory_bytes"]/2**30, 100*r["bandwidth_fraction"]))'
      done ;;
    profile)
      # Per-kernel times of one eager decode step (graphs and dependent
      # launches off so every kernel is profiled on its own; ncu cannot
      # profile inside the bench's graphs). Skips the load and the prefill.
      echo "== ncu, batch 1 decode kernels"
      HIPFORMERS_DISABLE_GRAPHS=1 HIPFORMERS_DISABLE_PDL=1 timeout 240 ncu --clock-control none --cache-control none \
        --launch-skip 700 --launch-count 60 --metrics gpu__time_duration.sum --csv \
        "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch 1 --prompt-len 128 --gen-len 4 \
        --warmup 0 --repeat 1 >"$OUT/ncu_b1.csv" 2>"$OUT/ncu_b1.err"
      echo "exit $?"
      grep '^"' "$OUT/ncu_b1.csv" | python3 -c '
import csv, re, sys
rows = list(csv.reader(sys.stdin))
h = rows[0]
k, v = h.index("Kernel Name"), h.index("Metric Value")
for r in rows[1:]:
    print("%8.2f us  %s" % (float(r[v].replace(",", "")) / 1000, re.sub(r"\(.*", "", r[k])[:80]))' ;;
    ab)
      # Batch 1 and 8 decode (128 + 128) with one fast path switched off at a
      # time: the folded norm/SwiGLU (a KernelConfig picking the separate
      # kernels), dependent launches, graphs.
      printf '{"RMSNorm": {"cuda": "rms_norm_fused_residual"}, "SiLUAndMul": {"cuda": "silu_and_mul_gpu"}}' \
        >/tmp/hf_separate.json
      printf '{"SiLUAndMul": {"cuda": "silu_and_mul_gpu"}}' >/tmp/hf_norm_only.json
      printf '{"RMSNorm": {"cuda": "rms_norm_fused_residual"}}' >/tmp/hf_silu_only.json
      for b in 1 8; do
        for v in default separate norm_only silu_only no_pdl no_graphs; do
          extra=""; envs=""
          case "$v" in
            separate|norm_only|silu_only) extra="--use-kernels --kernel-config /tmp/hf_$v.json" ;;
            no_pdl) envs="HIPFORMERS_DISABLE_PDL=1" ;;
            no_graphs) envs="HIPFORMERS_DISABLE_GRAPHS=1" ;;
          esac
          printf '%-10s batch %s: ' "$v" "$b"
          env $envs timeout 120 "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch "$b" \
            --prompt-len 128 --gen-len 128 $extra --json | tee -a "$OUT/ab.jsonl" | python3 -c '
import json,sys
r=json.loads(sys.stdin.read())
print("%.3f ms/step, decode %.0f tok/s" % (r["ms_per_decode_step"], r["decode_tokens_per_s"]))'
        done
      done ;;
    compare)
      cp docs/PERFORMANCE.md "$OUT/PERFORMANCE.md"
      python3 bench/compare_transformers.py --hipformers "$HF" --model-dir "$MODEL" --timeout 400 \
        --update-doc "$OUT/PERFORMANCE.md" 2>&1 | tail -20 ;;
  esac
done
