#!/usr/bin/env python3
"""How far apart are two correct bf16 implementations? Runs one random-weight
model through Transformers in float32 and bfloat16 on the CPU and on CUDA and
prints max|diff|/max|ref| between each pair, per prompt length. This is the
yardstick for hipformers' bfloat16 parity bar (3e-2): if Transformers' own
CPU and GPU bf16 paths differ by more than that on a model, the model's
weights are too chaotic for a bf16 comparison to mean anything.

    python3 tests/parity/bf16_spread.py --model DIR [--lengths 1,37,300]
"""
import argparse

import torch
import transformers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--lengths", default="1,37,300")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    config = transformers.AutoConfig.from_pretrained(args.model)
    g = torch.Generator().manual_seed(args.seed)
    prompts = [torch.randint(0, config.vocab_size, (1, n), generator=g) for n in lengths]
    runs = {}
    for device in ["cpu", "cuda"]:
        for dtype in [torch.float32, torch.bfloat16]:
            model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype).to(device).eval()
            with torch.no_grad():
                runs[(device, str(dtype).split(".")[-1])] = [model(p.to(device)).logits[0].float().cpu() for p in prompts]
            del model
    ref = runs[("cpu", "float32")]
    for key, logits in runs.items():
        rel = [float((a - r).abs().max() / r.abs().max()) for a, r in zip(logits, ref)]
        print(f"{key[0]:>4} {key[1]:>8} vs cpu float32: " + "  ".join(f"{n}: {x:.3e}" for n, x in zip(lengths, rel)))
    a, b = runs[("cpu", "bfloat16")], runs[("cuda", "bfloat16")]
    rel = [float((x - y).abs().max() / y.abs().max()) for x, y in zip(a, b)]
    print(" cpu bfloat16 vs cuda bfloat16: " + "  ".join(f"{n}: {x:.3e}" for n, x in zip(lengths, rel)))


if __name__ == "__main__":
    main()
