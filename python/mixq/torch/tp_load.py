"""load_quantized(..., tp_group=group): one rank's share of every layer
(docs/TP.md). The same three steps as without TP (load.py), so that a
rejected checkpoint, degree or group leaves the model as it was:

  1. plan: the split of every layer (mixq's plan at the group's size, or a
     `mixq shard` index of the same size), the checkpoint matched to the
     model, and the layer pairs that keep activations sharded (tp_plan.wire);
  2. build: every layer's share on this rank (Checkpoint.linear with tp_rank /
     tp_size: only the rank's bytes are read or copied, never the whole
     layer; or the layer of this rank's file) as a mixq.torch.Linear inside a
     Column- or RowParallelLinear;
  3. apply: swap the modules, set the attentions' local head counts and
     output gathers, assign the replicated tensors.
"""
from __future__ import annotations

from typing import Optional

import torch

import mixq as _pkg
from .._mixq import Error
from .linear import Linear
from .load import IncompatibleKeys, _checkpoint, apply_plan, check_strict, plan_load, shape_error
from .tp import ColumnParallelLinear, RowParallelLinear, gather_output_hook, tp_layout
from .tp_plan import Role, read_shard_index, shard_index_path, wire

KIND = "load_quantized"


def _fits(want, stored, unit: int) -> bool:
    return all(w == s or (unit > 0 and s - unit < w < s) for w, s in zip(want, stored))


def _column_bias(bias: torch.Tensor, rank: int, size: int, parts: int) -> torch.Tensor:
    rows = bias.shape[0] // parts // size
    return torch.cat([p[rank * rows:(rank + 1) * rows] for p in bias.chunk(parts)])


def _row_biases_of_rank0(plan, index, roles):
    """A `mixq shard` rank file > 0 has no bias for row-parallel layers: rank 0
    holds it and adds it once. Where rank 0's file has one, the module's bias
    is covered here (not missing, not kept); where it has none, the module's
    own bias is kept on every rank, as on rank 0."""
    from safetensors import safe_open

    try:
        with safe_open(str(index.rank0_file), framework="pt") as handle:
            rank0 = set(handle.keys())
    except Exception as e:
        raise Error(f"{KIND}: {index.rank0_file}: cannot read its header: {e}") from None
    for i, (name, module, layer, kept_bias) in enumerate(plan.layers):
        if roles.get(layer["prefix"], Role("column", 1)).parallel != "row" or f"{layer['prefix']}.bias" not in rank0:
            continue
        plan.layers[i] = (name, module, layer, None)
        plan.missing = [k for k in plan.missing if k != f"{name}.bias"]


def load_tp(model: torch.nn.Module, checkpoint, prefix: str, strict: bool, tp_group,
            profile: str) -> IncompatibleKeys:
    tp = tp_layout(tp_group)
    index_path = shard_index_path(checkpoint)
    shapes = None
    if index_path is not None:
        index = read_shard_index(index_path, tp.rank, tp.size)
        source, roles, shapes, profile = str(index.rank_file), index.roles, index.shapes, index.profile
    else:
        source = _checkpoint(checkpoint)
        try:
            report = source.plan(profile=profile, tp=tp.size)
        except Error as e:
            raise Error(f"{KIND}: tp_group of {tp.size} rank(s), profile {profile}: {e}") from None
        roles = {layer["prefix"]: Role(layer["parallel"], layer["parts"]) for layer in report["layers"]}
    plan = plan_load(model, source, prefix, False, KIND, shapes=shapes)
    if index_path is not None and tp.rank > 0:
        _row_biases_of_rank0(plan, index, roles)
    if strict:
        check_strict(plan, KIND)
    missing = [layer["prefix"] for _, _, layer, _ in plan.layers if layer["prefix"] not in roles]
    if missing:
        raise Error(f"{KIND}: layer '{missing[0]}' has no tensor-parallel split in the plan or shard index")
    by_name = {name: roles[layer["prefix"]] for name, _, layer, _ in plan.layers}
    wiring = wire(model, by_name, tp.size)

    replacements = []
    for name, module, layer, kept_bias in plan.layers:
        role = roles[layer["prefix"]]
        split = role.parallel if tp.size > 1 else "replicated"
        if split not in ("column", "row", "replicated"):
            raise Error(f"{KIND}: layer '{layer['prefix']}' has an unknown split {role.parallel!r}")
        out_f, in_f = module.out_features, module.in_features
        if split == "column":
            if out_f % (tp.size * role.parts):
                raise Error(f"{KIND}: layer '{layer['prefix']}': {out_f} output features in {role.parts} part(s) "
                            f"do not split over {tp.size} ranks")
            out_f //= tp.size
        elif split == "row":
            if in_f % tp.size:
                raise Error(f"{KIND}: layer '{layer['prefix']}': {in_f} input features do not split over "
                            f"{tp.size} ranks")
            in_f //= tp.size
        if index_path is not None or split == "replicated":
            linear = plan.ckpt.linear(layer["prefix"])  # a rank file holds the share already
        else:
            linear = plan.ckpt.linear(layer["prefix"], tp_rank=tp.rank, tp_size=tp.size, profile=profile)
        stored = (linear.out_features, linear.in_features)
        if not _fits((out_f, in_f), stored, linear.k_pad_unit):
            raise Error(shape_error(KIND, layer, stored, name, module) + f" (rank {tp.rank} of {tp.size})")
        linear.detach()
        local = Linear(linear, in_f, out_f)
        if split == "column":
            bias = None if kept_bias is None else _column_bias(kept_bias, tp.rank, tp.size, role.parts)
            replacements.append((name, ColumnParallelLinear(local, tp, role.parts, name not in wiring.sharded_out,
                                                            bias), None))
        elif split == "row":
            replacements.append((name, RowParallelLinear(local, tp, name in wiring.sharded_in, kept_bias), None))
        else:
            replacements.append((name, local, kept_bias))

    keys = apply_plan(model, plan, replacements)
    if tp.size > 1:
        for name, heads, gather in wiring.attention:
            attention = model.get_submodule(name)
            attention.heads = heads
            if gather:
                attention.register_forward_hook(gather_output_hook(tp))
    return keys
