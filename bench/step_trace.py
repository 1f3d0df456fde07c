#!/usr/bin/env python3
"""Reads a step trace (HIPFORMERS_STEP_TRACE_FILE, src/kernels/gpu/step_trace.h)
and prints where the step's time went, kernel by kernel.

Times: %globaltimer is one clock for the GPU but may tick coarsely; clock64 is
fine-grained but per SM. Each SM's clock64 is mapped onto the global timer by
one slope (fitted over all SMs) and one offset per SM, so block events on
different SMs compare to a fraction of a tick.

Per kernel (launch order = first block's begin): its grid, when its first
block began, when its blocks' dependency waits returned (first / last), when
its last block ended; "gap" is from the previous kernel's last end to this
kernel's first wait return (what the dependency costs), "work" from there
to its last end. Kernels repeat per layer: the repeating unit is
found from the grid sizes and each phase is averaged over the layers.

usage: bench/step_trace.py TRACE.csv [--all]
"""
import csv
import sys
from collections import defaultdict

BEGIN, TRIGGER, WAITED, END = 0, 1, 2, 3


def main():
    path = sys.argv[1]
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            rows.append({k: int(v) for k, v in r.items()})
    if not rows:
        sys.exit("no records")
    # Relative integers first: a double cannot hold ~1.8e18 ns to the nanosecond.
    g0 = min(r["globaltimer_ns"] for r in rows)
    c0 = min(r["clock"] for r in rows)
    for r in rows:
        r["globaltimer_ns"] -= g0
        r["clock"] -= c0
    # One slope for all SMs: regress globaltimer on clock within each SM (centred).
    by_sm = defaultdict(list)
    for r in rows:
        by_sm[r["sm"]].append(r)
    num = den = 0.0
    for recs in by_sm.values():
        if len(recs) < 2:
            continue
        mc = sum(r["clock"] for r in recs) / len(recs)
        mg = sum(r["globaltimer_ns"] for r in recs) / len(recs)
        for r in recs:
            dc = r["clock"] - mc
            num += dc * (r["globaltimer_ns"] - mg)
            den += dc * dc
    slope = num / den if den > 0 else 0.0
    offset = {}
    for sm, recs in by_sm.items():
        offset[sm] = sum(r["globaltimer_ns"] - slope * r["clock"] for r in recs) / len(recs)
    for r in rows:
        r["t"] = (slope * r["clock"] + offset[r["sm"]]) / 1000.0 if slope > 0 else r["globaltimer_ns"] / 1000.0
    t0 = min(r["t"] for r in rows)
    for r in rows:
        r["t"] -= t0
    print("records %d, SMs %d, clock %.3f GHz (fitted)" % (len(rows), len(by_sm), 1.0 / slope if slope else 0))

    kernels = defaultdict(lambda: defaultdict(list))
    grid = {}
    for r in rows:
        kernels[r["gridid"]][r["event"]].append(r["t"])
        grid[r["gridid"]] = r["grid"]
    order = sorted(kernels, key=lambda g: min(min(v) for v in kernels[g].values()))
    table = []
    prev_end = None
    for g in order:
        ev = kernels[g]
        begin = min(ev[BEGIN] or ev[TRIGGER] or ev[WAITED] or ev[END])
        waited_first = min(ev[WAITED]) if ev[WAITED] else None
        waited_last = max(ev[WAITED]) if ev[WAITED] else None
        end = max(ev[END]) if ev[END] else None
        gap = waited_first - prev_end if (waited_first is not None and prev_end is not None) else None
        work = end - waited_first if (end is not None and waited_first is not None) else None
        table.append(dict(grid=grid[g], begin=begin, wf=waited_first, wl=waited_last, end=end, gap=gap, work=work,
                          blocks=len(ev[BEGIN]) or len(ev[TRIGGER])))
        if end is not None:
            prev_end = end if prev_end is None else max(prev_end, end)
    step = max(t["end"] or 0 for t in table)
    print("kernels %d, step %.1f us (first begin to last end)" % (len(table), step))

    def fmt(v):
        return "%8.2f" % v if v is not None else "       -"

    if "--all" in sys.argv:
        print("   #   grid  blocks    begin  wait-1st wait-last     end      gap     work")
        for i, t in enumerate(table):
            print("%4d %6d %7d %s %s %s %s %s %s" % (i, t["grid"], t["blocks"], fmt(t["begin"]), fmt(t["wf"]),
                                                      fmt(t["wl"]), fmt(t["end"]), fmt(t["gap"]), fmt(t["work"])))
    # The per-layer unit: the shortest period p with grid[i] == grid[i + p] over the middle of the step.
    grids = [t["grid"] for t in table]
    n = len(grids)
    best = None
    for p in range(2, 16):
        lo, hi = n // 4, 3 * n // 4
        if hi + p >= n:
            break
        if all(grids[i] == grids[i + p] for i in range(lo, hi)):
            best = p
            break
    if not best:
        print("no repeating unit found")
        return
    # Phase 0: the first kernel of the middle whose grid starts the unit seen most often at i % p.
    lo, hi = n // 4, 3 * n // 4
    phase = defaultdict(list)
    for i in range(lo, lo + ((hi - lo) // best) * best):
        phase[(i - lo) % best].append(table[i])
    layers = (hi - lo) // best
    print("unit of %d kernels, averaged over %d units from kernel %d:" % (best, layers, lo))
    print("phase   grid  blocks  gap(us)  work(us)  begin->end(us)  share")
    unit = 0.0
    rows_out = []
    for k in range(best):
        ts = phase[k]
        mean = lambda key: sum(t[key] for t in ts if t[key] is not None) / max(1, sum(1 for t in ts if t[key] is not None))
        g, w = mean("gap"), mean("work")
        span = sum((t["end"] or 0) - t["begin"] for t in ts) / len(ts)
        unit += g + w
        rows_out.append((k, ts[0]["grid"], ts[0]["blocks"], g, w, span))
    for k, g_, b, g, w, span in rows_out:
        print("%5d %6d %7d %8.2f %9.2f %15.2f  %4.0f%%" % (k, g_, b, g, w, span, 100 * (g + w) / unit if unit else 0))
    print("unit total (gaps + work) %.2f us" % unit)


if __name__ == "__main__":
    main()
