#!/usr/bin/env python3
"""Local stand-in for chat_template_reference.py when Transformers is not
installed: emulates Transformers' chat-template environment with plain jinja2
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the
custom tojson filter, raise_exception, strftime_now, {% generation %}) and
renders with the special tokens of tokenizer_config.json.

    python3 tests/parity/chat_template_reference_local.py --tokenizer-dir DIR \
        --conversations tests/data/chat_template/conversations.json --output OUT.json
"""
import argparse
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTracker(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


SPECIAL = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token",
           "additional_special_tokens"]


def special_tokens(config):
    out = {}
    for key in SPECIAL:
        v = config.get(key)
        if v is None:
            continue
        if isinstance(v, dict):
            v = v.get("content")
        if isinstance(v, list):
            v = [t.get("content") if isinstance(t, dict) else t for t in v]
        out[key] = v
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer-dir", required=True)
    ap.add_argument("--conversations", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    with open(f"{args.tokenizer_dir}/tokenizer_config.json", encoding="utf-8") as f:
        config = json.load(f)
    template = make_env().from_string(config["chat_template"])
    specials = special_tokens(config)
    with open(args.conversations, encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for case in cases:
        kwargs = dict(specials)
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        try:
            text = template.render(messages=case["messages"], tools=case.get("tools"), documents=None,
                                   add_generation_prompt=case.get("add_generation_prompt", False), **kwargs)
            out.append({"name": case["name"], "text": text, "error": None})
        except Exception as e:  # noqa: BLE001
            out.append({"name": case["name"], "text": None, "error": f"{type(e).__name__}: {e}"})
    result = {"generator": f"jinja2 {jinja2.__version__} emulation of Transformers (chat_template_reference_local.py)",
              "cases": out}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(out)} cases to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
