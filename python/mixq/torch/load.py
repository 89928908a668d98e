"""mixq.torch.load_quantized: a Comfy checkpoint into any PyTorch model.

Three steps, so that a rejected checkpoint leaves the model as it was:
  1. plan (plan_load, shared with mixq.comfy_kitchen.load_layouts): match every
     checkpoint layer and tensor to a module, parameter or buffer, check shapes
     and keys, and read every other tensor into a new tensor of the target's
     dtype;
  2. build every replacement module: here a mixq Linear, which prepares its own
     packed weights from the memory-mapped file and is then detached from it,
     or (INT8 and ConvRot W4A4 on AVX2 / AVX-512: Linear.in_place) reads its
     weight in place from the file, which it then keeps mapped;
  3. apply: swap the modules and assign the tensors (nothing left that can fail).
Because the Linears are detached, the checkpoint goes when the caller drops
it; the file stays mapped only while in-place Linears live, and their pages
are their weights: the file is never held in memory twice. Already during
step 2, each packing Linear releases the file pages it consumed (mixq's
default for every Linear built from a checkpoint), so the peak stays near the
final size.
"""
from __future__ import annotations

import os
from collections import namedtuple
from typing import Callable, Optional, Union

import torch

import mixq as _pkg
from .._mixq import Error
from .linear import Linear

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# make_module(name, linear, module) -> the module that replaces `module` (an
# nn.Linear of `model` named `name`) and runs `linear` (a mixq.Linear).
MakeModule = Callable[[str, "_pkg.Linear", torch.nn.Module], torch.nn.Module]


def make_linear_module(name: str, linear, module: torch.nn.Module) -> torch.nn.Module:
    """The default ``make_module`` of :func:`load_quantized`: a
    :class:`mixq.torch.Linear` with the replaced module's sizes."""
    return Linear(linear, module.in_features, module.out_features)


def _describe(module) -> str:
    if isinstance(module, (torch.nn.Linear, Linear)):
        return f"{type(module).__name__}(in_features={module.in_features}, out_features={module.out_features})"
    return type(module).__name__


def _shape(t) -> list:
    return [int(d) for d in t]


class _Reader:
    """Reads single tensors of the checkpoint's files (safetensors' own mmap
    reader, one tensor at a time)."""

    def __init__(self, files: list):
        from safetensors import safe_open

        self._where = {}
        self._handles = []
        for path in files:
            handle = safe_open(path, framework="pt")
            self._handles.append(handle)
            for key in handle.keys():
                self._where[key] = handle

    def get(self, name: str) -> torch.Tensor:
        return self._where[name].get_tensor(name)


def _checkpoint(checkpoint):
    if isinstance(checkpoint, _pkg.Checkpoint):
        return checkpoint
    if isinstance(checkpoint, (str, os.PathLike, list, tuple)):
        return _pkg.open(checkpoint)
    raise Error(f"load_quantized: checkpoint must be a path, a list of shard paths or a mixq.Checkpoint, "
                f"got {type(checkpoint).__name__}")


class Plan:
    """What plan_load matched: `layers` is [(module name, module, layer entry of
    Checkpoint.inspect(), kept bias or None)], `copies` [(model key, tensor)]."""

    def __init__(self, ckpt, report, reader):
        self.ckpt, self.report, self.reader = ckpt, report, reader
        self.layers = []
        self.copies = []
        self.missing = []
        self.unexpected = []


def plan_load(model: torch.nn.Module, checkpoint, prefix: str, strict: bool, kind: str,
              shapes: Optional[dict] = None) -> Plan:
    """Matches a checkpoint to `model` without changing it (see load_quantized).
    Linear shapes are checked to within 32 (a padded stored K or N); callers
    that build the layer check them exactly. `shapes` (prefix -> (out, in))
    replaces the stored shapes of layers that are one rank's share (a `mixq
    shard` rank file) by the whole layer's."""
    if not isinstance(model, torch.nn.Module):
        raise Error(f"{kind}: model must be a torch.nn.Module, got {type(model).__name__}")
    ckpt = _checkpoint(checkpoint)
    report = ckpt.inspect()
    plan = Plan(ckpt, report, _Reader([f["path"] for f in report["files"]]))

    modules = dict(model.named_modules())
    targets = model.state_dict(keep_vars=True)  # persistent parameters and buffers
    for name, tensor in targets.items():
        if tensor.device.type not in ("cpu", "meta"):
            raise Error(f"{kind}: model tensor '{name}' is on {tensor.device}; mixq runs on the CPU")

    def local(key: str) -> Optional[str]:
        return key[len(prefix):] if key.startswith(prefix) else None

    covered = set()  # model keys the checkpoint fills

    def copy_into(model_key: str, ckpt_key: str, shape: list):
        target = targets[model_key]
        if list(target.shape) != shape:
            raise Error(f"{kind}: '{ckpt_key}' has shape {shape} in the checkpoint but "
                        f"'{model_key}' has shape {list(target.shape)} in the model")
        plan.copies.append((model_key, plan.reader.get(ckpt_key).to(dtype=target.dtype)))
        covered.add(model_key)

    for layer in report["layers"]:
        name = local(layer["prefix"])
        if name is None:
            continue
        keys = {role: f"{layer['prefix']}.{role}" for role in layer["tensors"]}
        module = modules.get(name)
        if module is None:
            plan.unexpected += sorted(keys.values())
            continue
        if "problem" in layer:
            raise Error(f"{kind}: {layer['problem']}")
        fmt = layer["format"]
        if isinstance(module, (torch.nn.Linear, Linear)):
            stored = (shapes or {}).get(layer["prefix"], (layer["out_features"], layer["in_features"]))
            want = (module.out_features, module.in_features)
            if not all(s - 32 < w <= s for w, s in zip(want, stored)):
                raise Error(shape_error(kind, layer, stored, name, module))
            covered.add(f"{name}.weight")
            kept_bias = None
            module_bias = getattr(module, "bias", None)
            if "bias" in layer["tensors"]:
                if module_bias is None:
                    plan.unexpected.append(keys["bias"])
                else:
                    covered.add(f"{name}.bias")
            elif isinstance(module_bias, torch.Tensor) and not module_bias.is_meta:
                kept_bias = module_bias.detach()  # reported missing; its value is kept, as load_state_dict does
            plan.layers.append((name, module, layer, kept_bias))
        elif fmt is None and set(layer["tensors"]) <= {"weight", "bias"}:
            for role, key in keys.items():  # an unquantized 2-D weight of another module (e.g. an embedding)
                if f"{name}.{role}" in targets:
                    copy_into(f"{name}.{role}", key, layer["tensors"][role]["shape"])
                else:
                    plan.unexpected.append(key)
        else:
            raise Error(f"{kind}: layer '{layer['prefix']}' is {fmt} but '{name}' is {_describe(module)}; "
                        "only nn.Linear modules can run quantized layers")

    for tensor in report["other_tensors"]:
        name = local(tensor["name"])
        if name is None:
            continue
        if name in targets:
            copy_into(name, tensor["name"], tensor["shape"])
        else:
            plan.unexpected.append(tensor["name"])

    plan.missing = sorted(k for k in targets if k not in covered)
    plan.unexpected = sorted(plan.unexpected)
    if strict:
        check_strict(plan, kind)
    return plan


def check_strict(plan: Plan, kind: str):
    if plan.missing or plan.unexpected:
        parts = []
        for what, keys in (("missing", plan.missing), ("unexpected", plan.unexpected)):
            if keys:
                parts.append(f"{len(keys)} {what} key(s): {', '.join(keys[:20])}{' ...' if len(keys) > 20 else ''}")
        raise Error(f"{kind} (strict): {'; '.join(parts)}")


def shape_error(kind: str, layer: dict, stored, name: str, module) -> str:
    return (f"{kind}: layer '{layer['prefix']}' is [{stored[0]}, {stored[1]}] ({layer['format'] or 'unquantized'}) "
            f"in the checkpoint but '{name}' is {_describe(module)}")


def apply_plan(model: torch.nn.Module, plan: Plan, replacements) -> IncompatibleKeys:
    """Swaps in `replacements` [(module name, new module, kept bias)] and
    assigns the planned tensor copies. Nothing here raises for a valid model."""
    modules = dict(model.named_modules())
    for name, replacement, kept_bias in replacements:
        if kept_bias is not None:
            replacement.register_buffer("missing_bias", kept_bias.clone())
            replacement.register_forward_hook(_add_missing_bias)
        parent_name, _, child = name.rpartition(".")
        setattr(modules[parent_name] if parent_name else model, child, replacement)
    with torch.no_grad():
        for key, value in plan.copies:
            owner_name, _, leaf = key.rpartition(".")
            owner = model.get_submodule(owner_name) if owner_name else model
            current = getattr(owner, leaf)
            if current.is_meta:
                if isinstance(current, torch.nn.Parameter):
                    setattr(owner, leaf, torch.nn.Parameter(value, requires_grad=current.requires_grad))
                else:
                    owner._buffers[leaf] = value
            else:
                current.copy_(value)
    return IncompatibleKeys(plan.missing, plan.unexpected)


def load_quantized(model: torch.nn.Module, checkpoint: Union[str, os.PathLike, list, "_pkg.Checkpoint"], *,
                   prefix: str = "", strict: bool = True,
                   make_module: Optional[MakeModule] = None, tp_group=None,
                   profile: str = "comfyui") -> IncompatibleKeys:
    """Loads a (mixed) Comfy checkpoint into ``model`` like ``load_state_dict``.

    Every ``nn.Linear`` whose qualified name is a layer of the checkpoint (the
    checkpoint's keys with ``prefix`` stripped; keys outside ``prefix`` are
    ignored) is replaced by ``make_module(name, mixq_linear, module)``, by
    default a :class:`mixq.torch.Linear`; every other checkpoint tensor is
    copied into the parameter or buffer of the same name, cast to its dtype
    (parameters on the ``meta`` device are materialized on the CPU).
    ``checkpoint``: a .safetensors file, an index, a directory of shards, a
    list of shards, or an opened :class:`mixq.Checkpoint`.

    Returns ``(missing_keys, unexpected_keys)``; with ``strict=True`` either
    raises. Any mismatch (shapes, a quantized layer whose module is not an
    ``nn.Linear``, a layer that fails validation, a non-CPU model) raises
    :class:`mixq.Error` naming the key before the model is changed. A layer
    without a bias whose module has one keeps the module's bias (reported
    missing), as ``load_state_dict(strict=False)`` would.

    ``tp_group`` (a ``torch.distributed`` process group): tensor parallelism
    over the group's ranks (docs/TP.md). Each rank holds only its share of
    every layer, split as ``mixq plan --profile <profile> --tp <size>`` says
    (column, row or replicated), in :class:`ColumnParallelLinear` /
    :class:`RowParallelLinear` modules that all-gather or all-reduce on the
    group; attention runs on the rank's heads. ``checkpoint`` may also be a
    ``mixq shard`` folder (or its mixq-shard.json) of the group's size: each
    rank then reads only its own file. Every rank must call it. A degree the
    plan rejects, a group whose size differs from the shard folder's, or an
    attention whose heads do not split raises :class:`mixq.Error` with the
    model unchanged.
    """
    kind = "load_quantized"
    if tp_group is not None:
        if make_module is not None:
            raise Error(f"{kind}: make_module cannot be combined with tp_group")
        from .tp_load import load_tp

        return load_tp(model, checkpoint, prefix, strict, tp_group, profile)
    from .tp_plan import shard_index_path

    index = shard_index_path(checkpoint)
    if index is not None:
        raise Error(f"{kind}: {index.parent} is a `mixq shard` folder (one checkpoint per rank): "
                    "load it with tp_group=<process group>")
    make_module = make_module or make_linear_module
    plan = plan_load(model, checkpoint, prefix, strict, kind)
    replacements = []
    for name, module, layer, kept_bias in plan.layers:
        linear = plan.ckpt.linear(layer["prefix"])
        unit = linear.k_pad_unit
        stored = (linear.out_features, linear.in_features)
        want = (module.out_features, module.in_features)
        if not all(w == s or (unit > 0 and s - unit < w < s) for w, s in zip(want, stored)):
            raise Error(shape_error(kind, layer, stored, name, module))
        linear.detach()
        replacements.append((name, make_module(name, linear, module), kept_bias))
    return apply_plan(model, plan, replacements)


def _add_missing_bias(module, inputs, output):
    return output + module.missing_bias.to(output.dtype)
