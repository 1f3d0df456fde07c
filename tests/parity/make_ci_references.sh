#!/bin/sh
# Writes the tiny committed parity models under tests/data/models/<name>/:
# random weights + config (make_random_model.py) and Transformers' float32 CPU
# logits for prompts of 1, 37 and 300 tokens (only the last 16 rows of the long
# one, to stay small) plus the 24-token greedy continuation (reference.py),
# and the same logits from the model cast to bfloat16 and float16 (on the CPU)
# under <name>/bfloat16/ and <name>/float16/.
# tests/models/reference_test.cc checks them on every CI run.
#
# Run from the repository root on a machine with torch + transformers:
#   sh tests/parity/make_ci_references.sh [HIPFORMERS_BINARY]
# With a hipformers binary it also runs compare.py on each (CPU, float32).
set -eu
out=tests/data/models
here=$(dirname "$0")
for shape in qwen3-tiny qwen3-tiny-mqa-untied qwen2-tiny llama3-tiny mistral-tiny; do
  dir=$out/$shape
  rm -rf "$dir"
  python3 "$here/make_random_model.py" --shape "$shape" --dtype float32 --std 0.2 --seed 1 --output "$dir"
  python3 "$here/reference.py" --model "$dir" --dtype float32 --device cpu --lengths 1,37,300 \
    --keep-last-rows 16 --out "$dir"
  for dt in bfloat16 float16; do
    python3 "$here/reference.py" --model "$dir" --dtype $dt --device cpu --lengths 1,37,300 \
      --keep-last-rows 16 --out "$dir/$dt"
  done
  if [ $# -ge 1 ]; then
    python3 "$here/compare.py" --hipformers "$1" --model "$dir" --reference "$dir" --dtype float32 --device cpu
    for dt in bfloat16 float16; do
      python3 "$here/compare.py" --hipformers "$1" --model "$dir" --reference "$dir/$dt" --dtype $dt --device cpu
    done
  fi
done
du -sh "$out"/*
