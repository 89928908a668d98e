"""mixq.torch.Linear at many tokens: float32 against bfloat16 activations.

A model run in bfloat16 (diffusers' torch_dtype=torch.bfloat16) hands every
quantized linear bfloat16 activations and takes bfloat16 back; the layer's
kernels compute from float32. This times the module call for both dtypes on
one layer of each of three formats (K = N = 3072, random weights), M = 1024
and 4096 rows, in interleaved rounds (best round of each), with the C++
forward alone (`_time_forward`, float32 input into a kept output) as the
floor, and torch's F.linear on the float weight in the same dtype beside
(what the layer replaces). 2 threads unless --threads.

    build/venv/bin/python python/bench/bench_dtypes.py   (after scripts/torch_test.sh --install-only)
"""
import argparse
import os
import pathlib
import subprocess
import tempfile
import time

import numpy as np
import torch

import mixq
from mixq.torch import Linear

RULES = {"fp8": "float8_e4m3fn", "int8": "int8_tensorwise:convrot=true", "nvfp4": "nvfp4"}


def timed(call):
    """call as a measure: the seconds it took."""
    def measure():
        t0 = time.perf_counter()
        call()
        return time.perf_counter() - t0
    return measure


def best(measures, rounds):
    """Runs each measure once per round, interleaved; the best seconds of each."""
    results = [float("inf")] * len(measures)
    for _ in range(rounds):
        for i, measure in enumerate(measures):
            results[i] = min(results[i], measure())
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--m", type=int, action="append")
    parser.add_argument("--k", type=int, default=3072)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    mixq.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=pathlib.Path(__file__).parent).stdout.strip()
    print(f"# commit {commit}, mixq from {pathlib.Path(mixq.__file__).parent}, torch {torch.__version__}, "
          f"{args.threads} threads, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"# best of {args.rounds} interleaved rounds, ms per call; K = N = {args.k}")
    print("| layer | M | C++ forward (f32) | module f32 | module bf16 | bf16 / f32 | F.linear f32 | F.linear bf16 |")
    print("|---|---|---|---|---|---|---|---|")
    k = n = args.k
    with tempfile.TemporaryDirectory() as tmp:
        src, out = pathlib.Path(tmp) / "f.safetensors", pathlib.Path(tmp) / "q.safetensors"
        weights = {name: rng.standard_normal((n, k), np.float32) * 0.05 for name in RULES}
        mixq.save_file(src, {f"l.{name}.weight": w for name, w in weights.items()})
        mixq.quantize(src, out, rules=[f"l.{name}={rule}" for name, rule in RULES.items()])
        ckpt = mixq.open(out)
        for name in RULES:
            layer = ckpt.linear(f"l.{name}")
            module = Linear(layer)
            w32 = torch.from_numpy(weights[name])
            w16 = w32.to(torch.bfloat16)
            for m in args.m or [1024, 4096]:
                x32 = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
                x16 = x32.to(torch.bfloat16)
                xn = x32.numpy()
                with torch.inference_mode():
                    # _time_forward: one call timed inside the extension, after one warm-up call
                    measures = [lambda: layer._time_forward(xn, 1), timed(lambda: module(x32)),
                                timed(lambda: module(x16)), timed(lambda: torch.nn.functional.linear(x32, w32)),
                                timed(lambda: torch.nn.functional.linear(x16, w16))]
                    t = best(measures, args.rounds)
                ms = [f"{v * 1e3:.1f}" for v in t]
                print(f"| {name} ({layer.kernel}) | {m} | {ms[0]} | {ms[1]} | {ms[2]} | {t[2] / t[1]:.2f} | "
                      f"{ms[3]} | {ms[4]} |")


if __name__ == "__main__":
    main()
