"""load_layouts: a Comfy checkpoint into a PyTorch model as ComfyUI loads it.

Every linear layer becomes a KitchenLinear whose weight is a comfy-kitchen
QuantizedTensor built the way ComfyUI's mixed-precision loader builds it
(comfy/ops.py, _load_quantized_module: the same layout class, Params fields
and tensor dtypes per format), and whose forward is ComfyUI's: multiply by
pre_quant_scale, flatten to 2-D, quantize the activation with the layer's
input_scale for the layouts that quantize inputs (FP8, NVFP4, MXFP8), then
F.linear, which comfy-kitchen's layout dispatch runs on the selected backend
(eager, or mixq after mixq.comfy_kitchen.register()). Run it under
torch.inference_mode(), as ComfyUI samples: outside it torch splits F.linear
into t + mm/addmm before comfy-kitchen sees it.

Formats in `emulate` run as ComfyUI runs the formats a device cannot compute
natively (comfy/ops.py, get_disabled_quant_formats: on a CPU NVFP4, MXFP8 and
FP8, see COMFYUI_CPU_EMULATED): the weight is dequantized at every call and
multiplies the float activation. Where comfy-kitchen's own quantized matmul
refuses the CPU (its NVFP4 and MXFP8 scaled matmuls raise ValueError "CPU
does not support swizzle"), the layer falls back, once logged, to the
layout's dequantize-both path (both operands dequantized, float linear):
the formats' arithmetic, which comfy-kitchen's handlers also fall back to
for the errors they do catch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import logging

from .._mixq import Error
from ..torch.load import apply_plan, plan_load

logger = logging.getLogger("mixq.comfy_kitchen")

# What ComfyUI emulates on a CPU (supports_{nvfp4,mxfp8,fp8}_compute are False there).
COMFYUI_CPU_EMULATED = frozenset({"nvfp4", "mxfp8", "float8_e4m3fn", "float8_e5m2"})

# format -> (layout class, storage dtype, quantizes its input): ComfyUI's QUANT_ALGOS.
_LAYOUTS = {
    "float8_e4m3fn": ("TensorCoreFP8Layout", torch.float8_e4m3fn, True),
    "float8_e5m2": ("TensorCoreFP8Layout", torch.float8_e5m2, True),
    "nvfp4": ("TensorCoreNVFP4Layout", torch.uint8, True),
    "mxfp8": ("TensorCoreMXFP8Layout", torch.float8_e4m3fn, True),
    "int8_tensorwise": ("TensorWiseINT8Layout", torch.int8, False),
    "convrot_w4a4": ("TensorCoreConvRotW4A4Layout", torch.int8, False),
    "asym_w4a8_int8": ("AsymW4A8Int8Layout", torch.int8, False),
    "awq_w4a16": ("TensorCoreAWQW4A16Layout", torch.int8, False),
    "svdquant_w4a4": ("TensorCoreSVDQuantW4A4Layout", torch.int8, False),
}


def _scales(fmt: str, params: dict, t) -> dict:
    """The layout's Params fields from the layer's tensors (t(role) -> tensor
    or None), as ComfyUI's loader fills them."""
    if fmt in ("float8_e4m3fn", "float8_e5m2", "int8_tensorwise"):
        out = {"scale": t("weight_scale")}
        if fmt == "int8_tensorwise" and params.get("convrot"):
            out |= {"convrot": True, "convrot_groupsize": int(params["convrot_groupsize"])}
        return out
    if fmt == "mxfp8":
        return {"scale": t("weight_scale").view(torch.float8_e8m0fnu)}
    if fmt == "nvfp4":
        return {"scale": t("weight_scale_2"), "block_scale": t("weight_scale").view(torch.float8_e4m3fn)}
    if fmt == "convrot_w4a4":
        return {"scale": t("weight_scale"), "convrot_groupsize": int(params["convrot_groupsize"]),
                "quant_group_size": 64, "linear_dtype": params.get("linear_dtype", "int4")}
    if fmt == "asym_w4a8_int8":
        s_rel = t("weight_s_rel")
        return {"scale": s_rel.view(torch.float8_e4m3fn) if s_rel.dtype == torch.uint8 else s_rel,
                "s_channel": t("weight_s_channel"), "codebook": t("weight_codebook"),
                "group_size": int(params["group_size"]), "convrot_groupsize": int(params["convrot_groupsize"])}
    if fmt == "awq_w4a16":
        return {"scale": t("weight_scale"), "zeros": t("weight_zeros"), "group_size": int(params["group_size"])}
    if fmt == "svdquant_w4a4":
        return {"scale": t("weight_scale"), "proj_down": t("weight_proj_down"), "proj_up": t("weight_proj_up"),
                "smooth_factor": t("weight_smooth_factor"), "act_unsigned": bool(params.get("act_unsigned", False))}
    raise Error(f"load_layouts: no comfy-kitchen layout for format '{fmt}'")


class KitchenLinear(torch.nn.Module):
    """ComfyUI's mixed-precision Linear: a comfy-kitchen QuantizedTensor weight
    (or a float one for unquantized layers) run through F.linear."""

    def __init__(self, in_features, out_features, weight, bias, layout=None, quantize_input=False,
                 input_scale=None, pre_quant_scale=None, emulate=False):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = None if bias is None else torch.nn.Parameter(bias, requires_grad=False)
        self.layout, self.quantize_input = layout, quantize_input
        self.input_scale, self.pre_quant_scale = input_scale, pre_quant_scale
        self.emulate = emulate
        self._warned = False

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, layout={self.layout}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from comfy_kitchen.tensor import QuantizedTensor

        if self.pre_quant_scale is not None:
            x = x * self.pre_quant_scale.to(x.dtype)
        if self.layout is None or self.emulate:
            weight = self.weight.dequantize() if self.layout else self.weight
            bias = None if self.bias is None else self.bias.to(x.dtype)
            return F.linear(x, weight.to(x.dtype), bias)
        shape = x.shape
        if self.quantize_input:
            x = QuantizedTensor.from_float(x.reshape(-1, shape[-1]), self.layout, scale=self.input_scale)
        try:
            y = F.linear(x, self.weight, self.bias)
        except ValueError as error:
            from comfy_kitchen.tensor.base import dequantize_args

            if not self._warned:
                logger.warning("%s linear failed on the CPU (%s): dequantize-both fallback", self.layout, error)
                self._warned = True
            y = F.linear(*dequantize_args((x, self.weight, self.bias)))
        return y.reshape(*shape[:-1], y.shape[-1]) if self.quantize_input else y


def load_layouts(model: torch.nn.Module, checkpoint, *, prefix: str = "", strict: bool = True,
                 compute_dtype: torch.dtype = torch.bfloat16, emulate=frozenset()):
    """Loads a Comfy checkpoint into ``model`` as ComfyUI would: each linear
    layer of the checkpoint replaces its ``nn.Linear`` by a KitchenLinear
    (quantized weights as comfy-kitchen QuantizedTensors whose logical dtype
    is `compute_dtype`; unquantized weights and biases cast to it). Formats in
    `emulate` dequantize their weight at every call (COMFYUI_CPU_EMULATED is
    what stock ComfyUI does on a CPU). Other tensors, keys, strictness and
    errors as mixq.torch.load_quantized. Returns (missing_keys, unexpected_keys)."""
    from comfy_kitchen.tensor import QuantizedTensor, get_layout_class

    kind = "load_layouts"
    plan = plan_load(model, checkpoint, prefix, strict, kind)
    replacements = []
    for name, module, layer, kept_bias in plan.layers:
        p = layer["prefix"]

        def t(role, p=p, layer=layer):
            return plan.reader.get(f"{p}.{role}") if role in layer["tensors"] else None

        fmt = layer["format"]
        bias = t("bias")
        bias = None if bias is None else bias.to(compute_dtype)
        if fmt is None:
            new = KitchenLinear(module.in_features, module.out_features, t("weight").to(compute_dtype), bias)
        else:
            layout, storage, quantize_input = _LAYOUTS.get(fmt, (None, None, None))
            if layout is None:
                raise Error(f"{kind}: layer '{p}': no comfy-kitchen layout for format '{fmt}'")
            params = get_layout_class(layout).Params(**_scales(fmt, layer["params"], t), orig_dtype=compute_dtype,
                                                     orig_shape=(module.out_features, module.in_features))
            weight = QuantizedTensor(t("weight").view(storage), layout, params)
            new = KitchenLinear(module.in_features, module.out_features, weight, bias, layout, quantize_input,
                                t("input_scale"), t("pre_quant_scale"), emulate=fmt in emulate)
        replacements.append((name, new, kept_bias))
    return apply_plan(model, plan, replacements)
