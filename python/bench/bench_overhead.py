"""Python call overhead of Linear.forward at M = 1, against the C++ call.

For each layer: the C++ Linear::forward alone (timed inside the extension,
no Python in the loop) and the Python call `layer.forward(x)` (new output
array) and `layer.forward(x, out=y)`, each the median of several timeit
repeats. Overhead = Python call - C++ call. Also a torch tensor input (through
__dlpack__) when torch is importable.

    build/venv/bin/python python/bench/bench_overhead.py   (after scripts/python_test.sh)
"""
import argparse
import pathlib
import platform
import statistics
import tempfile
import timeit

import numpy as np

import mixq

LAYERS = {  # prefix: (N, K, rule)
    "small.int8": (256, 256, "int8_tensorwise:convrot=true,convrot_groupsize=64"),
    "large.nvfp4": (3072, 3072, "nvfp4"),
}


def per_call(fn, number, repeat):
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    mixq.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    try:
        import torch
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
            # Enough calls per repeat for ~0.2 s.
            cpp = layer._time_forward(x, 200)
            number = max(50, int(0.2 / max(cpp, 1e-7)))
            cpp = statistics.median(layer._time_forward(x, number) for _ in range(args.repeat))
            py_new = per_call(lambda: layer.forward(x), number, args.repeat)
            py_out = per_call(lambda: layer.forward(x, out=y), number, args.repeat)
            row = [prefix, f"{n}×{k}", layer.kernel, cpp, py_new, py_out]
            if torch is not None:
                xt = torch.from_numpy(x)
                row.append(per_call(lambda: layer.forward(xt), number, args.repeat))
            rows.append(row)
    print(f"mixq {mixq.__version__}, Python {platform.python_version()}, threads {mixq.num_threads()}")
    head = "| layer | N×K | kernel | C++ forward | Python forward(x) | overhead | Python forward(x, out=y) | overhead |"
    sep = "|---|---|---|---|---|---|---|---|"
    if torch is not None:
        head += " torch tensor x | overhead |"
        sep += "---|---|"
    print(head)
    print(sep)
    us = lambda s: f"{s * 1e6:.2f} µs"
    for row in rows:
        prefix, shape, kernel, cpp, py_new, py_out = row[:6]
        line = (f"| {prefix} | {shape} | {kernel} | {us(cpp)} | {us(py_new)} | {us(py_new - cpp)} | "
                f"{us(py_out)} | {us(py_out - cpp)} |")
        if len(row) > 6:
            line += f" {us(row[6])} | {us(row[6] - cpp)} |"
        print(line)


if __name__ == "__main__":
    main()
