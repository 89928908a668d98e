"""mixq.comfy_kitchen: the `mixq` backend in comfy-kitchen's registry, against
comfy-kitchen's eager backend on the same quantized tensors."""
import dataclasses
import gc
import logging
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import comfy_kitchen as ck
from comfy_kitchen.registry import registry
from comfy_kitchen.tensor import QuantizedTensor, get_layout_class

import mixq
import mixq.comfy_kitchen as mck
from mixq.comfy_kitchen import backend


@pytest.fixture(autouse=True, scope="module")
def registered():
    mck.register()
    yield
    mck.unregister()


def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def w4a4_int8_reference(x, qt, bias):
    """ConvRot W4A4 with linear_dtype "int8" as comfy-kitchen's CUDA/HIP
    backends run it (int8 activations): comfy-kitchen's eager INT8 linear on
    the unpacked int4 weights (its eager W4A4 always uses int4 activations)."""
    from comfy_kitchen.backends.eager.quantization import int8_linear
    from comfy_kitchen.backends.eager.svdquant import _unpack_int4_row_major

    p = qt._params
    return int8_linear(x, _unpack_int4_row_major(qt._qdata), p.scale.reshape(-1, 1).float(), bias,
                       out_dtype=x.dtype, convrot=True, convrot_groupsize=p.convrot_groupsize)


ALL = (torch.float32, torch.bfloat16, torch.float16)


def quantized(layout, n, k, gen, **kwargs):
    w = torch.randn(n, k, generator=gen) * 0.05
    return QuantizedTensor.from_float(w, layout, **kwargs)


def awq(n, k, gen, group=64):
    q = torch.randint(-128, 128, (n, k // 2), generator=gen, dtype=torch.int8)
    params = get_layout_class("TensorCoreAWQW4A16Layout").Params(
        scale=(torch.rand(k // group, n, generator=gen) * 0.01 + 0.002).to(torch.bfloat16),
        zeros=(torch.randn(k // group, n, generator=gen) * 0.01).to(torch.bfloat16),
        group_size=group, orig_dtype=torch.bfloat16, orig_shape=(n, k))
    return QuantizedTensor(q, "TensorCoreAWQW4A16Layout", params)


def svdquant(n, k, gen, unsigned=False, rank=16):
    codes = torch.randint(-7, 8, (n, k), generator=gen, dtype=torch.int32)
    q = ((codes[:, 0::2] & 15) | ((codes[:, 1::2] & 15) << 4)).to(torch.uint8).view(torch.int8)
    bf = lambda t: t.to(torch.bfloat16)
    params = get_layout_class("TensorCoreSVDQuantW4A4Layout").Params(
        scale=bf(torch.rand(k // 64, n, generator=gen) * 0.008 + 0.002),
        proj_down=bf(torch.randn(k, rank, generator=gen) * 0.05),
        proj_up=bf(torch.randn(n, rank, generator=gen) * 0.05),
        smooth_factor=bf(torch.rand(k, generator=gen) + 0.5), act_unsigned=unsigned,
        orig_dtype=torch.bfloat16, orig_shape=(n, k))
    return QuantizedTensor(q, "TensorCoreSVDQuantW4A4Layout", params)


# name -> (weight factory, activation layout or None for weight-only layouts,
#          activation dtypes comfy-kitchen's eager backend accepts for it).
CASES = {
    "fp8": (lambda g: quantized("TensorCoreFP8Layout", 96, 160, g), "TensorCoreFP8Layout", ALL),
    "nvfp4": (lambda g: quantized("TensorCoreNVFP4Layout", 128, 256, g), "TensorCoreNVFP4Layout", ALL),
    "nvfp4_padded": (lambda g: quantized("TensorCoreNVFP4Layout", 72, 80, g), "TensorCoreNVFP4Layout", ALL),
    "mxfp8": (lambda g: quantized("TensorCoreMXFP8Layout", 64, 256, g), "TensorCoreMXFP8Layout", ALL),
    "int8_scalar": (lambda g: quantized("TensorWiseINT8Layout", 64, 192, g, is_weight=True, per_channel=False),
                    None, ALL),
    "int8_rowwise": (lambda g: quantized("TensorWiseINT8Layout", 80, 128, g, is_weight=True, per_channel=True),
                     None, ALL),
    "int8_convrot": (lambda g: quantized("TensorWiseINT8Layout", 96, 512, g, is_weight=True, per_channel=True,
                                         convrot=True, convrot_groupsize=256), None, ALL),
    "w4a4_int4": (lambda g: quantized("TensorCoreConvRotW4A4Layout", 64, 256, g, convrot_groupsize=64), None, ALL),
    "w4a4_int8": (lambda g: quantized("TensorCoreConvRotW4A4Layout", 64, 256, g, convrot_groupsize=64,
                                      linear_dtype="int8"), None, ALL),
    "w4a8": (lambda g: quantized("AsymW4A8Int8Layout", 48, 256, g, group_size=16, convrot_groupsize=64,
                                 codebook=True), None, ALL),
    "awq": (lambda g: awq(64, 128, g), None, ALL),
    # eager SVDQuant multiplies activations and weights in their own dtypes: x must be the scales' bf16
    "svdquant": (lambda g: svdquant(64, 128, g), None, (torch.bfloat16,)),
    "svdquant_unsigned": (lambda g: svdquant(64, 128, g, unsigned=True), None, (torch.bfloat16,)),
}
# The unsigned SVDQuant grid is for post-GELU activations (>= -0.17): those cases get gelu(x).
POST_GELU = {"svdquant_unsigned"}

def float32_copy(qt):
    """The same quantized tensor with float32 as its logical dtype and its
    float companions (AWQ, SVDQuant scales) in float32: comfy-kitchen's eager
    backend then evaluates the format in float32 throughout."""
    p = qt._params
    fields = {f.name: getattr(p, f.name) for f in dataclasses.fields(p)}
    for key, value in fields.items():
        if isinstance(value, torch.Tensor) and value.dtype in (torch.bfloat16, torch.float16):
            fields[key] = value.float()
    fields["orig_dtype"] = torch.float32
    return QuantizedTensor(qt._qdata, qt._layout_cls, type(p)(**fields))


def eager(name, weight, xin, bias):
    """comfy-kitchen's eager result: its layout's F.linear, or where its CPU
    matmul refuses (NVFP4, MXFP8: "CPU does not support swizzle") the
    layout's dequantize-both fallback; W4A4 int8 as the GPU backends run it."""
    from comfy_kitchen.tensor.base import dequantize_args

    with ck.use_backend("eager"):
        if name == "w4a4_int8":
            return w4a4_int8_reference(xin, weight, bias)
        if name.startswith("svdquant") and xin.dtype == torch.float32:
            return svdquant_float32(weight, xin, bias)
        if isinstance(xin, QuantizedTensor) and xin._layout_cls in ("TensorCoreNVFP4Layout", "TensorCoreMXFP8Layout"):
            x, w = dequantize_args((xin, weight))
            return F.linear(x, w.to(x.dtype), None if bias is None else bias.to(x.dtype))
        return F.linear(xin, weight, bias)


def svdquant_float32(weight, x, bias):
    """SVDQuant evaluated in float32 on the activation codes comfy-kitchen's
    layout makes from the bf16 input (its quantizer runs in the input's
    dtype, and both backends get those same codes): eager's scaled mm with
    every float operand in float32."""
    from comfy_kitchen.backends.eager.svdquant import quantize_svdquant_w4a4, scaled_mm_svdquant_w4a4

    p = weight._params
    xb = x.to(torch.bfloat16)
    x_main = xb + 0.171875 if p.act_unsigned else xb
    q, ascales, lora = quantize_svdquant_w4a4(x_main, p.smooth_factor, p.proj_down, act_unsigned=p.act_unsigned,
                                              lora_x=xb if p.act_unsigned else None)
    out = scaled_mm_svdquant_w4a4(q, weight._qdata, ascales.float(), p.scale.float(), lora, p.proj_up.float(),
                                  bias, act_unsigned=p.act_unsigned)
    return out[: x.shape[0]]


# Bounds on rel(mixq, reference) per activation dtype, the reference being
# comfy-kitchen's eager backend evaluating the same format, on the same
# quantized activation where the layout quantizes it, in float32 throughout.
# Each bound is 3x the largest value measured over M in {1, 7, 64} (measured
# in the comment). On bf16 / f16 inputs mixq must also be at least as close to
# that reference as comfy-kitchen's eager backend run in the input's dtype
# (which rounds scales, rotations and the GEMM to it; mixq computes in f32).
BOUNDS = {
    ("awq", torch.float32): 0.0055,  # measured 0.00182
    ("awq", torch.bfloat16): 0.0052,  # measured 0.00172
    ("awq", torch.float16): 0.005,  # measured 0.00168
    ("fp8", torch.float32): 7.3e-07,  # measured 2.43e-07
    ("fp8", torch.bfloat16): 0.005,  # measured 0.00168
    ("fp8", torch.float16): 0.00065,  # measured 0.000218
    ("int8_convrot", torch.float32): 7.6e-07,  # measured 2.53e-07
    ("int8_convrot", torch.bfloat16): 0.0051,  # measured 0.0017
    ("int8_convrot", torch.float16): 0.00066,  # measured 0.00022
    ("int8_rowwise", torch.float32): 1e-07,  # measured 0 (bit-identical)
    ("int8_rowwise", torch.bfloat16): 0.0049,  # measured 0.00165
    ("int8_rowwise", torch.float16): 0.00067,  # measured 0.000222
    ("int8_scalar", torch.float32): 1e-07,  # measured 0 (bit-identical)
    ("int8_scalar", torch.bfloat16): 0.0053,  # measured 0.00176
    ("int8_scalar", torch.float16): 0.00062,  # measured 0.000208
    ("mxfp8", torch.float32): 1.1e-07,  # measured 3.52e-08
    ("mxfp8", torch.bfloat16): 0.0055,  # measured 0.00184
    ("mxfp8", torch.float16): 0.00082,  # measured 0.000272
    ("nvfp4", torch.float32): 6.1e-07,  # measured 2.02e-07
    ("nvfp4", torch.bfloat16): 0.0051,  # measured 0.0017
    ("nvfp4", torch.float16): 0.00065,  # measured 0.000216
    ("nvfp4_padded", torch.float32): 5.1e-07,  # measured 1.69e-07
    ("nvfp4_padded", torch.bfloat16): 0.005,  # measured 0.00167
    ("nvfp4_padded", torch.float16): 0.00071,  # measured 0.000235
    ("svdquant", torch.bfloat16): 0.0056,  # measured 0.00186
    ("svdquant_unsigned", torch.bfloat16): 0.0054,  # measured 0.00179
    ("w4a4_int4", torch.float32): 4.3e-07,  # measured 1.44e-07
    ("w4a4_int4", torch.bfloat16): 0.0049,  # measured 0.00165
    ("w4a4_int4", torch.float16): 0.00062,  # measured 0.000207
    ("w4a4_int8", torch.float32): 5.1e-07,  # measured 1.7e-07
    ("w4a4_int8", torch.bfloat16): 0.0051,  # measured 0.00171
    ("w4a4_int8", torch.float16): 0.0007,  # measured 0.000233
    ("w4a8", torch.float32): 5.7e-07,  # measured 1.91e-07
    ("w4a8", torch.bfloat16): 1e-07,  # measured 0 (bit-identical)
    ("w4a8", torch.float16): 3.9e-08,  # measured 1.29e-08
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_agrees_with_eager(name, caplog):
    make, act_layout, dtypes = CASES[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    weight = make(gen)
    weight32 = float32_copy(weight)
    n = weight.shape[0]
    bias = torch.randn(n, generator=gen) * 0.1
    builds = backend.cache.builds
    caplog.set_level(logging.WARNING, logger="comfy_kitchen")
    for dtype in dtypes:
        worst, worst_eager = 0.0, 0.0
        for m in (1, 7, 64):
            x = torch.randn(m, weight.shape[1], generator=gen)
            x = (F.gelu(x) if name in POST_GELU else x).to(dtype)
            b = bias.to(torch.bfloat16 if name.startswith(("awq", "svdquant")) else dtype)
            with torch.inference_mode():  # as ComfyUI samples: F.linear reaches the layouts whole
                xin = QuantizedTensor.from_float(x, act_layout) if act_layout else x
                with ck.use_backend(mck.BACKEND):
                    ours = F.linear(xin, weight, b)
                theirs = eager(name, weight, xin, b)
                xin32 = float32_copy(xin) if act_layout else x.float()
                ref = eager(name, weight if name.startswith("svdquant") else weight32, xin32, b.float())
            assert ours.shape == ref.shape and ours.dtype == theirs.dtype, (name, dtype, m)
            worst = max(worst, rel(ours, ref))
            worst_eager = max(worst_eager, rel(theirs, ref))
        print(f"{name} {dtype}: rel(mixq, f32 reference) = {worst:.3g}, rel(eager in {dtype}, same) = {worst_eager:.3g}")
        assert worst <= BOUNDS[name, dtype], (name, dtype, worst)
        if dtype != torch.float32:
            assert worst <= worst_eager * 1.05 + 1e-6, (name, dtype, worst, worst_eager)
    assert backend.cache.builds > builds  # mixq ran it ...
    assert not [r for r in caplog.records if "fall" in r.getMessage()], caplog.text  # ... without falling back


def test_svdquant_unsigned_outside_its_grid():
    """Unsigned SVDQuant activations below -0.171875 are clamped by the
    quantizer; the backend then evaluates the formula directly and still
    matches the float32 reference (measured rel 0.0016, the bf16 output
    rounding; bound 3x)."""
    gen = torch.Generator().manual_seed(12)
    weight = svdquant(64, 128, gen, unsigned=True)
    x = torch.randn(9, 128, generator=gen).to(torch.bfloat16)  # not post-GELU
    with torch.inference_mode(), ck.use_backend(mck.BACKEND):
        ours = F.linear(x, weight)
    assert rel(ours, svdquant_float32(weight, x.float(), None)) <= 0.0047


@pytest.mark.parametrize("m,k,pad", [(1, 64, False), (37, 256, True), (37, 256, False), (200, 3072, False)])
@pytest.mark.parametrize("dtype", ALL)
def test_quantize_nvfp4_matches_eager_bit_for_bit(m, k, pad, dtype):
    """The backend's quantize_nvfp4 (C++) returns eager's codes and tiled
    scales exactly, including ties, zero blocks, subnormal block scales and
    a row count that is not a multiple of 16 or 128; decoding them gives
    eager's dequantize_nvfp4 divided by the global scale."""
    from comfy_kitchen.backends.eager import quantization as eager

    gen = torch.Generator().manual_seed(m * k)
    x = torch.randn(m, k, generator=gen) * torch.logspace(-6, 2, m).unsqueeze(1)
    x[0, :16] = 0.0                                   # a zero block
    x[-1, :16] = torch.tensor([6.0, 5.0, 3.5, 2.5, 1.75, 1.25, 0.75, 0.25] * 2)  # e2m1 ties
    x = x.to(dtype)
    g = torch.tensor(float(x.float().abs().max()) / 2688.0, dtype=torch.float32)
    want = eager.quantize_nvfp4(x, g, pad_16x=pad)
    got = backend.quantize_nvfp4(x, g, pad_16x=pad)
    assert got[0].dtype == want[0].dtype and got[1].dtype == want[1].dtype
    assert torch.equal(got[0], want[0])
    assert torch.equal(got[1].view(torch.uint8), want[1].view(torch.uint8))
    rows = got[0].shape[0]
    decoded = torch.empty(rows, k)
    mixq._mixq._nvfp4_dequantize(got[0], got[1].view(torch.uint8).reshape(-1), decoded)
    ref = eager.dequantize_nvfp4(want[0], torch.ones(()), want[1], torch.float32)
    assert torch.equal(decoded, ref[:rows])


def test_listed_with_capabilities():
    info = ck.list_backends()[mck.BACKEND]
    assert info["available"] and not info["disabled"]
    assert set(info["capabilities"]) >= {
        "scaled_mm_nvfp4", "quantize_nvfp4", "scaled_mm_mxfp8", "int8_linear", "convrot_w4a4_linear", "w4a8_int8_linear",
        "gemv_awq_w4a16", "scaled_mm_svdquant_w4a4", mck.FP8_LINEAR}
    order = registry._priority
    assert order.index(mck.BACKEND) == order.index("eager") - 1


def test_selection_is_cpu_only_and_declines_what_it_cannot_run():
    def pick(func, **kwargs):
        return registry.get_capable_backend(func, kwargs)

    cpu = torch.zeros(4, 64, dtype=torch.int8)
    assert pick("int8_linear", x=torch.zeros(2, 64), weight=cpu, weight_scale=torch.ones(())) == "mixq"
    meta = dict(x=torch.zeros(2, 64, device="meta"), weight=torch.zeros(4, 64, dtype=torch.int8, device="meta"),
                weight_scale=torch.ones((), device="meta"))
    assert pick("int8_linear", **meta) == "eager"
    w4 = dict(x=torch.zeros(2, 64), qweight=torch.zeros(4, 32, dtype=torch.int8), wscales=torch.ones(4))
    assert pick("convrot_w4a4_linear", **w4, quant_group_size=64) == "mixq"
    assert pick("convrot_w4a4_linear", **w4, quant_group_size=32) == "eager"
    tile = dict(act=torch.zeros(256, 64, dtype=torch.int8), wgt=torch.zeros(1, 2, 32, 128, dtype=torch.int8),
                ascales=torch.ones(2, 256), wscales=torch.ones(1, 2, 128), lora_act_in=torch.ones(256, 4),
                lora_up=torch.ones(1, 4, 128))
    assert pick("scaled_mm_svdquant_w4a4", **tile) == "eager"


def test_cache_hits_and_never_serves_a_stale_weight():
    gen = torch.Generator().manual_seed(9)
    weight = quantized("TensorWiseINT8Layout", 64, 128, gen, is_weight=True, per_channel=True)
    x = torch.randn(5, 128, generator=gen)
    start = backend.cache.builds
    with ck.use_backend(mck.BACKEND):
        y1 = F.linear(x, weight)
        y2 = F.linear(x, weight)  # (no inference_mode: INT8 also runs through t + mm)
    assert torch.equal(y1, y2) and backend.cache.builds == start + 1  # packed once

    with torch.no_grad():  # in place: LoRA patching, requantization, copy_
        weight._qdata.neg_()
    with ck.use_backend(mck.BACKEND):
        y3 = F.linear(x, weight)
    with ck.use_backend("eager"):
        ref = F.linear(x, weight)
    assert backend.cache.builds == start + 2
    assert rel(y3, ref) < 1e-6 and rel(y3, -y1) < 1e-6

    with torch.no_grad():  # the scale tensor changed in place
        weight._params.scale.mul_(2)
    with ck.use_backend(mck.BACKEND):
        assert rel(F.linear(x, weight), -2 * y1) < 1e-6
    assert backend.cache.builds == start + 3

    qdata = weakref.ref(weight._qdata)
    assert backend.cache.holds(weight._qdata)
    size = mck.cache_size()
    del weight
    gc.collect()
    assert qdata() is None and mck.cache_size() <= size - 1  # a freed weight leaves the cache


def test_disable_and_override_route_to_eager():
    gen = torch.Generator().manual_seed(10)
    weight = quantized("TensorCoreFP8Layout", 32, 64, gen)
    x = QuantizedTensor.from_float(torch.randn(3, 64, generator=gen), "TensorCoreFP8Layout")
    start = backend.cache.builds
    with torch.inference_mode():
        ck.disable_backend(mck.BACKEND)
        try:
            F.linear(x, weight)
            with ck.use_backend("eager"):
                F.linear(x, weight)
        finally:
            ck.enable_backend(mck.BACKEND)
        assert backend.cache.builds == start
        F.linear(x, weight)
    assert backend.cache.builds == start + 1


def test_unregister_restores_comfy_kitchen():
    from comfy_kitchen.tensor.base import _LAYOUT_DISPATCH_TABLE
    from comfy_kitchen.tensor.fp8 import TensorCoreFP8Layout, _handle_fp8_linear

    table = _LAYOUT_DISPATCH_TABLE[torch.ops.aten.linear.default]
    assert table[TensorCoreFP8Layout] is not _handle_fp8_linear
    mck.unregister()
    try:
        assert table[TensorCoreFP8Layout] is _handle_fp8_linear
        assert mck.BACKEND not in registry._priority and mck.cache_size() == 0
        assert registry.get_capable_backend("int8_linear", {"x": torch.zeros(1, 8)}) != mck.BACKEND
    finally:
        mck.register()
    assert table[TensorCoreFP8Layout] is not _handle_fp8_linear


def test_comfyui_gates_open_for_the_cpu_only(monkeypatch):
    """With ComfyUI loaded, register() makes its supports_*_compute answer yes
    for the CPU (so get_disabled_quant_formats keeps NVFP4, MXFP8 and FP8
    quantized there and they reach mixq) and defers to ComfyUI for other
    devices; unregister() restores ComfyUI's functions. ComfyUI itself is
    not installed here: a stand-in module with its function names is."""
    import sys
    import types

    mm = types.ModuleType("comfy.model_management")
    asked = []

    def original(device=None):
        asked.append(device)
        return False

    for name in mck.COMFYUI_GATES:
        setattr(mm, name, original)
    mm.get_torch_device = lambda: torch.device("cpu")
    monkeypatch.setitem(sys.modules, "comfy.model_management", mm)
    mck.unregister()
    mck.register()
    try:
        for name in mck.COMFYUI_GATES:
            gate = getattr(mm, name)
            assert gate(torch.device("cpu")) and gate() and gate("cpu")
            assert gate(torch.device("cuda", 0)) is False
        assert asked == [torch.device("cuda", 0)] * len(mck.COMFYUI_GATES)
    finally:
        mck.unregister()
        assert all(getattr(mm, name) is original for name in mck.COMFYUI_GATES)
        mck.register()
