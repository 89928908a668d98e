"""Python call overhead of Linear.forward at M = 1, against the C++ call.

For each layer: the C++ Linear::forward alone (timed inside the extension,
no Python in the loop) and the Python call `layer.forward(x)` (new output
array) and `layer.forward(x, out=y)`. The three are measured in interleaved
rounds and each reports its best round (the machine is shared: the minimum is
the least disturbed estimate). Overhead = Python call - C++ call. Also, when
torch is importable, a torch tensor input and the mixq.torch.Linear module
call (what a diffusers or ComfyUI model runs: its checks and the output
tensor). The Python calls run inside one torch.inference_mode(), as the
layers of a model's forward do.

--clock thread (needs --threads 1) times with the calling thread's CPU time
(time.thread_time / CLOCK_THREAD_CPUTIME_ID) instead of wall time: on a
shared, loaded machine that excludes the time the process waits for a core.

    build/venv/bin/python python/bench/bench_overhead.py   (after scripts/python_test.sh)
"""
import argparse
import pathlib
import platform
import tempfile
import time
import timeit

import numpy as np

torch = None  # set by main() when importable

import mixq

LAYERS = {  # prefix: (N, K, rule)
    "tiny.int8": (16, 64, "int8_tensorwise"),
    "small.int8": (256, 256, "int8_tensorwise:convrot=true,convrot_groupsize=64"),
    "large.nvfp4": (3072, 3072, "nvfp4"),
}


def best(measures, rounds):
    """Runs each measure once per round, interleaved; the best per-call time of each."""
    results = [float("inf")] * len(measures)
    for _ in range(rounds):
        for i, measure in enumerate(measures):
            results[i] = min(results[i], measure())
    return results


def timed(call, number, timer):
    """Seconds per call, the loop inside one torch.inference_mode() when torch
    is there: a model's forward enters it once for all its layers (entering
    it per call would add ~1 us that no model pays)."""
    if torch is None:
        return timeit.timeit(call, number=number, timer=timer) / number
    with torch.inference_mode():
        return timeit.timeit(call, number=number, timer=timer) / number


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--clock", choices=["wall", "thread"], default="wall")
    args = parser.parse_args()
    if args.clock == "thread" and args.threads != 1:
        parser.error("--clock thread measures one thread: use --threads 1")
    timer = time.thread_time if args.clock == "thread" else time.perf_counter
    mixq.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    global torch
    try:
        import torch

        from mixq.torch import Linear as TorchLinear
    except ImportError:
        torch = None
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        src, out = pathlib.Path(tmp) / "f.safetensors", pathlib.Path(tmp) / "q.safetensors"
        mixq.save_file(src, {f"{p}.weight": rng.standard_normal((n, k), np.float32) * 0.05
                             for p, (n, k, _) in LAYERS.items()})
        mixq.quantize(src, out, rules=[f"{p}={r}" for p, (_, _, r) in LAYERS.items()])
        ckpt = mixq.open(out)
        for prefix, (n, k, _) in LAYERS.items():
            layer = ckpt.linear(prefix)
            x = rng.standard_normal((1, k), np.float32)
            y = np.empty((1, n), np.float32)
            calls = [lambda: layer.forward(x), lambda: layer.forward(x, out=y)]
            if torch is not None:
                xt = torch.from_numpy(x)
                module = TorchLinear(layer)

                calls += [lambda: layer.forward(xt), lambda: module(xt)]
            # Enough calls per round for ~50 ms of the slowest call.
            slowest = max(timeit.timeit(call, number=50) / 50 for call in calls)
            number = max(20, int(0.05 / max(slowest, 1e-7)))
            measures = [lambda: layer._time_forward(x, number, args.clock)]
            measures += [lambda call=call: timed(call, number, timer) for call in calls]
            rows.append([prefix, f"{n}×{k}", layer.kernel, *best(measures, args.rounds)])
    print(f"mixq {mixq.__version__}, Python {platform.python_version()}, threads {mixq.num_threads()}, "
          f"clock {args.clock}, best of {args.rounds} rounds")
    head = "| layer | N×K | kernel | C++ forward | Python forward(x) | overhead | Python forward(x, out=y) | overhead |"
    sep = "|---|---|---|---|---|---|---|---|"
    if torch is not None:
        head += " torch tensor x | overhead | mixq.torch.Linear(x) | overhead |"
        sep += "---|---|---|---|"
    print(head)
    print(sep)
    us = lambda s: f"{s * 1e6:.2f} µs"
    for row in rows:
        prefix, shape, kernel, cpp, py_new, py_out = row[:6]
        line = (f"| {prefix} | {shape} | {kernel} | {us(cpp)} | {us(py_new)} | {us(py_new - cpp)} | "
                f"{us(py_out)} | {us(py_out - cpp)} |")
        for extra in row[6:]:
            line += f" {us(extra)} | {us(extra - cpp)} |"
        print(line)


if __name__ == "__main__":
    main()
