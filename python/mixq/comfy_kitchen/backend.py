"""The functions of the ``mixq`` comfy-kitchen backend.

Each has the signature of comfy-kitchen's eager function of the same name (the
registry calls ``impl(**kwargs)``). Weights are packed once into a mixq Linear
(cache.py); activations are handled in one of two ways:

* weight-only layouts (INT8, ConvRot W4A4, W4A8, AWQ) pass the float x, which
  the mixq Linear rotates and quantizes itself, as the format prescribes;
* layouts whose activations comfy-kitchen has already quantized (NVFP4,
  MXFP8, FP8, SVDQuant) pass codes and scales. These are turned back into
  float values in a basis where the mixq Linear's own quantizer reproduces the
  very same codes, so no rounding is added:
    - NVFP4: x = e2m1 · S_x (units of the global scale g_x), run with
      input_scale 1.0, then multiplied by g_x. mixq's block scale is
      e4m3(max|x| / 6) = S_x for every block whose largest code is ±6, which
      comfy-kitchen's quantizer gives every block (only blocks more than
      ~1e6 times smaller than the largest can be re-rounded);
    - MXFP8: x = e4m3 · 2^e; requantizing picks the same power of two (or half
      of it, with every value still exact), so the values are identical;
    - FP8: x = the fp8 codes, with the weight run "full precision" (exact in
      bf16 and f32), then multiplied by the activation scale;
    - SVDQuant: x = q · ascale, requantized with smoothing 1 and no low-rank
      branch (scale = max|x| / 7, or / 15 unsigned: the same codes, as every
      group holds a code of ±7, or 15); the low-rank product
      lora_act_in · lora_upᵀ is added in float32.
NVFP4 activations are both made and read in C++ (mixq/block_quant.hpp): the
backend's quantize_nvfp4 returns eager's codes and tiled scales bit for bit,
and scaled_mm_nvfp4 decodes them without torch's element-wise ops (in a FLUX
forward these two steps cost more than the NVFP4 GEMMs themselves when done
in torch).
Outputs are float32 inside, then cast to the dtype the eager function returns.
"""
from __future__ import annotations

import json
import logging

import torch

from .. import _mixq, _threads
from .cache import WeightCache

logger = logging.getLogger("mixq.comfy_kitchen")

cache = WeightCache()

_DTYPE_NAMES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "F8_E4M3", torch.float8_e5m2: "F8_E5M2", torch.int64: "I64",
    torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL",
}
if hasattr(torch, "float8_e8m0fnu"):
    _DTYPE_NAMES[torch.float8_e8m0fnu] = "F8_E8M0"

_SVDQ_UNSIGNED_SHIFT = 0.171875  # nunchaku's post-GELU shift, added by mixq's quantizer


def _entry(t: torch.Tensor):
    t = t.detach()
    if t.dtype not in _DTYPE_NAMES:
        raise _mixq.Error(f"comfy-kitchen backend: tensor dtype {t.dtype} has no safetensors name")
    data = t.contiguous().reshape(-1)
    return (_DTYPE_NAMES[t.dtype], list(t.shape), data.view(torch.uint8) if data.numel() else
            torch.zeros(0, dtype=torch.uint8))


def _build(name: str, marker, tensors: dict) -> "_mixq.Linear":
    return _mixq._linear_from_tensors(name, json.dumps(marker), {r: _entry(t) for r, t in tensors.items()})


def _linear(key_tensors, extra, name, marker, tensors):
    """The cached mixq Linear for these weight tensors and call parameters;
    `tensors()` gives the layer's tensors by role when it must be built."""
    return cache.get(list(key_tensors), lambda: _build(name, marker, tensors()), extra)


def _run(linear, x: torch.Tensor) -> torch.Tensor:
    """y = linear(x) as float32 [..., out_features] (x any float dtype)."""
    _threads.follow_torch(torch.get_num_threads)
    y = torch.empty(*x.shape[:-1], linear.out_features, dtype=torch.float32)
    if y.numel():
        linear.forward(x.detach(), y)
    return y


def _finish(y: torch.Tensor, bias, out_dtype, residual=None, residual_scale=None) -> torch.Tensor:
    if bias is not None:
        # NVFP4 / MXFP8 outputs keep the padded N of their storage while the
        # layouts pass the logical [N] bias: it covers the first N columns.
        y[..., : bias.shape[-1]] += bias.to(torch.float32)
    y = y.to(out_dtype)
    if residual is not None:
        if residual_scale is None:
            raise ValueError("residual requires residual_scale")
        y = torch.addcmul(residual.to(y.dtype), y, residual_scale.to(y.dtype))
    return y


def _input_act(x, input_act, weight, eps):
    if input_act in (None, "none"):
        return x
    from comfy_kitchen.backends._activations import apply_input_act

    return apply_input_act(x, input_act, weight, eps)


def _unswizzle(block_scales: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    from comfy_kitchen.float_utils import from_blocked

    return from_blocked(block_scales, num_rows=rows, num_cols=cols)


# ---------------------------------------------------------------- NVFP4, MXFP8

def _nvfp4_scale_bytes(rows: int, k: int) -> int:
    return -(-rows // 128) * 128 * (-(-(k // 16) // 4) * 4)


def quantize_nvfp4(x, per_tensor_scale, epsilon=0.0, pad_16x=False, hi_first=True):
    """comfy-kitchen's quantize_nvfp4 (the eager function's codes and tiled
    E4M3 scales, bit for bit) in C++: ComfyUI quantizes every NVFP4 layer's
    input through it before scaled_mm_nvfp4."""
    if epsilon != 0.0 or not hi_first or x.dim() != 2 or x.shape[1] % 16:
        from comfy_kitchen.backends.eager.quantization import quantize_nvfp4 as eager

        return eager(x, per_tensor_scale, epsilon=epsilon, pad_16x=pad_16x, hi_first=hi_first)
    _threads.follow_torch(torch.get_num_threads)
    m, k = x.shape
    rows = -(-m // 16) * 16 if pad_16x else m
    data = torch.empty(rows, k // 2, dtype=torch.uint8)
    scales = torch.empty(_nvfp4_scale_bytes(rows, k), dtype=torch.uint8)
    _mixq._nvfp4_quantize(x.detach().to(torch.float32).contiguous(), float(per_tensor_scale), bool(pad_16x),
                          data, scales)
    return data, scales.view(-(-rows // 128) * 128, -1).view(torch.float8_e4m3fn)


def scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b,
                    bias=None, out_dtype=None, alpha=None):
    """(a · bᵀ)·g_a·g_b + bias for NVFP4 a [M, K/2], b [N, K/2] (alpha is
    ignored, as by the eager backend: the scales give the product)."""
    out_dtype = out_dtype or torch.bfloat16
    m, half = a.shape
    k = 2 * half
    bs_b = block_scale_b.view(torch.uint8) if block_scale_b.dtype != torch.uint8 else block_scale_b
    lin = _linear((b, block_scale_b, tensor_scale_b), (), f"scaled_mm_nvfp4[{b.shape[0]}x{k}]",
                  {"format": "nvfp4"},
                  lambda: {"weight": b, "weight_scale": bs_b, "weight_scale_2": tensor_scale_b.float().reshape(()),
                   "input_scale": torch.ones((), dtype=torch.float32)})
    x = torch.empty(m, k, dtype=torch.float32)
    _threads.follow_torch(torch.get_num_threads)
    _mixq._nvfp4_dequantize(a.contiguous(), block_scale_a.contiguous().view(torch.uint8).reshape(-1), x)
    y = _run(lin, x)
    y *= tensor_scale_a.to(torch.float32)
    return _finish(y, bias, out_dtype)


def _e8m0_to_f32(e: torch.Tensor) -> torch.Tensor:
    from comfy_kitchen.float_utils import e8m0_to_f32

    return e8m0_to_f32(e)


def scaled_mm_mxfp8(a, b, block_scale_a, block_scale_b, bias=None, out_dtype=None):
    """a · bᵀ + bias for MXFP8 a [M, K], b [N, K] with swizzled E8M0 scales."""
    out_dtype = out_dtype or torch.bfloat16
    m, k = a.shape
    lin = _linear((b, block_scale_b), (), f"scaled_mm_mxfp8[{b.shape[0]}x{k}]", {"format": "mxfp8"},
                  lambda: {"weight": b, "weight_scale": block_scale_b.view(torch.uint8)})
    scales = _e8m0_to_f32(_unswizzle(block_scale_a.view(torch.uint8), m, k // 32))
    x = a.to(torch.float32).view(m, k // 32, 32).mul_(scales.unsqueeze(-1)).view(m, k)
    return _finish(_run(lin, x), bias, out_dtype)


def fp8_linear(x_codes, x_scale, weight, weight_scale, bias, out_dtype):
    """FP8 per-tensor linear for the layout handler in __init__.py: x_codes and
    weight are FP8 tensors, x_scale and weight_scale per-tensor scales."""
    lin = _linear((weight, weight_scale), (), f"fp8_linear[{weight.shape[0]}x{weight.shape[1]}]",
                  {"format": "float8_e4m3fn" if weight.dtype == torch.float8_e4m3fn else "float8_e5m2",
                   "full_precision_matrix_mult": True},
                  lambda: {"weight": weight, "weight_scale": weight_scale.float().reshape(())})
    y = _run(lin, x_codes.to(torch.float32))
    y *= x_scale.to(torch.float32)
    return _finish(y, bias, out_dtype)


# ------------------------------------------------------- weight-only layouts

def int8_linear(x, weight, weight_scale, bias=None, out_dtype=torch.bfloat16, convrot=False,
                convrot_groupsize=256, input_act=None, input_act_weight=None, input_act_eps=0.0,
                residual=None, residual_scale=None):
    x = _input_act(x, input_act, input_act_weight, input_act_eps)
    n, k = weight.shape
    if x.shape[-1] != k:
        raise ValueError(f"Input and weight inner dimensions must match, got {x.shape[-1]} and {k}")
    scale = weight_scale.float()
    scale = scale.reshape(()) if scale.numel() == 1 else scale.reshape(n, 1)  # mixq: [] or [N, 1]
    marker = {"format": "int8_tensorwise", "convrot": bool(convrot), "convrot_groupsize": int(convrot_groupsize)}
    lin = _linear((weight, weight_scale), (bool(convrot), int(convrot_groupsize)), f"int8_linear[{n}x{k}]",
                  marker, lambda: {"weight": weight, "weight_scale": scale})
    return _finish(_run(lin, x), bias, out_dtype, residual, residual_scale)


def convrot_w4a4_linear(x, qweight, wscales, bias=None, convrot_groupsize=256, quant_group_size=64,
                        linear_dtype="int4"):
    """ConvRot W4A4. linear_dtype "int8" runs int8 activations, as comfy-kitchen's
    CUDA and HIP backends do (its eager backend always uses int4)."""
    n, half = qweight.shape
    marker = {"format": "convrot_w4a4", "convrot_groupsize": int(convrot_groupsize), "linear_dtype": linear_dtype}
    lin = _linear((qweight, wscales), (int(convrot_groupsize), linear_dtype), f"convrot_w4a4_linear[{n}x{2 * half}]",
                  marker, lambda: {"weight": qweight, "weight_scale": wscales.float().reshape(n)})
    return _finish(_run(lin, x), bias, x.dtype)


def w4a8_int8_linear(x, qdata, s_rel, s_channel, codebook=None, correction=None, bias=None, group_size=16,
                     convrot_groupsize=256, out_dtype=torch.bfloat16, input_act=None, input_act_weight=None,
                     input_act_eps=0.0, residual=None, residual_scale=None):
    x = _input_act(x, input_act, input_act_weight, input_act_eps)
    n, half = qdata.shape
    if x.shape[-1] != 2 * half:
        raise ValueError(f"Input K={x.shape[-1]} does not match qdata K={2 * half}")
    tensors = {"weight": qdata, "weight_s_rel": s_rel, "weight_s_channel": s_channel}
    key = [qdata, s_rel, s_channel]
    for role, t in (("weight_codebook", codebook), ("weight_correction", correction)):
        if t is not None:
            tensors[role] = t
            key.append(t)
    marker = {"format": "asym_w4a8_int8", "group_size": int(group_size), "convrot_groupsize": int(convrot_groupsize)}
    lin = _linear(key, (int(group_size), int(convrot_groupsize), codebook is None, correction is None),
                  f"w4a8_int8_linear[{n}x{2 * half}]", marker, lambda: tensors)
    return _finish(_run(lin, x), bias, out_dtype, residual, residual_scale)


def gemv_awq_w4a16(x, qweight, wscales, wzeros, bias=None, group_size=64):
    """AWQ W4A16; returns wscales' dtype, as the eager backend does."""
    n, half = qweight.shape
    marker = {"format": "awq_w4a16", "group_size": int(group_size)}
    lin = _linear((qweight, wscales, wzeros), (int(group_size),), f"gemv_awq_w4a16[{n}x{2 * half}]", marker,
                  lambda: {"weight": qweight, "weight_scale": wscales, "weight_zeros": wzeros})
    return _finish(_run(lin, x), bias, wscales.dtype)


# ------------------------------------------------------------------ SVDQuant

def _unpack_int4(packed: torch.Tensor, signed: bool) -> torch.Tensor:
    """[M, K/2] int8, low nibble = even k -> float32 [M, K]."""
    b = packed.view(torch.uint8)
    lo, hi = (b & 0x0F).to(torch.float32), (b >> 4).to(torch.float32)
    if signed:
        lo = torch.where(lo >= 8, lo - 16, lo)
        hi = torch.where(hi >= 8, hi - 16, hi)
    return torch.stack((lo, hi), dim=-1).reshape(packed.shape[0], -1)


def scaled_mm_svdquant_w4a4(act, wgt, ascales, wscales, lora_act_in, lora_up, bias=None, act_unsigned=False):
    """SVDQuant int4 GEMM + lora_act_in · lora_upᵀ + bias, natural layout;
    returns lora_up's dtype (eager: the wscales dtype, the same one)."""
    m, half = act.shape
    k, n = 2 * half, wgt.shape[0]
    q = _unpack_int4(act, signed=not act_unsigned).view(m, k // 64, 64)
    scales = ascales.t().to(torch.float32)
    if act_unsigned and bool(((q.amax(dim=-1) < 15) & (scales != 0)).any()):
        # A group whose largest code is not 15 had inputs below -0.171875 (outside
        # the unsigned grid's contract: the quantizer clamped them to 0), so its
        # scale is not max/15 and requantizing would re-round it: evaluate the
        # formula directly (float32, dequantized operands).
        w = _unpack_int4(wgt, signed=True).view(n, k // 64, 64) * wscales.t().to(torch.float32).unsqueeze(-1)
        y = (q * scales.unsqueeze(-1)).view(m, k) @ w.view(n, k).t()
    else:
        marker = {"format": "svdquant_w4a4", "act_unsigned": bool(act_unsigned)}
        lin = _linear((wgt, wscales), (bool(act_unsigned),), f"scaled_mm_svdquant_w4a4[{n}x{k}]", marker,
                      lambda: {"weight": wgt, "weight_scale": wscales,
                               "weight_smooth_factor": torch.ones(k, dtype=torch.float32),
                               "weight_proj_down": torch.zeros(k, 1, dtype=torch.float32),
                               "weight_proj_up": torch.zeros(n, 1, dtype=torch.float32)})
        x = q.mul_(scales.unsqueeze(-1)).view(m, k)
        if act_unsigned:
            x -= _SVDQ_UNSIGNED_SHIFT  # mixq's quantizer adds it back
        y = _run(lin, x)
    y += lora_act_in.to(torch.float32) @ lora_up.to(torch.float32).t()
    return _finish(y, bias, lora_up.dtype)
