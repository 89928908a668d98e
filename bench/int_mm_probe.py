"""Why comfy-kitchen's eager INT8 is slow on some CPUs: times torch._int_mm
(what its eager int8_linear calls) against a float32 matmul of the same
shape, in one process. BENCHMARKS.md "Whole models" quotes it.

    build/venv/bin/python bench/int_mm_probe.py [--m 256] [--k 3072] [--n 3072] [--threads 2]
"""
import argparse
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--m", type=int, default=256)
    p.add_argument("--k", type=int, default=3072)
    p.add_argument("--n", type=int, default=3072)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-127, 128, (args.m, args.k), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (args.k, args.n), dtype=torch.int8, generator=g)
    start = time.perf_counter()
    torch._int_mm(a, b)
    int_mm = time.perf_counter() - start
    af, bf = a.float(), b.float()
    start = time.perf_counter()
    af @ bf
    f32 = time.perf_counter() - start
    print(f"M={args.m} K={args.k} N={args.n}, {args.threads} threads: torch._int_mm {int_mm:.3f} s, "
          f"float32 matmul {f32:.3f} s, ratio {int_mm / f32:.1f}")


if __name__ == "__main__":
    main()
