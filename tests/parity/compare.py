#!/usr/bin/env python3
"""Checks hipformers against a reference.py output directory.

    python3 tests/parity/compare.py --hipformers build/cpu/tools/hipformers/hipformers \
        --model DIR --reference REFDIR --dtype float32 --device cpu [--attn sdpa]

Bars: float32 logits max|diff| / max|ref| <= 1e-4 on CPU (1e-3 on GPU),
bfloat16/float16 <= 3e-2; in float32 the 24 greedy tokens must be identical.
Exit status 1 if any bar is missed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from safetensors.numpy import load_file


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hipformers", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--attn", default="sdpa")
    args = ap.parse_args()

    meta = json.load(open(os.path.join(args.reference, "reference.json")))
    ref = load_file(os.path.join(args.reference, "reference.safetensors"))
    if args.dtype == "float32":
        bar = 1e-4 if args.device == "cpu" else 1e-3
    else:
        bar = 3e-2
    common = ["--model", args.model, "--dtype", args.dtype, "--device", args.device, "--attn", args.attn]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(meta["num_prompts"]):
            ids = ref[f"input_ids_{i}"].tolist()
            out = os.path.join(tmp, f"logits_{i}.safetensors")
            run([args.hipformers, "logits", *common, "--token-ids", ",".join(map(str, ids)), "--output", out])
            ours = load_file(out)["logits"][ref[f"rows_{i}"]]
            want = ref[f"logits_{i}"]
            rel = float(abs(ours - want).max() / abs(want).max())
            agree = float((ours.argmax(-1) == want.argmax(-1)).mean())
            passed = rel <= bar
            ok &= passed
            print(f"prompt {i} ({len(ids)} tokens): max|diff|/max|ref| = {rel:.3e} (bar {bar:g}), "
                  f"argmax agreement {agree:.3f} {'OK' if passed else 'FAIL'}")
        prompt = ref[f"input_ids_{meta['greedy_prompt']}"].tolist()
        n = len(meta["greedy_tokens"])
        out = json.loads(run([args.hipformers, "generate", *common, "--token-ids", ",".join(map(str, prompt)),
                              "--max-new-tokens", str(n), "--min-new-tokens", str(n), "--json"]))
        same = out["ids"] == meta["greedy_tokens"]
        prefix = next((k for k, (a, b) in enumerate(zip(out["ids"], meta["greedy_tokens"])) if a != b), n)
        print(f"greedy {n} tokens: {'identical' if same else f'first difference at token {prefix}'}")
        print(f"  ours: {out['ids']}\n  ref:  {meta['greedy_tokens']}")
        if args.dtype == "float32":
            ok &= same
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
