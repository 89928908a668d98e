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
own tests use for that format (docs/FORMATS.md §3, "Tests"). Results go to
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
from comfy_kitchen.backends.eager.quantization import int8_linear as eager_int8_linear
from comfy_kitchen.backends.eager.svdquant import _unpack_int4_row_major
from comfy_kitchen.tensor import QuantizedTensor
from comfy_kitchen.tensor.base import dequantize_args
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
    # (x, qt, tensors) -> reference output, instead of comfy-kitchen's eager
    # F.linear (used where eager differs from the GPU semantics mixq follows).
    reference: Callable[..., torch.Tensor] | None = None
    note: str = ""


def fp8_activation(dtype):
    def quantize(x, tensors):
        # ComfyUI: the layer's input_scale, else scale 1.0 (docs/FORMATS.md §3.1, docs/DISPATCH.md §2.3).
        scale = tensors.get("input_scale", torch.tensor(1.0))
        return QuantizedTensor.from_float(x, "TensorCoreFP8Layout", scale=scale, dtype=dtype)
    return quantize


def dynamic_activation(layout):
    def quantize(x, tensors):
        return QuantizedTensor.from_float(x, layout)
    return quantize


# comfy-kitchen test tolerances (docs/FORMATS.md §3.x "Tests").
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


def w4a4_int8_reference(x, qt, tensors):
    """ConvRot W4A4 with linear_dtype="int8" as comfy-kitchen's CUDA and HIP
    backends run it (docs/FORMATS.md §3.6): rotate, Q8row activations, int4
    weights used as int8 values. comfy-kitchen's eager backend ignores
    linear_dtype and always uses int4 activations (§5.5); mixq follows
    the GPU backends, so the reference is comfy-kitchen's own eager INT8
    linear on the unpacked weights."""
    p = qt._params
    w8 = _unpack_int4_row_major(qt._qdata)
    return eager_int8_linear(x, w8, p.scale.reshape(-1, 1).float(), tensors.get("bias"),
                             out_dtype=torch.float32, convrot=True,
                             convrot_groupsize=p.convrot_groupsize)


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
        extra = {}
        if dtype != "int4":
            marker["linear_dtype"] = dtype
            extra = {"reference": w4a4_int8_reference,
                     "note": "reference: CUDA/HIP semantics (int8 activations) via eager int8_linear"}
        c.append(Case(f"convrot_w4a4 G={g} linear_dtype={dtype}", f"w4a4.g{g}_{dtype}",
                      "TensorCoreConvRotW4A4Layout", marker, 64, 256,
                      {"convrot_groupsize": g, "linear_dtype": dtype}, W4A4_DEQ, W4A4_LIN,
                      **extra))
    for gs, g, codebook in ((16, 256, True), (16, 64, False), (32, 64, True)):
        c.append(Case(f"asym_w4a8_int8 gs={gs} G={g} {'codebook' if codebook else 'uniform'}",
                      f"w4a8.gs{gs}_g{g}_{'cb' if codebook else 'uni'}", "AsymW4A8Int8Layout",
                      {"format": "asym_w4a8_int8", "group_size": gs, "convrot_groupsize": g},
                      48, 256, {"group_size": gs, "convrot_groupsize": g, "codebook": codebook},
                      W4A8_DEQ, W4A8_LIN))
    return c


def storable(t: torch.Tensor) -> torch.Tensor:
    """MXFP8 block scales are torch.float8_e8m0fnu, which safetensors.torch
    writes as dtype "F8_E8M0". The mixed checkpoint stores their bytes as U8
    (the other spelling docs/FORMATS.md §3.3 allows); native_e8m0_check() tests the
    native spelling separately."""
    if t.dtype == getattr(torch, "float8_e8m0fnu", None):
        return t.view(torch.uint8)
    return t


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
            t = storable(t.contiguous())
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


def native_e8m0_check(tmp: pathlib.Path) -> dict[str, Any]:
    """Does mixq open an MXFP8 layer exactly as safetensors.torch saves
    comfy-kitchen's tensors (weight_scale dtype F8_E8M0)?"""
    row: dict[str, Any] = {"case": "mxfp8, weight_scale saved as F8_E8M0 (safetensors.torch default)",
                           "shape": "64×128"}
    w = torch.randn(64, 128, generator=torch.Generator().manual_seed(7)) * 0.05
    qt = QuantizedTensor.from_float(w, "TensorCoreMXFP8Layout")
    state = {f"l.weight{s}": t.contiguous()
             for s, t in qt.layout_cls.state_dict_tensors(qt._qdata, qt._params).items()}
    state["l.comfy_quant"] = torch.tensor(list(b'{"format": "mxfp8"}'), dtype=torch.uint8)
    path = tmp / "native-e8m0.safetensors"
    save_file(state, str(path))
    try:
        ours = mixq.open(path).linear("l").dequantize()
        ok, stats = MXFP8_DEQ.check(ours, qt.dequantize().float().numpy())
        row["dequant"] = stats | {"ok": ok}
        row["linear"] = None
    except mixq.Error as error:
        row["error"] = f"mixq.Error: {error}"
    return row


class _Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def kitchen_linear(case: Case, x: torch.Tensor, qt, tensors) -> tuple[torch.Tensor, str]:
    """comfy-kitchen's eager linear for `case` and how it ran: "" (its own
    path), or the fallback it took / we had to take."""
    if case.reference is not None:
        return case.reference(x, qt, tensors), case.note
    x_in = case.activation(x, tensors) if case.activation else x
    captured = _Captured()
    logger = logging.getLogger("comfy_kitchen")
    logger.addHandler(captured)
    try:
        y = F.linear(x_in, qt, tensors.get("bias"))
    except Exception as error:  # e.g. MXFP8 on CPU: ValueError the handler does not catch
        # The layout's own fallback (docs/FORMATS.md §2.6, §5.10): dequantize both, float linear.
        y = F.linear(*dequantize_args((x_in, qt, tensors.get("bias"))))
        return y, (f"comfy-kitchen's linear raised {type(error).__name__}: {error}; "
                   "reference = its dequantize-both fallback")
    finally:
        logger.removeHandler(captured)
    if captured.messages:
        return y, "comfy-kitchen fell back to dequantize-both: " + captured.messages[0].split(":")[0]
    return y, ""


def torch_input_check(ckpt, prefix: str, k: int) -> dict[str, Any]:
    """forward() takes torch CPU tensors: float32 (a NumPy view), bfloat16 and
    float16 (DLPack, converted), non-contiguous ones; results must equal the
    NumPy float32 input holding the same values."""
    row: dict[str, Any] = {"case": "forward(torch.Tensor) == forward(numpy) (f32, bf16, f16, strided)",
                           "shape": f"{prefix}", "dequant": None}
    lin = ckpt.linear(prefix)
    x = torch.randn(5, k, generator=torch.Generator().manual_seed(11))
    checks = [(x, x), (x.to(torch.bfloat16), x.to(torch.bfloat16).float()),
              (x.to(torch.float16), x.to(torch.float16).float()),
              (x.t().contiguous().t(), x)]
    worst = 0.0
    for given, same in checks:
        worst = max(worst, float(np.abs(lin.forward(given) - lin.forward(same.numpy())).max()))
    row["linear"] = {"max_abs": worst, "rel": worst, "peak": worst, "exact": worst == 0.0,
                     "ok": worst == 0.0, "m": 5}
    return row


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
        # ComfyUI loads any mixture of these formats (docs/DISPATCH.md §3.1).
        plan_row: dict[str, Any] = {"case": "plan --profile comfyui accepts the mixed file",
                                    "shape": f"{len(all_cases)} layers", "dequant": None, "linear": None}
        try:
            ckpt.plan()
        except mixq.Error as error:
            plan_row["error"] = f"mixq.Error: {error}"
        gen = torch.Generator().manual_seed(seed + 1)
        for case in all_cases:
            qt, tensors = layers[case.prefix]
            row: dict[str, Any] = {"case": case.name, "shape": f"{case.n}×{case.k}"}
            try:
                lin = ckpt.linear(case.prefix)
                row["kernel"] = lin.kernel
                # dequantize: logical [N, K]; mixq may report the padded K (docs/CLI.md).
                ref_w = qt.dequantize().float().numpy()
                ours_w = lin.dequantize()
                assert lin.out_features == case.n, (lin.out_features, case.n)
                ok_pad = bool(np.all(ours_w[:, case.k:] == 0))
                ok, stats = case.dequant_tol.check(ours_w[:, : case.k], ref_w)
                row["dequant"] = stats | {"ok": ok and ok_pad}
                worst: dict[str, Any] | None = None
                for m in rows:
                    x = torch.randn(m, case.k, generator=gen)
                    ref_t, how = kitchen_linear(case, x, qt, tensors)
                    ref = ref_t.float().numpy()
                    if how:
                        row["how"] = how
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
        results.append(plan_row)
        int8 = next(c for c in all_cases if c.layout == "TensorWiseINT8Layout")
        results.append(torch_input_check(ckpt, int8.prefix, int8.k))
        results.append(native_e8m0_check(pathlib.Path(tmp)))
    return results


def passed(row: dict[str, Any]) -> bool:
    return "error" not in row and all(row[k] is None or row[k]["ok"] for k in ("dequant", "linear"))


def fmt_stats(stats: dict[str, Any] | None) -> str:
    if not stats:
        return "–"
    if stats.get("exact"):
        return "exact"
    return f"{stats['max_abs']:.2e} / {stats['rel']:.2e}"


DEFAULT_CASE = Case("", "", "", {}, 0, 0, {}, MXFP8_DEQ, Tolerance("not run"))


def table(results: list[dict[str, Any]], all_cases: list[Case]) -> str:
    tol = {c.name: c for c in all_cases}
    lines = [
        "| case | N×K | dequantize max abs / rel | forward max abs / rel (worst M) | comfy-kitchen tolerance (dequantize; forward) | result |",
        "|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for r in results:
        c = tol.get(r["case"], DEFAULT_CASE)
        if "error" in r:
            verdict = f"**error**: {r['error']}"
        else:
            verdict = "pass" if passed(r) else "**FAIL**"
        lin = r.get("linear")
        lin_text = f"{fmt_stats(lin)} (M={lin['m']})" if lin else "–"
        if r.get("how"):
            if r["how"] not in notes:
                notes.append(r["how"])
            verdict += f" [{notes.index(r['how']) + 1}]"
        tolerance = f"{c.dequant_tol.describe()}; {c.linear_tol.describe()}" if c.name else "–"
        lines.append(f"| {r['case']} | {r['shape']} | {fmt_stats(r.get('dequant'))} | {lin_text} | "
                     f"{tolerance} | {verdict} |")
    lines.append("")
    lines += [f"[{i + 1}] {note}" + "  " for i, note in enumerate(notes)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", default="1,7,64", help="activation row counts M")
    parser.add_argument("--write", action="store_true", help="update conformance/CONFORMANCE.md")
    args = parser.parse_args()
    # comfy-kitchen's fallback warnings are captured per case (kitchen_linear), not printed.
    kitchen_log = logging.getLogger("comfy_kitchen")
    kitchen_log.setLevel(logging.WARNING)
    kitchen_log.propagate = False
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
    failed = [r for r in results if not passed(r)]
    if args.write:
        doc = HERE / "CONFORMANCE.md"
        body = doc.read_text()
        a, b = body.index(BEGIN) + len(BEGIN), body.index(END)
        doc.write_text(body[:a] + "\n" + header + "\n\n" + text + "\n" + body[b:])
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
