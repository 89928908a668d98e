"""Cross-check mixq against comfy-kitchen, the library that writes and runs
Comfy quantized checkpoints.

For every format comfy-kitchen can quantize, random weights are quantized by
comfy-kitchen's own layout classes (QuantizedTensor.from_float), saved as one
mixed Comfy checkpoint (weights, companions, bias, `comfy_quant` marker
tensors, written with safetensors.torch as ComfyUI does), opened with mixq,
and compared:

  dequantize: mixq Linear.dequantize()  vs  QuantizedTensor.dequantize()
  forward:    mixq Linear.forward(x)    vs  comfy-kitchen's eager linear, i.e.
              F.linear(x', W_q, b) where x' is x quantized the way ComfyUI
              does for formats that quantize activations (FP8 with the
              checkpoint's input_scale or 1.0, NVFP4 and MXFP8 dynamic), and
              plain x for the weight-only layouts (INT8, ConvRot W4A4, W4A8),
              which quantize activations inside their own linear.

Each case passes when both errors stay within the tolerance comfy-kitchen's
own tests use for that format (spec/formats.md §3, "Tests"). Results go to
stdout and, with --write, into conformance/CONFORMANCE.md.

Run through conformance/run.sh (`make conformance`), which prepares the
environment (torch + comfy-kitchen + safetensors from PyPI, and mixq).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import pathlib
import platform
import sys
import tempfile
import time
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

import comfy_kitchen
from comfy_kitchen.tensor import QuantizedTensor
from safetensors.torch import save_file

import mixq

HERE = pathlib.Path(__file__).resolve().parent
BEGIN, END = "<!-- results: begin -->", "<!-- results: end -->"


@dataclasses.dataclass
class Tolerance:
    """Bounds taken from comfy-kitchen's tests for the format (see `source`).
    `rel`: ||a - b|| / ||b||; `peak`: max|a - b| / max|b|;
    `atol`/`rtol`: elementwise |a - b| <= atol + rtol·|b| (allclose)."""

    source: str
    rel: float | None = None
    peak: float | None = None
    atol: float | None = None
    rtol: float | None = None

    def check(self, ours: np.ndarray, ref: np.ndarray) -> tuple[bool, dict[str, float]]:
        diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        norm = float(np.linalg.norm(ref))
        peak_ref = float(np.abs(ref).max()) if ref.size else 0.0
        stats = {
            "max_abs": float(diff.max()) if diff.size else 0.0,
            "rel": float(np.linalg.norm(diff) / norm) if norm else float(np.linalg.norm(diff)),
            "peak": float(diff.max() / peak_ref) if peak_ref else float(diff.max(initial=0.0)),
            "exact": bool(np.array_equal(ours, ref)),
        }
        ok = True
        if self.rel is not None:
            ok &= stats["rel"] <= self.rel
        if self.peak is not None:
            ok &= stats["peak"] <= self.peak
        if self.atol is not None or self.rtol is not None:
            ok &= bool(np.all(diff <= (self.atol or 0.0) + (self.rtol or 0.0) * np.abs(ref)))
        return ok, stats

    def describe(self) -> str:
        parts = []
        if self.atol is not None or self.rtol is not None:
            parts.append(f"allclose rtol {self.rtol or 0:g} atol {self.atol or 0:g}")
        if self.rel is not None:
            parts.append(f"rel ≤ {self.rel:g}")
        if self.peak is not None:
            parts.append(f"max ≤ {self.peak:g}·max|ref|")
        return ", ".join(parts)


@dataclasses.dataclass
class Case:
    name: str           # row label
    prefix: str         # layer prefix in the checkpoint
    layout: str         # comfy-kitchen layout class
    marker: dict[str, Any]
    n: int
    k: int
    quantize_kwargs: dict[str, Any]
    dequant_tol: Tolerance
    linear_tol: Tolerance
    # x -> the activation comfy-kitchen's linear receives (None: plain x)
    activation: Callable[[torch.Tensor, dict[str, torch.Tensor]], torch.Tensor] | None = None
    input_scale: bool = False  # FP8: store a static input_scale
    bias: bool = True


def fp8_activation(dtype):
    def quantize(x, tensors):
        # ComfyUI: the layer's input_scale, else scale 1.0 (spec §3.1, dispatch §2.3).
        scale = tensors.get("input_scale", torch.tensor(1.0))
        return QuantizedTensor.from_float(x, "TensorCoreFP8Layout", scale=scale, dtype=dtype)
    return quantize


def dynamic_activation(layout):
    def quantize(x, tensors):
        return QuantizedTensor.from_float(x, layout)
    return quantize


# comfy-kitchen test tolerances (spec/formats.md §3.x "Tests").
FP8_DEQ = Tolerance("test_qdq cross-backend quantize", rtol=1e-4, atol=1e-4)
FP8_LIN = Tolerance("HIP fp8 GEMM vs reference 2e-2", rel=2e-2)
NVFP4_DEQ = Tolerance("dequant cross-backend rtol 1e-3 / atol 1e-2", rtol=1e-3, atol=1e-2)
NVFP4_LIN = Tolerance("layout linear vs float rtol = atol = 0.3", rtol=0.3, atol=0.3, rel=2e-2)
MXFP8_DEQ = Tolerance("data rtol = atol = 1e-3", rtol=1e-3, atol=1e-3)
MXFP8_LIN = Tolerance("layout linear rtol = atol = 0.2", rtol=0.2, atol=0.2, rel=2e-2)
INT8_DEQ = Tolerance("dequant exact (atol 0) CUDA vs eager", rtol=0.0, atol=0.0)
INT8_LIN = Tolerance("layout linear vs eager rtol 1e-2 / atol 1e-1", rtol=1e-2, atol=1e-1)
CONVROT_DEQ = Tolerance("HIP dequant vs eager 2e-4", rtol=2e-4, atol=2e-4)
CONVROT_LIN = Tolerance("HIP linear max error < 5% of max|ref|", peak=0.05, rtol=1e-2, atol=1e-1)
W4A4_DEQ = Tolerance("ConvRot dequant 2e-4", rtol=2e-4, atol=2e-4)
W4A4_LIN = Tolerance("HIP vs eager linear < 25% of max|ref| (we also ask rel ≤ 1e-2)", peak=0.25, rel=1e-2)
W4A8_DEQ = Tolerance("decode bit-exact; ConvRot un-rotation 2e-4", rtol=2e-4, atol=2e-4)
W4A8_LIN = Tolerance("linear max error < 5% of max|ref|", peak=0.05)


def cases() -> list[Case]:
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    c = []
    c.append(Case("float8_e4m3fn (input_scale 1.0)", "fp8.e4m3", "TensorCoreFP8Layout",
                  {"format": "float8_e4m3fn"}, 96, 160, {"dtype": e4m3}, FP8_DEQ, FP8_LIN,
                  fp8_activation(e4m3)))
    c.append(Case("float8_e4m3fn (static input_scale)", "fp8.e4m3_static", "TensorCoreFP8Layout",
                  {"format": "float8_e4m3fn"}, 64, 128, {"dtype": e4m3}, FP8_DEQ, FP8_LIN,
                  fp8_activation(e4m3), input_scale=True))
    c.append(Case("float8_e5m2", "fp8.e5m2", "TensorCoreFP8Layout",
                  {"format": "float8_e5m2"}, 64, 96, {"dtype": e5m2}, FP8_DEQ, FP8_LIN,
                  fp8_activation(e5m2), bias=False))
    c.append(Case("nvfp4", "nvfp4.aligned", "TensorCoreNVFP4Layout", {"format": "nvfp4"},
                  128, 256, {}, NVFP4_DEQ, NVFP4_LIN, dynamic_activation("TensorCoreNVFP4Layout")))
    c.append(Case("nvfp4 (N, K padded to 16)", "nvfp4.padded", "TensorCoreNVFP4Layout",
                  {"format": "nvfp4"}, 72, 80, {}, NVFP4_DEQ, NVFP4_LIN,
                  dynamic_activation("TensorCoreNVFP4Layout")))
    c.append(Case("mxfp8", "mxfp8.aligned", "TensorCoreMXFP8Layout", {"format": "mxfp8"},
                  64, 256, {}, MXFP8_DEQ, MXFP8_LIN, dynamic_activation("TensorCoreMXFP8Layout")))
    c.append(Case("mxfp8 (N, K padded to 32)", "mxfp8.padded", "TensorCoreMXFP8Layout",
                  {"format": "mxfp8"}, 40, 80, {}, MXFP8_DEQ, MXFP8_LIN,
                  dynamic_activation("TensorCoreMXFP8Layout")))
    c.append(Case("int8_tensorwise (scalar scale)", "int8.tensorwise", "TensorWiseINT8Layout",
                  {"format": "int8_tensorwise"}, 64, 192,
                  {"is_weight": True, "per_channel": False}, INT8_DEQ, INT8_LIN))
    c.append(Case("int8_tensorwise (rowwise [N,1])", "int8.rowwise", "TensorWiseINT8Layout",
                  {"format": "int8_tensorwise"}, 80, 128,
                  {"is_weight": True, "per_channel": True}, INT8_DEQ, INT8_LIN))
    for g, k in ((64, 192), (256, 512)):
        c.append(Case(f"int8_tensorwise + ConvRot G={g}", f"int8.convrot{g}", "TensorWiseINT8Layout",
                      {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": g}, 96, k,
                      {"is_weight": True, "per_channel": True, "convrot": True,
                       "convrot_groupsize": g}, CONVROT_DEQ, CONVROT_LIN))
    for g, dtype in ((64, "int4"), (256, "int4"), (64, "int8")):
        marker = {"format": "convrot_w4a4", "convrot_groupsize": g}
        if dtype != "int4":
            marker["linear_dtype"] = dtype
        c.append(Case(f"convrot_w4a4 G={g} linear_dtype={dtype}", f"w4a4.g{g}_{dtype}",
                      "TensorCoreConvRotW4A4Layout", marker, 64, 256,
                      {"convrot_groupsize": g, "linear_dtype": dtype}, W4A4_DEQ, W4A4_LIN))
    for gs, g, codebook in ((16, 256, True), (16, 64, False), (32, 64, True)):
        c.append(Case(f"asym_w4a8_int8 gs={gs} G={g} {'codebook' if codebook else 'uniform'}",
                      f"w4a8.gs{gs}_g{g}_{'cb' if codebook else 'uni'}", "AsymW4A8Int8Layout",
                      {"format": "asym_w4a8_int8", "group_size": gs, "convrot_groupsize": g},
                      48, 256, {"group_size": gs, "convrot_groupsize": g, "codebook": codebook},
                      W4A8_DEQ, W4A8_LIN))
    return c


def build_checkpoint(path: pathlib.Path, all_cases: list[Case], seed: int):
    """Quantizes every case with comfy-kitchen; returns {prefix: (qt, tensors)}."""
    gen = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    layers = {}
    for case in all_cases:
        w = torch.randn(case.n, case.k, generator=gen) * 0.05
        qt = QuantizedTensor.from_float(w, case.layout, **case.quantize_kwargs)
        tensors = {}
        for suffix, t in qt.layout_cls.state_dict_tensors(qt._qdata, qt._params).items():
            t = t.contiguous()
            state[f"{case.prefix}.weight{suffix}"] = t
            tensors["weight" + suffix] = t
        if case.bias:
            tensors["bias"] = torch.randn(case.n, generator=gen) * 0.1
            state[f"{case.prefix}.bias"] = tensors["bias"]
        if case.input_scale:
            calib = torch.randn(64, case.k, generator=gen)
            tensors["input_scale"] = (calib.abs().amax() / 448.0).to(torch.float32)
            state[f"{case.prefix}.input_scale"] = tensors["input_scale"]
        marker = json.dumps(case.marker).encode()
        state[f"{case.prefix}.comfy_quant"] = torch.tensor(list(marker), dtype=torch.uint8)
        layers[case.prefix] = (qt, tensors)
    save_file(state, str(path))
    return layers


def pad_columns(x: np.ndarray, k: int) -> np.ndarray:
    if x.shape[1] == k:
        return x
    out = np.zeros((x.shape[0], k), x.dtype)
    out[:, : x.shape[1]] = x
    return out


def run(seed: int, rows: list[int]) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "kitchen-mixed.safetensors"
        all_cases = cases()
        layers = build_checkpoint(path, all_cases, seed)
        ckpt = mixq.open(path)
        plan = ckpt.plan()  # ComfyUI accepts every mixture; raises mixq.Error otherwise
        assert plan["accepted"], plan
        gen = torch.Generator().manual_seed(seed + 1)
        for case in all_cases:
            qt, tensors = layers[case.prefix]
            row: dict[str, Any] = {"case": case.name, "shape": f"{case.n}×{case.k}"}
            try:
                lin = ckpt.linear(case.prefix)
                row["kernel"] = lin.kernel
                # dequantize: logical [N, K]; mixq may report the padded K (CLI.md).
                ref_w = qt.dequantize().float().numpy()
                ours_w = lin.dequantize()
                assert lin.out_features == case.n, (lin.out_features, case.n)
                ok_pad = bool(np.all(ours_w[:, case.k:] == 0))
                ok, stats = case.dequant_tol.check(ours_w[:, : case.k], ref_w)
                row["dequant"] = stats | {"ok": ok and ok_pad}
                worst: dict[str, Any] | None = None
                for m in rows:
                    x = torch.randn(m, case.k, generator=gen)
                    x_ref = case.activation(x, tensors) if case.activation else x
                    ref = F.linear(x_ref, qt, tensors.get("bias")).float().numpy()
                    ours = lin.forward(pad_columns(x.numpy(), lin.in_features))
                    ok, stats = case.linear_tol.check(ours, ref)
                    stats |= {"ok": ok, "m": m}
                    # Report the first failing M, else the largest error.
                    if worst is None or (worst["ok"] and (not ok or stats["rel"] > worst["rel"])):
                        worst = stats
                row["linear"] = worst
            except Exception as error:  # a crash in one case must not hide the others
                row["error"] = f"{type(error).__name__}: {error}"
            results.append(row)
    return results


def fmt_stats(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "–"
    if stats.get("exact"):
        return "exact"
    return f"{stats['max_abs']:.2e} / {stats['rel']:.2e}"


def table(results: list[dict[str, Any]], all_cases: list[Case]) -> str:
    tol = {c.name: c for c in all_cases}
    lines = [
        "| case | N×K | dequantize max abs / rel | forward max abs / rel (worst M) | comfy-kitchen tolerance (dequantize; forward) | result |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        c = tol[r["case"]]
        if "error" in r:
            verdict = f"**error**: {r['error']}"
        else:
            verdict = "pass" if r["dequant"]["ok"] and r["linear"]["ok"] else "**FAIL**"
        lin = r.get("linear")
        lin_text = f"{fmt_stats(lin)} (M={lin['m']})" if lin else "–"
        lines.append(f"| {r['case']} | {r['shape']} | {fmt_stats(r.get('dequant'))} | {lin_text} | "
                     f"{c.dequant_tol.describe()}; {c.linear_tol.describe()} | {verdict} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", default="1,7,64", help="activation row counts M")
    parser.add_argument("--write", action="store_true", help="update conformance/CONFORMANCE.md")
    args = parser.parse_args()
    logging.getLogger("comfy_kitchen").setLevel(logging.ERROR)
    torch.manual_seed(args.seed)
    start = time.time()
    rows = [int(v) for v in args.rows.split(",")]
    results = run(args.seed, rows)
    text = table(results, cases())
    import importlib.metadata as md
    header = (f"comfy-kitchen {md.version('comfy-kitchen')}, torch {torch.__version__}, "
              f"mixq {mixq.__version__}, Python {platform.python_version()}, "
              f"{platform.machine()}; seed {args.seed}, M ∈ {{{args.rows}}}; "
              f"command: `make conformance` ({time.time() - start:.0f} s).")
    print(header)
    print(text)
    failed = [r for r in results if "error" in r or not (r["dequant"]["ok"] and r["linear"]["ok"])]
    if args.write:
        doc = HERE / "CONFORMANCE.md"
        body = doc.read_text()
        a, b = body.index(BEGIN) + len(BEGIN), body.index(END)
        doc.write_text(body[:a] + "\n" + header + "\n\n" + text + "\n" + body[b:])
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
