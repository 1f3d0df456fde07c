#!/usr/bin/env python3
"""Summarises `ncu --import R --page source --csv --print-source sass` output:
the columns it has, then the instructions with the most warp-stall samples
(with their share of all samples), and the samples summed per CUDA source
line where the CSV maps instructions to lines. Usage: ncu_source_top.py CSV [N]."""
import csv
import sys
from collections import defaultdict


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return 0.0


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 80
    with open(path, newline="", errors="replace") as f:
        rows = [r for r in csv.reader(f)]
    # the header: the first row naming an address or source column
    start = next((i for i, r in enumerate(rows) if any("Source" in c for c in r) and len(r) > 3), None)
    if start is None:
        print("no table with metrics; first rows:")
        for r in rows[:5]:
            print(r)
        return
    head = rows[start]
    print("columns:", " | ".join(head))
    samples = next((i for i, c in enumerate(head) if "Sampling" in c and "All" in c), None)
    if samples is None:
        samples = next((i for i, c in enumerate(head) if "Sampling" in c), None)
    if samples is None:
        print("no sampling column")
        return
    src = head.index("Source") if "Source" in head else 1
    addr = next((i for i, c in enumerate(head) if "Address" in c), 0)
    body = [r for r in rows[start + 1:] if len(r) == len(head)]
    total = sum(number(r[samples]) for r in body) or 1.0
    print("instructions: %d, samples: %.0f (column %r)" % (len(body), total, head[samples]))
    extra = [i for i, c in enumerate(head) if "Stall" in c or "stall" in c][:12]
    executed = next((i for i, c in enumerate(head) if c == "Instructions Executed"), None)
    if executed is not None:
        total_exec = sum(number(r[executed]) for r in body) or 1.0
        print("executed warp instructions: %.0f; the most executed:" % total_exec)
        for r in sorted(body, key=lambda r: -number(r[executed]))[:top]:
            print("%6.2f%%  %s  %-60s" % (100 * number(r[executed]) / total_exec, r[addr], r[src][:60]))
        # runs of consecutive instructions (a loop body) with their share
        print("by address, every instruction (address, executed, samples, source):")
        for r in body:
            print("%s %10.0f %6.0f  %s" % (r[addr], number(r[executed]), number(r[samples]), r[src][:70]))
    print("the most stalled:")
    for r in sorted(body, key=lambda r: -number(r[samples]))[:top]:
        print("%6.2f%%  %s  %-60s %s" % (100 * number(r[samples]) / total, r[addr], r[src][:60],
                                          " ".join("%s=%s" % (head[i][:18], r[i]) for i in extra if number(r[i]) > 0)))


if __name__ == "__main__":
    main()
