#!/usr/bin/env python3
"""Generates tests/data/chat_template/jinja_cases.json: small templates rendered
by jinja2 in Transformers' chat-template environment (see
chat_template_reference_local.py), for tests/tokenizer/chat/chat_template_jinja_test.cc.
Each case: {"template", "context", "text"} or {"template", "context", "error"}.

    python3 tests/parity/chat_template_jinja_cases.py --output tests/data/chat_template/jinja_cases.json
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_reference_local import make_env  # noqa: E402

CTX = {
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Hi there"},
                 {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello", "tool_calls": [
                     {"function": {"name": "f", "arguments": {"a": 1, "b": [1.5, "x"]}}}]}],
    "d": {"b": 2, "a": 1, "items": "shadow", "nested": {"k": [1, 2, 3]}},
    "l": [3, 1, 2],
    "s": "Hello World",
    "f": 0.5,
    "n": None,
    "t": True,
    "users": [{"name": "bob", "age": 30, "admin": True}, {"name": "Al", "age": 25, "admin": False},
              {"name": "cy", "age": 35}],
}

TEMPLATES = [
    # literals and printing
    "{{ 1 }}|{{ 1.0 }}|{{ -0.0 }}|{{ 1e-5 }}|{{ 1e16 }}|{{ 123456789.125 }}|{{ 0.1 + 0.2 }}|{{ 1_000 }}|{{ 0x1F }}",
    "{{ true }}|{{ True }}|{{ none }}|{{ None }}|{{ false }}",
    "{{ [1, 'a', none, true, 1.5, {'k': 'v'}, ('t',), (1, 2), []] }}",
    "{{ \"it's\" }}|{{ ['it\\'s', 'a\"b', 'x\\ny', 'tab\\t', '\\x01', 'é', '\\u00a0'] }}",
    "{{ 'a\\x41\\u00e9\\U0001F600\\101\\q' }}",
    "{{ 'ab' 'cd' }}",
    "{{ d }}|{{ n }}|{{ l }}|{{ s }}",
    "{{ 1, 2 }}|{{ (1,) }}|{{ () }}",
    # arithmetic
    "{{ 2**3**2 }} {{ -2**2 }} {{ 7//-2 }} {{ -7 % 3 }} {{ 1/2 }} {{ 4/2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -1 }} {{ 2 ** 0.5 }}",
    "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 'ab' * 3 }} {{ 3 * 'ab' }} {{ [1] * 3 }} {{ [1] + [2] }} {{ 'a' ~ 1 ~ none ~ undefined_var }}",
    "{{ 10 / 0 }}",
    "{{ 'a' + 1 }}",
    "{{ 1 + 'a' }}",
    "{{ true + 1 }} {{ 1.5 + true }} {{ -t }} {{ +f }}",
    # comparisons and logic
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ (1,) == [1] }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }}",
    "{{ 2 in [1, 2] }} {{ 'a' not in 'abc' }} {{ 'a' in d }} {{ 'items' in d }} {{ 'x' in undefined_var }}",
    "{{ 'a' < 1 }}",
    "{{ 1 in 'abc' }}",
    "{{ 1 in n }}",
    "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ none or [] }} {{ not none }} {{ not 'a' }} {{ '' and 1 }}",
    "{{ 'x' if t else 'y' }}|{{ 'x' if n else 'y' }}|{{ 'x' if n }}|{{ ('x' if n) is defined }}",
    # attribute and item access
    "{{ d.a }} {{ d['b'] }} {{ d.items is defined }} {{ d['items'] }} {{ d.nested.k[1] }} {{ d.nested['k'][-1] }} {{ d.missing }}|{{ d.missing is defined }}",
    "{{ l[0] }} {{ l[-1] }} {{ l[5] }}|{{ s[0] }} {{ s[-1] }} {{ s[100] }}|{{ l.0 }}",
    "{{ l[::-1] }} {{ l[1:] }} {{ l[:1] }} {{ l[::2] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[-3:] }} {{ s[:-3] }} {{ l[5:] }} {{ l[-100:100] }}",
    "{{ 'héllo wörld'[1] }} {{ 'héllo wörld'[1:5] }} {{ 'héllo wörld'|length }} {{ 'héllo'[::-1] }}",
    "{{ d.missing.x }}",
    "{{ undefined_var.x }}",
    "{{ undefined_var() }}",
    "{{ n.x }}|{{ n.x is defined }}",
    "{{ l[::0] }}",
    "{{ messages[0].role }} {{ messages[1]['content'] }} {{ messages|length }} {{ messages[-1].tool_calls[0].function.arguments }}",
    # tests
    "{{ x is defined }} {{ d is defined }} {{ n is none }} {{ n is not none }} {{ s is string }} {{ 1 is number }} {{ t is number }} {{ 1 is integer }} {{ 1.0 is integer }} {{ 1.0 is float }} {{ t is boolean }} {{ 1 is boolean }}",
    "{{ d is mapping }} {{ l is mapping }} {{ l is iterable }} {{ s is iterable }} {{ 1 is iterable }} {{ l is sequence }} {{ d is sequence }} {{ t is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }}",
    "{{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 2 is in [1, 2] }}",
    "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }} {{ range is callable }} {{ n is sameas none }} {{ 'upper' is filter }} {{ 'odd' is test }}",
    # filters
    "{{ s|length }} {{ l|count }} {{ d|length }} {{ undefined_var|length }}",
    "{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }} {{ s|lower }} {{ 'hello wORLD-foo(bar)'|title }} {{ 'hELLO wORLD'|capitalize }}",
    "{{ s|replace('o', '0') }} {{ s|replace('o', '0', 1) }} {{ 'abc'|replace('', '-') }}",
    "{{ l|join(', ') }} {{ l|join }} {{ users|join(',', attribute='name') }} {{ 'abc'|join('-') }}",
    "{{ l|first }} {{ l|last }} {{ []|first }}|{{ s|first }} {{ d|first }}",
    "{{ undefined_var|default('dv') }} {{ ''|default('dv') }} {{ ''|default('dv', true) }} {{ n|default('dv') }} {{ undefined_var|d('x') }}",
    "{{ 1|string }} {{ l|string }} {{ n|string }} {{ undefined_var|string }}|",
    "{{ '12'|int }} {{ '1.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ ' 5 '|int }} {{ '1.5'|float }} {{ 'abc'|float }} {{ 2|float }} {{ true|int }}",
    "{{ s|list }} {{ d|list }} {{ d|items|list }} {{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ {'b': 1, 'A': 2, 'a': 0}|dictsort }} {{ {'x': 2, 'y': 1}|dictsort(by='value') }}",
    "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('age', 'gt', 26)|map(attribute='name')|join(',') }} {{ users|selectattr('name', 'equalto', 'Al')|list|length }}",
    "{{ users|map(attribute='admin', default='?')|list }} {{ l|map('string')|list }} {{ ['a', 'B']|map('upper')|list }}",
    "{{ l|select('odd')|list }} {{ l|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }}",
    "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ s|reverse }} {{ l|reverse|list }}",
    "{{ l|sort }} {{ l|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ users|sort(attribute='age')|map(attribute='name')|join(',') }}",
    "{{ l|sum }} {{ [1, 2.5]|sum }} {{ users|sum(attribute='age') }} {{ l|min }} {{ l|max }} {{ ['b', 'A']|min }} {{ users|max(attribute='age') }}",
    "{{ 3|round }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 2.5|round(0, 'floor') }} {{ 2.1|round(0, 'ceil') }} {{ 1234.5|round(-2) }} {{ -3|abs }} {{ -2.5|abs }}",
    "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('--', blank=true) }}|{{ 'x'|indent }}",
    "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ '<b>'|safe }}",
    "{{ '%s-%d-%05.2f'|format('x', 3, 2.5) }} {{ '%(a)s'|format(a=1) }} {{ 'x%%'|format() }} {{ '%s and %r' % ('a', 'b') }}",
    "{{ l|batch(2)|list }} {{ l|batch(2, 0)|list }} {{ s|wordcount }}",
    # tojson
    "{{ d|tojson }}|{{ messages[2].tool_calls[0]|tojson }}|{{ 'é\"\\n\\t\\u0001'|tojson }}|{{ [1.0, 1e-05, 0.5, 100000000000000000000.0, none, true]|tojson }}",
    "{{ d|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ {}|tojson(indent=4) }}|{{ {'a': [1, {'b': []}]}|tojson(indent=1) }}",
    "{{ d|tojson(sort_keys=true) }}|{{ d|tojson(separators=(',', ':')) }}|{{ 'é😀'|tojson(ensure_ascii=true) }}|{{ {1: 2, 1.5: 3, true: 4, none: 5}|tojson }}",
    "{{ undefined_var|tojson }}",
    # methods
    "{{ s.startswith('He') }} {{ s.endswith('x') }} {{ s.startswith(('x', 'H')) }} {{ s.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a  b '.split() }} {{ ' a b '.split(none, 1) }}",
    "{{ '  x \\n'.strip() }}|{{ 'xxyxx'.strip('x') }}|{{ '\\n\\nx'.lstrip('\\n') }}|{{ 'x  '.rstrip() }}|{{ s.upper() }} {{ s.lower() }} {{ 'hello world 1st'.title() }} {{ 'hELLO'.capitalize() }}",
    "{{ s.replace('l', 'L') }} {{ s.replace('l', 'L', 2) }} {{ s.count('l') }} {{ s.find('o') }} {{ s.find('z') }} {{ s.rfind('o') }} {{ 'a{}b{}'.format(1, 'x') }} {{ '{0}-{0}'.format(7) }} {{ '{k}'.format(k=none) }} {{ '-'.join(['a', 'b']) }}",
    "{{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }} {{ l.index(1) }} {{ l.count(3) }}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}",
    "{{ l.append(4) }}",
    "{{ d.update({'x': 1}) }}",
    "{{ l.append }}|",
    "{{ s.nosuch }}|{{ s.nosuch is defined }}",
    "{{ s.nosuch() }}",
    # statements
    "{% if t %}a{% elif n %}b{% else %}c{% endif %}{% if n %}a{% elif t %}b{% endif %}{% if n %}a{% else %}c{% endif %}",
    "{% for i in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
    "{% for i in l %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }};{% endfor %}",
    "{% for i in l if i > 1 %}{{ loop.index }}/{{ loop.length }}:{{ i }} {% endfor %}",
    "{% for i in [] %}x{% else %}empty{% endfor %}{% for i in l if i > 10 %}x{% else %}none{% endfor %}",
    "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}",
    "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }}{% endfor %}{% for (a, b) in [(5, 6)] %}{{ a * b }}{% endfor %}",
    "{% for c in 'héy' %}[{{ c }}]{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for x in undefined_var %}x{% endfor %}",
    "{% for i in l %}{% for j in l %}{{ loop.index }}{% endfor %}{{ loop.index }}|{% endfor %}",
    "{% for x in 5 %}{% endfor %}",
    "{% set x = 5 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}[{{ x }}]",
    "{% for i in [1, 2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}[{{ y }}]",
    "{% set ns = namespace(a=1, b='x') %}{% for i in l %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns.c is defined }}",
    "{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}",
    "{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set y | upper %}abc{% endset %}{{ y }}",
    "{% macro m(a, b=2, c='x') %}[{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(1, c='y') }}{{ m(1, 2, 3, 4) }}",
    "{% macro greet(name) %}Hello {{ name }}{{ suffix }}{% endmacro %}{% set suffix = '!' %}{{ greet('bob') }}{% set suffix = '?' %}{{ greet('al') }}",
    "{% macro outer() %}<{{ caller() }}>{% endmacro %}{% call outer() %}inside{% endcall %}",
    "{% filter upper %}abc{{ 'd' }}{% endfilter %}",
    "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a is defined }}",
    "{% generation %}gen{{ 1 }}{% endgeneration %}",
    "{% raw %}{{ not rendered }}{% endraw %}",
    "{{ raise_exception('custom failure') }}",
    "{{ namespace(x=1).x }} {{ dict(a=1, b=2) }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }}",
    "{{ range(1000000) }}",
    # whitespace control
    "  {% if true %}\n  x\n  {% endif %}\n  {{ 'y' }}  {# c #}\n  z\n",
    "a  {%- if true -%}  b  {%- endif -%}  c\n{{- ' d ' -}}\n e {#- c -#} f",
    "line1\n    {% if true %}\n    inner\n    {% endif %}\nline2\n\n",
    "x {% if true %}y{% endif %} z\n  {%+ if true %}plus{% endif %}\n{% if true +%}\nkept{% endif %}",
    "a\r\nb\rc\n{{ 'x' }}\r\n",
    "{# comment #}\n{#- c -#}  \n  text\n{# multi\nline #}\nend",
    "  {{ 'v' }}\n  {% set q = 1 %}\n\t{% if q %}t{% endif %}",
    "{% for i in [1,2] %}\n  - {{ i }}\n{% endfor %}\n",
    "{{ {'a': {'b': 1}} }}",
    # syntax errors
    "{% if true %}unclosed",
    "{{ 1 + }}",
    "{% include 'x' %}",
    "{% for %}",
    "{{ x|nosuchfilter }}",
    "{{ x is nosuchtest }}",
    "{% endif %}",
    "{{ 'unterminated }}",
    "{# open comment",
    "{% break %}",
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    env = make_env()
    cases = []
    for src in TEMPLATES:
        case = {"template": src}
        try:
            case["text"] = env.from_string(src).render(**CTX)
        except Exception as e:  # noqa: BLE001
            case["error"] = f"{type(e).__name__}: {e}"
        cases.append(case)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump({"context": CTX, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
