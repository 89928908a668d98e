"""mixq as a comfy-kitchen backend: ComfyUI's quantized linears on the CPU.

ComfyUI runs quantized layers through comfy-kitchen, whose registry picks a
backend per call (cuda, triton, eager, ...). On a CPU that is the eager
backend, which dequantizes every weight at every call. After::

    import mixq.comfy_kitchen
    mixq.comfy_kitchen.register()

the registry has a backend named ``mixq``, ahead of ``eager``, whose
functions (the names comfy-kitchen's quantized layouts call) run mixq's
kernels on weights packed once per weight tensor. Its constraints admit CPU
tensors only, so GPU calls, and anything else it declines, go to the next
backend. ComfyUI needs no change: call ``register()`` from a custom node's
``__init__.py`` (or any code that runs before the first sampling).

The FP8 per-tensor layout calls ``torch.nn.functional.scaled_mm`` directly,
not the registry; ``register()`` therefore also installs an ``aten.linear``
handler for ``TensorCoreFP8Layout`` (through comfy-kitchen's own
``register_layout_op``) that sends CPU calls to mixq when the registry would
pick the ``mixq`` backend (so ``use_backend("eager")`` and
``disable_backend("mixq")`` apply to it too) and everything else to
comfy-kitchen's handler.

Stock ComfyUI does not call comfy-kitchen for every format on a CPU: its
``get_disabled_quant_formats`` asks ``comfy.model_management.supports_*_compute``
and, where the answer is no (NVFP4, MXFP8 and FP8 on a CPU), dequantizes the
weight at every call instead ("emulated ops"). When ComfyUI is loaded,
``register()`` therefore answers yes for CPU devices (and defers to ComfyUI
for every other device), so those layers stay quantized and reach mixq;
``unregister()`` restores ComfyUI's functions.

``load_layouts`` loads a Comfy checkpoint into a PyTorch model the way
ComfyUI's loader does (weights as comfy-kitchen ``QuantizedTensor``s), for
running e.g. a diffusers model through comfy-kitchen.
"""
from __future__ import annotations

import sys
import threading

import torch

from . import backend
from .loader import COMFYUI_CPU_EMULATED, KitchenLinear, load_layouts

__all__ = ["BACKEND", "COMFYUI_CPU_EMULATED", "KitchenLinear", "capabilities", "cache_size", "load_layouts",
           "register", "unregister"]

BACKEND = "mixq"
# Not a comfy-kitchen function: the name under which the FP8 layout handler
# asks the registry whether mixq should run an FP8 linear.
FP8_LINEAR = "fp8_linear"

_lock = threading.Lock()
_original_fp8_handler = None
# ComfyUI's capability questions that decide whether a format runs quantized.
COMFYUI_GATES = ("supports_fp8_compute", "supports_nvfp4_compute", "supports_mxfp8_compute",
                 "supports_int8_compute")
_original_gates: dict = {}


def _open_comfyui_gates() -> None:
    mm = sys.modules.get("comfy.model_management")
    if mm is None:
        return
    for name in COMFYUI_GATES:
        original = getattr(mm, name, None)
        if original is None or name in _original_gates:
            continue

        def gate(device=None, _original=original):
            target = device if device is not None else mm.get_torch_device()
            if torch.device(target).type == "cpu":
                return True
            return _original(device)

        gate.__name__ = name
        _original_gates[name] = original
        setattr(mm, name, gate)


def _close_comfyui_gates() -> None:
    mm = sys.modules.get("comfy.model_management")
    for name, original in list(_original_gates.items()):
        if mm is not None:
            setattr(mm, name, original)
        del _original_gates[name]


def _constraints() -> dict:
    from comfy_kitchen.constraints import ExactDims, FunctionConstraints, ParamConstraint, ValidationResult

    floats = frozenset({torch.float32, torch.float16, torch.bfloat16})
    cpu = frozenset({"cpu"})
    f = ParamConstraint(dtypes=floats)
    i8_2d = ParamConstraint(dtypes=frozenset({torch.int8}), shape_rules=(ExactDims(2),))

    def rule(name, check, reason):
        def call_rule(kwargs):
            return ValidationResult.ok() if check(kwargs) else ValidationResult.fail(name, reason)
        return call_rule

    def fc(params, *rules):
        return FunctionConstraints(params=params, default_devices=cpu, call_rules=tuple(rules))

    out = {
        "scaled_mm_nvfp4": fc({
            "a": ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),)),
            "b": ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),)),
            "tensor_scale_a": ParamConstraint(dtypes=frozenset({torch.float32})),
            "tensor_scale_b": ParamConstraint(dtypes=frozenset({torch.float32})),
            "block_scale_a": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn})),
            "block_scale_b": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn})),
            "bias": f, "out_dtype": f},
            rule("a", lambda k: k["a"].shape[1] == k["b"].shape[1], "K of a and b differ")),
        "quantize_nvfp4": fc({
            "x": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "per_tensor_scale": ParamConstraint(dtypes=frozenset({torch.float32}))}),
        "int8_linear": fc({
            "x": f, "weight": i8_2d, "weight_scale": f, "bias": f, "out_dtype": f,
            "convrot": ParamConstraint(dtypes=frozenset({bool})),
            "convrot_groupsize": ParamConstraint(dtypes=frozenset({int}))}),
        "convrot_w4a4_linear": fc({
            "x": f, "qweight": i8_2d, "wscales": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(1),)),
            "bias": f, "convrot_groupsize": ParamConstraint(dtypes=frozenset({int})),
            "quant_group_size": ParamConstraint(dtypes=frozenset({int})),
            "linear_dtype": ParamConstraint(dtypes=frozenset({str}))},
            rule("quant_group_size", lambda k: k.get("quant_group_size", 64) == 64, "must be 64"),
            rule("linear_dtype", lambda k: k.get("linear_dtype", "int4") in ("int4", "int8"), "int4 or int8")),
        "w4a8_int8_linear": fc({
            "x": f, "qdata": i8_2d,
            "s_rel": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn, torch.float32}), shape_rules=(ExactDims(2),)),
            "s_channel": ParamConstraint(dtypes=frozenset({torch.float32}), shape_rules=(ExactDims(1),)),
            "codebook": ParamConstraint(dtypes=frozenset({torch.float32}), shape_rules=(ExactDims(1),)),
            "correction": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "bias": f, "out_dtype": f},
            # 4-bit codes only (two per byte); other widths go to the next backend
            rule("qdata", lambda k: k["qdata"].shape[1] * 2 == k["x"].shape[-1], "not 4-bit [N, K/2] codes")),
        "gemv_awq_w4a16": fc({
            "x": f, "qweight": i8_2d, "wscales": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "wzeros": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)), "bias": f}),
        "scaled_mm_svdquant_w4a4": fc({
            "act": ParamConstraint(dtypes=frozenset({torch.int8, torch.uint8}), shape_rules=(ExactDims(2),)),
            "wgt": i8_2d,  # natural layout; tile-packed (4-D) goes to the next backend
            "ascales": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "wscales": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "lora_act_in": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)),
            "lora_up": ParamConstraint(dtypes=floats, shape_rules=(ExactDims(2),)), "bias": f}),
        FP8_LINEAR: fc({
            "x": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn, torch.float8_e5m2}), shape_rules=(ExactDims(2),)),
            "weight": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn, torch.float8_e5m2}),
                                      shape_rules=(ExactDims(2),)),
            "bias": f}),
    }
    if hasattr(torch, "float8_e8m0fnu"):
        e8m0 = ParamConstraint(dtypes=frozenset({torch.float8_e8m0fnu}))
        fp8_2d = ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn}), shape_rules=(ExactDims(2),))
        out["scaled_mm_mxfp8"] = fc({"a": fp8_2d, "b": fp8_2d, "block_scale_a": e8m0, "block_scale_b": e8m0,
                                     "bias": f, "out_dtype": f},
                                    rule("a", lambda k: k["a"].shape[1] == k["b"].shape[1], "K of a and b differ"))
    return out


def capabilities() -> dict:
    """{function name: comfy_kitchen FunctionConstraints} of the mixq backend."""
    return _constraints()


class _Module:
    """The object the registry calls functions on (``getattr(module, name)``)."""

    scaled_mm_nvfp4 = staticmethod(backend.scaled_mm_nvfp4)
    quantize_nvfp4 = staticmethod(backend.quantize_nvfp4)
    scaled_mm_mxfp8 = staticmethod(backend.scaled_mm_mxfp8)
    int8_linear = staticmethod(backend.int8_linear)
    convrot_w4a4_linear = staticmethod(backend.convrot_w4a4_linear)
    w4a8_int8_linear = staticmethod(backend.w4a8_int8_linear)
    gemv_awq_w4a16 = staticmethod(backend.gemv_awq_w4a16)
    scaled_mm_svdquant_w4a4 = staticmethod(backend.scaled_mm_svdquant_w4a4)
    fp8_linear = staticmethod(backend.fp8_linear)


def _mixq_runs_fp8(x, weight, bias) -> bool:
    from comfy_kitchen.exceptions import NoCapableBackendError
    from comfy_kitchen.registry import registry

    override = getattr(registry._thread_local, "backend_override", None)
    if override is not None and override != BACKEND:
        return False
    try:
        return registry.get_capable_backend(FP8_LINEAR, {"x": x, "weight": weight, "bias": bias}) == BACKEND
    except NoCapableBackendError:
        return False


def _fp8_linear_handler(qt, args, kwargs):
    from comfy_kitchen.tensor import QuantizedTensor

    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else None
    if (isinstance(x, QuantizedTensor) and isinstance(weight, QuantizedTensor)
            and x._layout_cls == weight._layout_cls == "TensorCoreFP8Layout"
            and not isinstance(bias, QuantizedTensor)
            and _mixq_runs_fp8(x._qdata, weight._qdata, bias)):
        out_dtype = kwargs.get("out_dtype", x._params.orig_dtype)
        return backend.fp8_linear(x._qdata, x._params.scale, weight._qdata, weight._params.scale, bias, out_dtype)
    return _original_fp8_handler(qt, args, kwargs)


def register(ahead_of: str = "eager") -> None:
    """Registers the ``mixq`` backend with comfy-kitchen's registry, placed
    just ahead of `ahead_of` in the priority list, and installs the FP8 linear
    handler. Calling it again re-registers (and re-enables) it."""
    global _original_fp8_handler
    import comfy_kitchen
    from comfy_kitchen.registry import registry
    from comfy_kitchen.tensor.base import _LAYOUT_DISPATCH_TABLE, register_layout_op
    from comfy_kitchen.tensor.fp8 import TensorCoreFP8Layout

    with _lock:
        registry.register(name=BACKEND, module=_Module, capabilities=_constraints())
        registry.enable(BACKEND)
        order = [b for b in getattr(registry, "_priority", ["cuda", "triton", "eager"]) if b != BACKEND]
        order.insert(order.index(ahead_of) if ahead_of in order else len(order), BACKEND)
        comfy_kitchen.set_backend_priority(order)
        linear = torch.ops.aten.linear.default
        current = _LAYOUT_DISPATCH_TABLE.get(linear, {}).get(TensorCoreFP8Layout)
        if current is not _fp8_linear_handler:
            _original_fp8_handler = current
            register_layout_op(linear, TensorCoreFP8Layout)(_fp8_linear_handler)
        _open_comfyui_gates()


def unregister() -> None:
    """Removes ``mixq`` from the priority list, disables it, restores
    comfy-kitchen's FP8 linear handler and ComfyUI's capability functions,
    and empties the weight cache."""
    import comfy_kitchen
    from comfy_kitchen.registry import registry
    from comfy_kitchen.tensor.base import register_layout_op
    from comfy_kitchen.tensor.fp8 import TensorCoreFP8Layout

    with _lock:
        if registry.is_available(BACKEND):
            registry.disable(BACKEND)
        order = [b for b in getattr(registry, "_priority", []) if b != BACKEND]
        if order:
            comfy_kitchen.set_backend_priority(order)
        if _original_fp8_handler is not None:
            register_layout_op(torch.ops.aten.linear.default, TensorCoreFP8Layout)(_original_fp8_handler)
        _close_comfyui_gates()
        backend.cache.clear()


def cache_size() -> int:
    """How many packed weights the backend holds."""
    return len(backend.cache)
