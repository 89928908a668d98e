#!/usr/bin/env python3
"""Tensor parallelism on paper for the real FLUX.1 and MiniMax-H3 linear shapes
(BENCHMARKS.md "Tensor parallelism on paper", docs/TP.md).

For N = 1, 2, 4, 8 ranks it times rank 0's share of every linear layer with
`mixq bench` (column layers N/deg output rows, row layers K/deg input
features; the formats of each model's usual mixed recipe) and computes, per
rank: weight bytes, all-reduce / all-gather bytes per layer per token, and
the predicted time of one denoising step (linear layers only) at two
interconnect bandwidths, with ring collectives: all-reduce
2·(N-1)/N·bytes/bw, all-gather (N-1)/N·bytes/bw, and no overlap of
communication with compute.

Shapes (whole model):
  FLUX.1-dev: diffusers FluxTransformer2DModel's default config (19 double and
    38 single blocks, hidden 3072, 24 heads of 128, MLP 12288); recipe
    recipes/flux-nvfp4-mlp-int8-convrot-attn.json (INT8 ConvRot g256
    attention, NVFP4 MLPs and single-block proj_mlp / proj_out); a 1024x1024
    image: 4096 image + 512 text tokens. Splits as docs/TP.md: attention and
    feed-forward pairs column into row (all-reduce), single blocks gather
    attention, proj_mlp and proj_out (column).
  MiniMax-H3: docs/DISPATCH.md §8.1 (50 + 2 refiner blocks, hidden 5376, 56
    heads of 128, SwiGLU 14336); recipe recipes/nvfp4-mlp-int8-convrot-attn.json
    (INT8 ConvRot g256 qkv/out_proj, NVFP4 fc1/fc2); tokens per step assumed
    (--h3-tokens, default 16384; every time scales with it).
The AdaLN projections (kept bf16, run once per step on one row, M = 1) and the
attention itself are not linear layers of the token stream and are left out.

A degree the plan would refuse (a row shard that is not whole ConvRot groups
of 256: FLUX to_out K 3072/8 = 384, H3 out_proj 7168/8 = 896) is timed with
ConvRot group 64 instead and marked "g64".

Kernel times are measured at M = --m rows (default 256) and scaled linearly to
the layer's tokens (the kernels are compute-bound there). Default run: about
3-5 minutes on 2 threads.

  build/release/bin/mixq must exist (make build); run from the repository root:
  python3 bench/tp_model.py [--threads 2] [--m 256] [--json out.json]
"""
import argparse
import json
import pathlib
import subprocess
import sys
import time
from collections import namedtuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEGREES = (1, 2, 4, 8)
INT8 = "int8_tensorwise:convrot=true,convrot_groupsize=256"
INT8_G64 = "int8_tensorwise:convrot=true,convrot_groupsize=64"
NVFP4 = "nvfp4"
GROUP = {INT8: 256, INT8_G64: 64, NVFP4: 16}

# name, format, split ("column" | "row"), K, N, parts, token stream, layers per block,
# communication after it: "allreduce" (row), "gather" (column output all-gathered), None (kept sharded)
L = namedtuple("L", "name fmt split k n parts stream count comm")

FLUX_DOUBLE = [
    L("to_q, to_k, to_v", INT8, "column", 3072, 3072, 1, "img", 3, None),
    L("add_q_proj, add_k_proj, add_v_proj", INT8, "column", 3072, 3072, 1, "txt", 3, None),
    L("to_out.0", INT8, "row", 3072, 3072, 1, "img", 1, "allreduce"),
    L("to_add_out", INT8, "row", 3072, 3072, 1, "txt", 1, "allreduce"),
    L("ff.net.0.proj", NVFP4, "column", 3072, 12288, 1, "img", 1, None),
    L("ff.net.2", NVFP4, "row", 12288, 3072, 1, "img", 1, "allreduce"),
    L("ff_context.net.0.proj", NVFP4, "column", 3072, 12288, 1, "txt", 1, None),
    L("ff_context.net.2", NVFP4, "row", 12288, 3072, 1, "txt", 1, "allreduce"),
]
FLUX_SINGLE = [
    L("to_q, to_k, to_v (attention output gathered)", INT8, "column", 3072, 3072, 1, "all", 3, None),
    L("attention output", None, "column", 0, 3072, 1, "all", 1, "gather"),
    L("proj_mlp", NVFP4, "column", 3072, 12288, 1, "all", 1, "gather"),
    L("proj_out", NVFP4, "column", 15360, 3072, 1, "all", 1, "gather"),
]
# What a packed-row proj_out (two K bands per rank, not implemented: docs/TP.md)
# would communicate instead: one all-reduce, no gathers.
FLUX_SINGLE_PACKED_COMM = [L("proj_out (packed-row)", None, "row", 0, 3072, 1, "all", 1, "allreduce")]
H3_BLOCK = [
    L("attn.qkv_proj", INT8, "column", 5376, 21504, 3, "all", 1, None),
    L("attn.out_proj", INT8, "row", 7168, 5376, 1, "all", 1, "allreduce"),
    L("mlp.fc1", NVFP4, "column", 5376, 28672, 2, "all", 1, None),
    L("mlp.fc2", NVFP4, "row", 14336, 5376, 1, "all", 1, "allreduce"),
]
# model -> [(blocks, layers)], {stream: tokens}
MODELS = {
    "FLUX.1-dev": ([(19, FLUX_DOUBLE), (38, FLUX_SINGLE)], {"img": 4096, "txt": 512, "all": 4608}),
    "MiniMax-H3": ([(52, H3_BLOCK)], None),  # tokens from --h3-tokens
}


def shard(layer, degree):
    """(format, K, N) of rank 0's share; the format falls back to ConvRot g64
    where g256 would leave a row shard of partial groups."""
    fmt, k, n = layer.fmt, layer.k, layer.n
    if layer.split == "column":
        n //= degree
    else:
        k //= degree
        if fmt == INT8 and k % GROUP[INT8]:
            fmt = INT8_G64
    return fmt, k, n


def mixq_bench(cli, fmt, shapes, threads):
    cmd = [cli, "bench", "--format", fmt, "--threads", str(threads), "--json"]
    for m, k, n in shapes:
        cmd += ["--shape", f"{m}x{k}x{n}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    results = {}
    for r in json.loads(out)["results"]:
        if r.get("error"):
            raise SystemExit(f"mixq bench {fmt} {r['m']}x{r['k']}x{r['n']}: {r['error']}")
        results[(r["k"], r["n"])] = (r["seconds"], r["weight_bytes"])
    return results


def measure(cli, m, threads):
    """{(format, K, N): (seconds at M = m, weight bytes)} for every share."""
    wanted = {}
    for blocks, _ in MODELS.values():
        for _, layers in blocks:
            for layer in layers:
                if layer.fmt is None:
                    continue
                for degree in DEGREES:
                    fmt, k, n = shard(layer, degree)
                    wanted.setdefault(fmt, set()).add((k, n))
    times = {}
    for fmt, shapes in sorted(wanted.items()):
        start = time.perf_counter()
        got = mixq_bench(cli, fmt, [(m, k, n) for k, n in sorted(shapes)], threads)
        print(f"# mixq bench {fmt}: {len(shapes)} shapes in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        for (k, n), value in got.items():
            times[(fmt, k, n)] = value
    return times


def comm_bytes_of(blocks, degree, tokens, act_bytes=2):
    """Bytes each rank sends per step over the ring for these blocks."""
    total = 0.0
    for count, layers in blocks:
        for layer in layers:
            if layer.comm and degree > 1:
                factor = 2 * (degree - 1) / degree if layer.comm == "allreduce" else (degree - 1) / degree
                total += count * layer.count * factor * layer.n * act_bytes * tokens[layer.stream]
    return total


def model_rows(name, tokens, times, m, act_bytes, bandwidths):
    blocks, _ = MODELS[name]
    rows = []
    for degree in DEGREES:
        compute = weight_bytes = ops = 0.0
        comm_bytes = 0.0  # bytes each rank sends per step (ring), summed over layers
        per_token = {}  # layer -> (collective, bytes per token of the full-width result)
        fallback = set()
        for count, layers in blocks:
            for layer in layers:
                t = tokens[layer.stream]
                if layer.fmt is not None:
                    fmt, k, n = shard(layer, degree)
                    if fmt != layer.fmt:
                        fallback.add(layer.name)
                    seconds, wbytes = times[(fmt, k, n)]
                    compute += count * layer.count * seconds * t / m
                    ops += count * layer.count * 2.0 * t * k * n
                    weight_bytes += count * layer.count * wbytes
                if layer.comm and degree > 1:
                    full = layer.n * act_bytes  # the full-width activation of one token
                    factor = 2 * (degree - 1) / degree if layer.comm == "allreduce" else (degree - 1) / degree
                    comm_bytes += count * layer.count * factor * full * t
                    per_token[layer.name] = ("all-reduce" if layer.comm == "allreduce" else "all-gather", full)
        row = dict(model=name, ranks=degree, weight_bytes_per_rank=weight_bytes, compute_s=compute, ops=ops,
                   comm_bytes_per_rank=comm_bytes, per_token=per_token, fallback=sorted(fallback))
        for bw in bandwidths:
            comm = comm_bytes / (bw * 1e9)
            row[f"comm_s@{bw:g}"] = comm
            row[f"step_s@{bw:g}"] = compute + comm
        rows.append(row)
    return rows


def print_tables(rows, bandwidths, m, threads, tokens, act_bytes):
    for name in MODELS:
        mine = [r for r in rows if r["model"] == name]
        print(f"\n### {name} ({', '.join(f'{k} {v}' for k, v in tokens[name].items())} tokens; "
              f"kernels timed at M = {m}, {threads} threads)\n")
        head = ["ranks", "weights / rank", "linear compute / rank"]
        for bw in bandwidths:
            head += [f"comm @ {bw:g} GB/s", f"step @ {bw:g} GB/s", f"comm share @ {bw:g}"]
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        base = mine[0]
        for r in mine:
            cells = [f"{r['ranks']}" + (" (g64: " + ", ".join(r["fallback"]) + ")" if r["fallback"] else ""),
                     f"{r['weight_bytes_per_rank'] / 2**30:.2f} GiB", f"{r['compute_s']:.1f} s"]
            for bw in bandwidths:
                comm, step = r[f"comm_s@{bw:g}"], r[f"step_s@{bw:g}"]
                cells += [f"{comm:.2f} s", f"{step:.1f} s ({base[f'step_s@{bw:g}'] / step:.2f}x)",
                          f"{comm / step:.1%}"]
            print("| " + " | ".join(cells) + " |")
        last = mine[-1]
        print("\nper layer per token (the full-width result every rank ends with):")
        for layer, (kind, nbytes) in last["per_token"].items():
            print(f"  {layer}: {kind} of {nbytes} B")
        if name == "FLUX.1-dev":
            packed = {r["ranks"]: comm_bytes_of([(38, FLUX_SINGLE_PACKED_COMM)], r["ranks"], tokens[name], act_bytes)
                      for r in mine}
            ours = {r["ranks"]: comm_bytes_of([(38, FLUX_SINGLE)], r["ranks"], tokens[name], act_bytes) for r in mine}
            print("  single blocks' communication, column proj_out (ours) vs packed-row (not implemented), "
                  "GB per rank per step: " + ", ".join(f"N={n} {ours[n] / 1e9:.2f} vs {packed[n] / 1e9:.2f}"
                                                      for n in ours if n > 1))
        for bw in bandwidths:
            # Communication equals compute once the kernels are this much faster.
            ratios = [(r["ranks"], r["compute_s"] / r[f"comm_s@{bw:g}"]) for r in mine if r[f"comm_s@{bw:g}"] > 0]
            print(f"  at {bw:g} GB/s, communication = compute when kernels run "
                  + ", ".join(f"{x:.0f}x faster (N={n})" for n, x in ratios))
            # The same point in machine-independent terms: each rank's linear
            # operations per second at which its communication time equals them.
            print(f"  at {bw:g} GB/s, communication = compute once each rank's linears sustain "
                  + ", ".join(f"{r['ops'] / r[f'comm_s@{bw:g}'] / 1e12:.0f} TOP/s (N={r['ranks']})"
                              for r in mine if r[f"comm_s@{bw:g}"] > 0)
                  + f" (measured here: {mine[0]['ops'] / mine[0]['compute_s'] / 1e9:.0f} GOP/s at N=1)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mixq", default=str(ROOT / "build/release/bin/mixq"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--m", type=int, default=256, help="rows per timed call (default 256)")
    ap.add_argument("--h3-tokens", type=int, default=16384)
    ap.add_argument("--act-bytes", type=int, default=2, help="bytes per communicated activation (bf16: 2)")
    ap.add_argument("--bandwidth", type=float, nargs="+", default=[25.0, 100.0], help="GB/s")
    ap.add_argument("--json", help="also write every number here")
    args = ap.parse_args()
    tokens = {name: t or {"all": args.h3_tokens} for name, (_, t) in MODELS.items()}
    start = time.perf_counter()
    times = measure(args.mixq, args.m, args.threads)
    rows = []
    for name in MODELS:
        rows += model_rows(name, tokens[name], times, args.m, args.act_bytes, args.bandwidth)
    print_tables(rows, args.bandwidth, args.m, args.threads, tokens, args.act_bytes)
    print(f"\n# measured in {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            dict(m=args.m, threads=args.threads, act_bytes=args.act_bytes, tokens=tokens,
                 kernels={f"{f} {k}x{n}": v for (f, k, n), v in times.items()}, rows=rows), indent=1))


if __name__ == "__main__":
    main()
