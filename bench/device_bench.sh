#!/usr/bin/env bash
# Speed runs on the device machine (an H200), from a CUDA build staged in
# .devbuild/ (scripts/stage_device_build.sh). Writes logs and JSON under $OUT.
#   bench/device_bench.sh quick     hipformers alone: the three issue cases
#   bench/device_bench.sh profile   per-kernel times of a short decode (ncu)
#   bench/device_bench.sh profile_prefill  per-kernel times of a 4096-token prefill, by kernel (ncu)
#   bench/device_bench.sh ab        decode ms/step (and prefill tok/s) of the defaults and of variants
#                                   (AB_VARIANTS, AB_BATCHES, AB_PROMPT, AB_GEN; e.g. AB_PROMPT=4096 AB_GEN=2
#                                   AB_BATCHES=1 for prefill; the persistent step: AB_BATCHES=1
#                                   AB_VARIANTS="default persistent persistent_no_hint persistent_trace";
#                                   its ablations, time only: persistent_ablateN with N the bits of
#                                   HIPFORMERS_PERSISTENT_ABLATE, e.g. persistent_ablate1 (no grid waits),
#                                   persistent_ablate31 (nearly all work left out: the weight stream, the
#                                   ring, the staging and per-tile barriers remain))
#   bench/device_bench.sh persistent_diag  the persistent step's planned run, all under $OUT: its GPU
#                                   test, its batch-1 ab variants against the default (flagged,
#                                   split attention, counters, ablations), the stream prototype
#                                   (DIAG_VARIANTS to narrow the ab list)
#   bench/device_bench.sh profile_step  the persistent step's warp stalls by source line (ncu PC sampling)
#   bench/device_bench.sh trace     one decode step's kernels block by block (a -DHIPFORMERS_STEP_TRACE=ON
#                                   build staged as .devbuild/bin/hipformers-trace; bench/step_trace.py)
#   bench/device_bench.sh compare   the side-by-side table (Transformers too),
#                                   written into $OUT/PERFORMANCE.md
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-device-out}
mkdir -p "$OUT"
source scripts/device_env.sh  # the staged programs unpacked, their library path
HF=${HF:-$PWD/.devbuild/bin/hipformers}
MODEL=/tmp/hipformers_bench_qwen3_0.6b
[ -f "$MODEL/model.safetensors" ] || "$HF" make-model --shape qwen3-0.6b --dtype bfloat16 --output "$MODEL" >/dev/null

# Kernel durations of an ncu --csv file, summed by kernel name, largest first.
ncu_summary() {
  grep '^"' "$1" | python3 -c '
import csv, re, sys, collections
rows = list(csv.reader(sys.stdin))
h = rows[0]
k, v = h.index("Kernel Name"), h.index("Metric Value")
tot = {}; cnt = collections.Counter()
for r in rows[1:]:
    name = re.sub(r"\(.*", "", r[k])[:70]
    tot[name] = tot.get(name, 0.0) + float(r[v].replace(",", "")) / 1000; cnt[name] += 1
for name, us in sorted(tot.items(), key=lambda x: -x[1]):
    print("%9.1f us  %4d x  %6.2f us each  %s" % (us, cnt[name], us / cnt[name], name))
print("%9.1f us  total of %d kernels" % (sum(tot.values()), sum(cnt.values())))'
}

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
        --launch-skip 600 --launch-count 150 --metrics gpu__time_duration.sum --csv \
        "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch 1 --prompt-len 128 --gen-len 8 \
        --warmup 0 --repeat 1 >"$OUT/ncu_b1.csv" 2>"$OUT/ncu_b1.err"
      echo "exit $?"
      ncu_summary "$OUT/ncu_b1.csv" ;;
    profile_prefill)
      # Per-kernel times of one 4096-token prefill step, summed by kernel
      # name (GEMMs vs attention vs the elementwise kernels).
      echo "== ncu, prefill 1 x 4096"
      HIPFORMERS_DISABLE_GRAPHS=1 HIPFORMERS_DISABLE_PDL=1 timeout 300 ncu --clock-control none \
        --launch-count 260 --metrics gpu__time_duration.sum --csv \
        "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch 1 --prompt-len 4096 --gen-len 2 \
        --warmup 0 --repeat 1 >"$OUT/ncu_prefill.csv" 2>"$OUT/ncu_prefill.err"
      echo "exit $?"
      ncu_summary "$OUT/ncu_prefill.csv" ;;
    ab)
      # Batch 1 and 8 decode (128 + 128), one variant of the defaults per
      # line: the folded norm/SwiGLU (a KernelConfig picking them), and
      # switched off in turn the fused q/k/v + attention kernel, the GEMV
      # grid cap, dependent launches, graphs.
      printf '{"RMSNorm": {"cuda": "rms_norm_fused_residual"}, "SiLUAndMul": {"cuda": "silu_and_mul_gpu"}}' \
        >/tmp/hf_separate.json
      printf '{"SiLUAndMul": {"cuda": "silu_and_mul_gpu"}}' >/tmp/hf_norm_only.json
      printf '{"RMSNorm": {"cuda": "rms_norm_fused_residual"}}' >/tmp/hf_silu_only.json
      printf '{"RMSNorm": {"cuda": "rms_norm_in_projection"}, "SiLUAndMul": {"cuda": "silu_and_mul_in_projection"}}' \
        >/tmp/hf_folded.json
      printf '{"SiLUAndMul": {"cuda": "silu_and_mul_in_projection"}}' >/tmp/hf_silu_fold.json
      printf '{"RotaryEmbedding": {"cuda": "rotary_qkv_write"}}' >/tmp/hf_rope_write.json
      printf '{"Attention": {"cuda": "attention_paged_split"}}' >/tmp/hf_split_kernel.json
      for b in ${AB_BATCHES:-1 8}; do
        for vm in ${AB_VARIANTS:-default folded unfused_qkv_attn gemv_uncapped no_pdl no_graphs}; do
          extra=""; envs=""; prog=$HF
          # A variant may carry modifiers after '+' (e.g. persistent_flagged+split): split:
          # HIPFORMERS_PERSISTENT_ATTENTION=split (attention items per page instead of whole
          # heads); env:NAME=VALUE: any variable; bin:NAME: the program .devbuild/bin/NAME
          # instead of hipformers (another build, for A/B of two builds on one machine).
          v=${vm%%+*}; mods=""; [ "$v" != "$vm" ] && mods=${vm#*+}
          for m in ${mods//+/ }; do
            case "$m" in
              split) envs="$envs HIPFORMERS_PERSISTENT_ATTENTION=split" ;;
              env:*) envs="$envs ${m#env:}" ;;
              bin:*) prog=$PWD/.devbuild/bin/${m#bin:} ;;
            esac
          done
          case "$v" in
            separate|norm_only|silu_only|folded|silu_fold|rope_write|split_kernel)
              extra="--use-kernels --kernel-config /tmp/hf_$v.json" ;;
            use_kernels) extra="--use-kernels" ;;
            unfused_qkv_attn) envs="$envs HIPFORMERS_DISABLE_FUSED_QKV_ATTENTION=1" ;;
            gemv_uncapped) envs="$envs HIPFORMERS_GEMV_BLOCKS_PER_SM=0" ;;
            no_pdl) envs="$envs HIPFORMERS_DISABLE_PDL=1" ;;
            no_graphs) envs="$envs HIPFORMERS_DISABLE_GRAPHS=1" ;;
            split_attn) envs="$envs HIPFORMERS_DECODE_ATTENTION=split" ;;
            l2_unbounded) envs="$envs HIPFORMERS_GEMV_L2_BYTES=0" ;;
            # The persistent step (batch 1 only) is the default up to 256 tokens of context
            # (default+env:HIPFORMERS_PERSISTENT_DECODE=0 gives the per-kernel step); every persistent*
            # variant requires it at any length, and a *_trace one prints its per-op trace at exit.
            # Its variants: without the L2 hint; the kv heads' splits merged in the attention op
            # instead of the o projection's staging (with the counters); the ops' outputs as flagged
            # words (the default) or through the done counters (persistent_counters); time only
            # (outputs wrong), one kind of work left out of every op (decode_step_sm90_gpu.cu, kAblate*).
            persistent_no_hint) envs="$envs HIPFORMERS_PERSISTENT_L2_HINT=0" ;;
            persistent_merge_attn*) envs="$envs HIPFORMERS_PERSISTENT_EXCHANGE=counters HIPFORMERS_PERSISTENT_MERGE=attention" ;;
            persistent_flagged*) envs="$envs HIPFORMERS_PERSISTENT_EXCHANGE=flagged" ;;  # (the default since 2026-12-07)
            persistent_counters*) envs="$envs HIPFORMERS_PERSISTENT_EXCHANGE=counters" ;;
            persistent_ablate*) envs="$envs HIPFORMERS_PERSISTENT_ABLATE=${v#persistent_ablate}" ;;
          esac
          case "$v" in persistent*) envs="HIPFORMERS_PERSISTENT_DECODE=require $envs" ;; esac
          case "$v" in persistent*_trace) envs="$envs HIPFORMERS_PERSISTENT_TRACE=1" ;; esac
          printf '%-14s batch %s prompt %s: ' "$vm" "$b" "${AB_PROMPT:-128}"
          err=/tmp/ab_err_b$b.txt
          env $envs timeout 120 "$prog" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch "$b" 2>"$err" \
            --prompt-len "${AB_PROMPT:-128}" --gen-len "${AB_GEN:-128}" $extra --json | tee -a "$OUT/ab.jsonl" | python3 -c '
import json,sys
try:
    r=json.loads(sys.stdin.read())
except ValueError:
    sys.exit("failed (no result: its stderr follows)")
print("%.3f ms/step, decode %.0f tok/s, prefill %.0f tok/s" % (r["ms_per_decode_step"], r["decode_tokens_per_s"],
      r["prefill_tokens_per_s"]))'
          # stderr, whole, in one file under $OUT (the device tool returns a few files only)
          { echo "== $vm batch $b"; cat "$err"; } >>"$OUT/ab_stderr.txt"
          # and on the console: whole for the traced variants (their tables), else its last lines
          case "$v" in *trace*) cat "$err" ;; *) tail -n 3 "$err" ;; esac
        done
      done ;;
    persistent_diag)
      # The persistent step's GPU test first (its correctness makes the timings mean something),
      # then its batch-1 ab variants against the per-kernel default (the ablations are time
      # only), then the stream prototype; DIAG_VARIANTS narrows the ab list.
      echo "== test_models_gpu_decode_step_gpu_test"
      timeout 150 .devbuild/bin/test_models_gpu_decode_step_gpu_test >"$OUT/decode_step_gpu_test.txt" 2>&1
      echo "exit $?"
      grep -E '^\[ *(OK|FAILED|PASSED) |Failure|trapping' "$OUT/decode_step_gpu_test.txt" | tail -20
      AB_BATCHES=1 AB_VARIANTS="${DIAG_VARIANTS:-default persistent_flagged persistent_flagged+split persistent_counters \
persistent_flagged+env:HIPFORMERS_PERSISTENT_ABLATE=1 persistent_flagged+env:HIPFORMERS_PERSISTENT_ABLATE=2 \
persistent_flagged+env:HIPFORMERS_PERSISTENT_ABLATE=4 persistent_flagged+env:HIPFORMERS_PERSISTENT_ABLATE=8 \
persistent_flagged+env:HIPFORMERS_PERSISTENT_ABLATE=16 default persistent_flagged}" bench/device_bench.sh ab 2>&1 | tee "$OUT/ab.txt"
      echo "== decode_stream_proto"
      timeout 60 .devbuild/bin/decode_stream_proto 2>&1 | tee "$OUT/proto.txt" | tail -30 ;;
    profile_step)
      # Where the persistent step's warps stall: Nsight Compute's PC sampling of one step (the
      # flagged exchange; PROFILE_ENV adds switches), printed by source line and by SASS
      # instruction (the kernel's object is built with -lineinfo). Caches and clocks as they are.
      mkdir -p /work && [ -e /work/main ] || ln -s "$PWD" /work/main 2>/dev/null  # the build's source paths
      env HIPFORMERS_PERSISTENT_DECODE=require HIPFORMERS_PERSISTENT_EXCHANGE=flagged ${PROFILE_ENV:-} \
        HIPFORMERS_DISABLE_GRAPHS=1 timeout 300 ncu -k regex:decode_step_kernel --launch-skip 40 --launch-count 1 \
        --cache-control none --clock-control none --set full --import-source yes -f -o "$OUT/step" \
        "$HF" bench --model "$MODEL" --device cuda --dtype bfloat16 --batch 1 --prompt-len 128 --gen-len 64 \
        --warmup 0 --repeat 1 >"$OUT/step_ncu.log" 2>&1
      echo "exit $?"; tail -n 4 "$OUT/step_ncu.log"
      ncu --import "$OUT/step.ncu-rep" --page details --print-details all >"$OUT/step_details.txt" 2>&1
      ncu --import "$OUT/step.ncu-rep" --page raw --csv >"$OUT/step_raw.csv" 2>&1
      ncu --import "$OUT/step.ncu-rep" --page source --csv --print-source sass >/tmp/step_sass.csv 2>&1
      echo "source page: exit $?, $(wc -l </tmp/step_sass.csv) lines"
      python3 bench/ncu_source_top.py /tmp/step_sass.csv 150 >"$OUT/step_sass_top.txt" 2>&1
      head -n 60 "$OUT/step_sass_top.txt" | cut -c1-110
      grep -iE "stall|Warp Cycles|Executed Instructions|Issued Instructions" "$OUT/step_details.txt" | head -60
      # the device tool brings back a few files only: the two text summaries
      # stay loose, the report (for ncu --import), raw page and log go in one archive
      tar -C "$OUT" -czf "$OUT/step_profile.tgz" step.ncu-rep step_raw.csv step_ncu.log &&
        rm -f "$OUT/step.ncu-rep" "$OUT/step_raw.csv" "$OUT/step_ncu.log" ;;
    trace)
      # One decode-graph replay traced block by block (a build configured
      # with -DHIPFORMERS_STEP_TRACE=ON, staged as HF_TRACE), summarised by
      # bench/step_trace.py. TRACE_ENV / TRACE_ARGS: variant switches and
      # bench arguments for the traced run, TRACE_TAG: its files' suffix.
      HF_TRACE=${HF_TRACE:-$PWD/.devbuild/bin/hipformers-trace}
      for b in ${TRACE_BATCHES:-1}; do
        echo "== step trace, batch $b ${TRACE_ENV:-}"
        env ${TRACE_ENV:-} HIPFORMERS_STEP_TRACE_FILE="$OUT/trace_b$b${TRACE_TAG:-}.csv" timeout 120 "$HF_TRACE" bench --model "$MODEL" \
          --device cuda --dtype bfloat16 --batch "$b" --prompt-len 128 --gen-len 64 --warmup 0 --repeat 1 ${TRACE_ARGS:-} >/dev/null
        echo "exit $?"
        T="$OUT/trace_b$b${TRACE_TAG:-}"
        python3 bench/step_trace.py "$T.csv" --all >"$T.txt" 2>&1
        head -2 "$T.txt"
        sed -n '/^unit of/,$p' "$T.txt"
      done ;;
    compare)
      cp docs/PERFORMANCE.md "$OUT/PERFORMANCE.md"
      # COMPARE_ARGS: e.g. "--timeout 150 --repeat 2" to fit a short lease.
      python3 bench/compare_transformers.py --hipformers "$HF" --model-dir "$MODEL" ${COMPARE_ARGS:---timeout 400} \
        --update-doc "$OUT/PERFORMANCE.md" 2>&1 | tail -20 ;;
  esac
done
