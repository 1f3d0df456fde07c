#!/usr/bin/env python3
"""Side-by-side speed of hipformers and Hugging Face Transformers on one GPU.

One run: makes (or reuses) a random-weight Qwen3-0.6B checkpoint with
`hipformers make-model --shape qwen3-0.6b`, times Transformers (eager, sdpa,
static cache + torch.compile) and `hipformers bench --json` on the same shapes,
and prints a markdown table (device, versions, date). With --update-doc FILE the
table replaces what lies between `<!-- bench:begin -->` and `<!-- bench:end -->`
in FILE (the markers must already be there).

    python3 bench/compare_transformers.py --hipformers build/cuda/tools/hipformers/hipformers \
        --update-doc docs/PERFORMANCE.md

Every measurement runs in its own subprocess with a timeout, so a hang, an
out-of-memory or a failed torch.compile becomes one "error" cell, not a lost run.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

# name, batch, prompt_len, gen_len (new tokens, the first from prefill)
CASES = [
    ("decode 1x128+128", 1, 128, 128),
    ("decode 64x128+128", 64, 128, 128),
    ("prefill 1x4096", 1, 4096, 2),
]
TF_MODES = ["eager", "sdpa", "static+compile"]
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def worker(args):
    """Times one Transformers mode on one case; prints one JSON object."""
    import torch
    import transformers

    mode, batch, prompt_len, gen_len = args.worker, args.batch, args.prompt_len, args.gen_len
    dtype = getattr(torch, args.dtype)
    attn = "eager" if mode == "eager" else "sdpa"
    new = tuple(int(x) for x in transformers.__version__.split(".")[:2] if x.isdigit()) >= (4, 56)
    dtype_kw = {"dtype": dtype} if new else {"torch_dtype": dtype}  # the keyword was renamed in 4.56
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model_dir, attn_implementation=attn, **dtype_kw)
    model = model.to(args.device).eval()
    gen_kwargs = dict(do_sample=False, min_new_tokens=gen_len, max_new_tokens=gen_len, pad_token_id=0)
    if mode == "static+compile":
        # Transformers' own recipe: with a static cache generate() compiles
        # the decode step itself (torch.compile, mode "reduce-overhead",
        # fullgraph; GenerationConfig.compile_config) and runs the prefill
        # uncompiled. Compiling model.forward by hand also compiles every
        # prefill shape, which did not finish in 110 s per measurement.
        gen_kwargs["cache_implementation"] = "static"
    g = torch.Generator().manual_seed(args.seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len), generator=g).to(args.device)
    mask = torch.ones_like(ids)

    def timed(fn):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    with torch.inference_mode():
        prefill = lambda: model.generate(ids, attention_mask=mask, **{**gen_kwargs, "min_new_tokens": 1, "max_new_tokens": 1})
        full = lambda: model.generate(ids, attention_mask=mask, **gen_kwargs)
        for _ in range(args.warmup):
            prefill()
            full()
        torch.cuda.reset_peak_memory_stats()
        p = sorted(timed(prefill) for _ in range(args.repeat))[args.repeat // 2]
        f = sorted(timed(full) for _ in range(args.repeat))[args.repeat // 2]
    decode_ms = max(f - p, 1e-9)
    print(json.dumps({
        "prefill_tokens_per_s": batch * prompt_len / (p * 1e-3),
        "decode_tokens_per_s": batch * (gen_len - 1) / (decode_ms * 1e-3),
        "ms_per_decode_step": decode_ms / (gen_len - 1),
        "generate_tokens_per_s": batch * gen_len / (f * 1e-3),
        "peak_memory_bytes": torch.cuda.max_memory_allocated(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "device_name": torch.cuda.get_device_name(),
    }))


def run_json(cmd, timeout):
    """Runs cmd, returns (parsed last stdout line, None) or (None, short error)."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timeout {timeout}s"
    except OSError as e:
        return None, str(e)
    if r.returncode != 0:
        tail = (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]
        return None, tail[:120]
    try:
        return json.loads(r.stdout.strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "no JSON on stdout"


def fmt(x, unit=""):
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.2f}") + unit


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hipformers", default="build/cuda/tools/hipformers/hipformers", help="the hipformers binary")
    ap.add_argument("--model-dir", default="/tmp/hipformers_bench_qwen3_0.6b",
                    help="checkpoint dir; made with make-model --shape qwen3-0.6b if absent")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    ap.add_argument("--modes", default=",".join(TF_MODES), help="Transformers modes to run (comma-separated)")
    ap.add_argument("--update-doc", metavar="FILE", help="replace the table between the bench markers in FILE")
    # Internal: one Transformers measurement.
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--prompt-len", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--gen-len", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)

    exe = os.path.abspath(args.hipformers)
    if not os.access(exe, os.X_OK):
        sys.exit(f"error: {exe} is not an executable hipformers binary (build the cuda preset, or pass --hipformers)")
    if args.update_doc:
        text = open(args.update_doc).read()
        if BEGIN not in text or END not in text or text.index(BEGIN) > text.index(END):
            sys.exit(f"error: {args.update_doc} lacks the markers {BEGIN} ... {END}")
    if not os.path.isfile(os.path.join(args.model_dir, "model.safetensors")):
        print(f"making {args.model_dir} ...", file=sys.stderr)
        r = subprocess.run([exe, "make-model", "--shape", "qwen3-0.6b", "--dtype", args.dtype,
                            "--output", args.model_dir], capture_output=True, text=True, timeout=args.timeout)
        if r.returncode != 0:
            sys.exit(f"error: make-model failed: {r.stderr.strip()}")

    modes = [m for m in args.modes.split(",") if m]
    rows, versions, device_name = [], {}, None
    for name, b, p, n in CASES:
        common = ["--warmup", str(args.warmup), "--repeat", str(args.repeat), "--seed", str(args.seed)]
        for mode in modes:
            if mode == "static+compile" and n <= 2:
                continue  # only the decode step is compiled: a prefill row would repeat sdpa's
            print(f"{name}: transformers {mode} ...", file=sys.stderr)
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--model-dir", args.model_dir,
                   "--device", args.device, "--dtype", args.dtype, "--batch", str(b), "--prompt-len", str(p),
                   "--gen-len", str(n)] + common
            res, err = run_json(cmd, args.timeout)
            if res:
                versions = {"torch": res["torch"], "transformers": res["transformers"]}
                device_name = device_name or res["device_name"]
            rows.append((name, f"transformers {mode}", res, err))
        print(f"{name}: hipformers ...", file=sys.stderr)
        cmd = [exe, "bench", "--model", args.model_dir, "--batch", str(b), "--prompt-len", str(p), "--gen-len", str(n),
               "--dtype", args.dtype, "--device", args.device, "--json"] + common
        res, err = run_json(cmd, args.timeout)
        if res:
            versions["hipformers"] = res["hipformers_version"]
            device_name = device_name or res["device_name"]
            extra = " (serial)" if not res.get("batched", True) and b > 1 else ""
            rows.append((name, "hipformers" + extra, res, err))
        else:
            rows.append((name, "hipformers", None, err))

    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = [f"Device: {device_name or args.device}; dtype {args.dtype}; random-weight Qwen3-0.6B shape; "
           + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())) + f"; {date}; median of {args.repeat}.", "",
           "| case | engine | prefill tok/s | decode tok/s | generated tok/s end to end | ms/step | peak GiB | % copy BW |",
           "|---|---|---|---|---|---|---|---|"]
    for name, engine, r, err in rows:
        if r is None:
            out.append(f"| {name} | {engine} | error: {err.replace('|', '/')} | | | | | |")
            continue
        bw = r.get("bandwidth_fraction")
        decode = None if name.startswith("prefill") else r["decode_tokens_per_s"]
        step = None if name.startswith("prefill") else r["ms_per_decode_step"]
        e2e = None if name.startswith("prefill") else r.get("generate_tokens_per_s")
        out.append(f"| {name} | {engine} | {fmt(r['prefill_tokens_per_s'])} | {fmt(decode)} | {fmt(e2e)} | {fmt(step)} | "
                   f"{fmt(r['peak_memory_bytes'] / 2**30)} | {fmt(None if bw is None or decode is None else 100 * bw)} |")
    table = "\n".join(out)
    print(table)
    if args.update_doc:
        text = open(args.update_doc).read()
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        with open(args.update_doc, "w") as f:
            f.write(head + BEGIN + "\n" + table + "\n" + END + tail)
        print(f"updated {args.update_doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
