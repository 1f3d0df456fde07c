#!/usr/bin/env python3
"""Transformers' logits and greedy continuation for a model, to compare with hipformers.

    python3 tests/parity/reference.py --model DIR --dtype float32 --device cpu --out REFDIR \
        [--prompt-ids 1,2,3 ...] [--lengths 1,37,300] [--keep-last-rows N] [--attn sdpa|eager]

Writes REFDIR/reference.safetensors (input_ids_<i> I64, logits_<i> F32 [rows, vocab],
rows_<i> I64 positions of those rows) and REFDIR/reference.json
({"dtype", "device", "attn", "num_prompts", "greedy_prompt", "greedy_tokens"}).
Without --prompt-ids, prompts of --lengths random ids are drawn (seeded).
The greedy continuation (24 tokens, EOS masked by min_new_tokens) starts from prompt 1.
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import save_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    ap.add_argument("--prompt-ids", action="append", help="comma-separated ids; repeat for several prompts")
    ap.add_argument("--lengths", default="1,37,300")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--keep-last-rows", type=int, default=0,
                    help="for prompts over 64 tokens store only the last N logits rows (keeps CI files small)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.model, dtype=getattr(torch, args.dtype), attn_implementation=args.attn).to(args.device).eval()
    vocab = model.config.vocab_size
    if args.prompt_ids:
        prompts = [[int(t) for t in p.split(",") if t.strip()] for p in args.prompt_ids]
    else:
        # Ordinary tokens only (below Qwen's special ids when the vocab is real-sized).
        high = min(vocab, 151643)
        prompts = [torch.randint(3, high, (int(n),)).tolist() for n in args.lengths.split(",")]

    tensors = {}
    with torch.no_grad():
        for i, ids in enumerate(prompts):
            logits = model(torch.tensor([ids], device=args.device)).logits[0].float().cpu()
            rows = torch.arange(len(ids))
            if args.keep_last_rows and len(ids) > 64:
                rows = rows[-args.keep_last_rows:]
            tensors[f"input_ids_{i}"] = torch.tensor(ids, dtype=torch.int64)
            tensors[f"logits_{i}"] = logits[rows].contiguous()
            tensors[f"rows_{i}"] = rows.to(torch.int64)
        greedy_prompt = 1 if len(prompts) > 1 else 0
        prompt = torch.tensor([prompts[greedy_prompt]], device=args.device)
        out = model.generate(prompt, do_sample=False, max_new_tokens=args.new_tokens,
                             min_new_tokens=args.new_tokens, attention_mask=torch.ones_like(prompt),
                             pad_token_id=0)
        greedy = out[0, prompt.shape[1]:].tolist()

    os.makedirs(args.out, exist_ok=True)
    save_file(tensors, os.path.join(args.out, "reference.safetensors"))
    meta = dict(dtype=args.dtype, device=args.device, attn=args.attn, num_prompts=len(prompts),
                greedy_prompt=greedy_prompt, greedy_tokens=greedy,
                transformers=transformers.__version__, torch=torch.__version__)
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{args.out}: {len(prompts)} prompts ({[len(p) for p in prompts]} tokens), greedy {greedy}")


if __name__ == "__main__":
    main()
