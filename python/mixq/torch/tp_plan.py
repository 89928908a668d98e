"""What load_quantized(tp_group=) needs to know before it builds anything
(docs/TP.md):

* each checkpoint layer's split (column with its fused parts, row, or
  replicated): from mixq's plan (``Checkpoint.plan(profile, tp)``, the answer
  of ``mixq plan --tp N``) or from the index of a ``mixq shard`` folder, which
  recorded the same answer;
* which column layers keep their output sharded because their consumer takes
  a sharded input (wire()): the layer pairs of the model, as SGLang's models
  declare them with gather_output / input_is_parallel. Every other column
  layer all-gathers its output and every other row layer takes its band of a
  full-width input, which is correct for any model, only slower.
"""
from __future__ import annotations

import json
import os
import pathlib
from collections import namedtuple
from typing import Dict, Optional, Set

import torch

import mixq as _pkg
from .._mixq import Error

# parallel: "column", "row" or "replicated"; parts: fused parts of a column layer.
Role = namedtuple("Role", ["parallel", "parts"])

SHARD_INDEX = "mixq-shard.json"

# diffusers activations that follow a FeedForward's input projection: the
# element-wise ones keep a one-part column shard local; the gated ones split
# the projection into [value; gate] and need two parts.
_ONE_PART = {"GELU", "ApproximateGELU", "LinearActivation"}
_TWO_PARTS = {"GEGLU", "SwiGLU"}
_QKV = ("to_q", "to_k", "to_v")
_ADDED_QKV = ("add_q_proj", "add_k_proj", "add_v_proj")


def _join(name: str, child: str) -> str:
    return f"{name}.{child}" if name else child


class Wiring:
    """sharded_out: column layers whose output stays sharded; sharded_in: row
    layers whose input arrives sharded; attention: [(module name, local heads,
    gather its output)] for attention run on this rank's heads."""

    def __init__(self):
        self.sharded_out: Set[str] = set()
        self.sharded_in: Set[str] = set()
        self.attention = []


def wire(model: torch.nn.Module, roles: Dict[str, Role], size: int) -> Wiring:
    """The pairs of `model` (module names -> Role of the checkpoint layers it
    holds) that keep activations sharded between them:

    * attention (to_q / to_k / to_v, and add_*_proj when the module has added
      projections) column-parallel in one part: the rank runs its heads
      (heads / size, whole heads or mixq.Error); to_out.0 and to_add_out,
      when present, must be row-parallel and take the rank's heads as their
      band; an attention without them (FLUX single blocks) all-gathers its
      output;
    * a diffusers FeedForward whose net.0.proj is column-parallel in the
      activation's number of parts and whose output linear is row-parallel.
    """
    wiring = Wiring()
    for name, module in model.named_modules():
        if all(hasattr(module, p) for p in _QKV) and hasattr(module, "heads"):
            _wire_attention(wiring, name, module, roles, size)
        net = getattr(module, "net", None)
        if isinstance(net, torch.nn.ModuleList) and len(net) >= 2 and hasattr(net[0], "proj"):
            kind = type(net[0]).__name__
            parts = 1 if kind in _ONE_PART else 2 if kind in _TWO_PARTS else None
            last = max((i for i, m in enumerate(net) if _is_linear(m)), default=None)
            if parts is None or last is None:
                continue
            producer, consumer = _join(name, "net.0.proj"), _join(name, f"net.{last}")
            if roles.get(producer) == Role("column", parts) and _parallel(roles, consumer) == "row":
                wiring.sharded_out.add(producer)
                wiring.sharded_in.add(consumer)
    return wiring


def _is_linear(module) -> bool:
    return hasattr(module, "in_features") and hasattr(module, "out_features")


def _parallel(roles: Dict[str, Role], name: str) -> Optional[str]:
    role = roles.get(name)
    return role.parallel if role else None


def _wire_attention(wiring: Wiring, name: str, module, roles: Dict[str, Role], size: int):
    producers = [_join(name, p) for p in _QKV]
    added = getattr(module, "added_kv_proj_dim", None) is not None and all(hasattr(module, p) for p in _ADDED_QKV)
    if added:
        producers += [_join(name, p) for p in _ADDED_QKV]
    outputs = []
    if getattr(module, "to_out", None) is not None:
        outputs.append(_join(name, "to_out.0"))
    if added and getattr(module, "to_add_out", None) is not None:
        outputs.append(_join(name, "to_add_out"))
    if not all(roles.get(p) == Role("column", 1) for p in producers):
        return  # not every projection is a column layer of the checkpoint: generic handling
    if not all(_parallel(roles, o) == "row" for o in outputs):
        return  # the output projection needs every head: q, k, v are gathered
    heads = int(module.heads)
    if heads % size:
        raise Error(f"load_quantized: attention '{name}' has {heads} heads, which do not split over {size} ranks "
                    "(each rank runs whole heads)")
    wiring.sharded_out.update(producers)
    wiring.sharded_in.update(outputs)
    wiring.attention.append((name, heads // size, not outputs))


class ShardIndex:
    """A `mixq shard` folder's index, checked against this rank: rank_file is
    this rank's checkpoint, roles and shapes (whole-layer [out, in]) are by
    checkpoint prefix."""

    def __init__(self, path: pathlib.Path, rank_file: pathlib.Path, degree: int, profile: str,
                 roles: Dict[str, Role], shapes: Dict[str, tuple]):
        self.path, self.rank_file, self.degree, self.profile = path, rank_file, degree, profile
        self.roles, self.shapes = roles, shapes


def shard_index_path(checkpoint) -> Optional[pathlib.Path]:
    """The mixq-shard.json of a `mixq shard` folder (the folder or the index
    itself), or None."""
    if isinstance(checkpoint, _pkg.Checkpoint):
        paths = checkpoint.paths
        if len(paths) != 1:
            return None
        checkpoint = paths[0]
    if not isinstance(checkpoint, (str, os.PathLike)):
        return None
    path = pathlib.Path(checkpoint)
    if path.is_dir() and (path / SHARD_INDEX).is_file():
        return path / SHARD_INDEX
    if path.name == SHARD_INDEX and path.is_file():
        return path
    return None


def read_shard_index(path: pathlib.Path, rank: int, size: int) -> ShardIndex:
    where = f"load_quantized: {path}"
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(index, dict) or index.get("format") != "mixq-shard":
            raise ValueError("not a mixq-shard index")
        degree = index["degree"]
        if not isinstance(degree, int) or isinstance(degree, bool) or degree < 1:
            raise ValueError(f"degree {degree!r} is not a positive integer")
        profile = str(index.get("profile", "comfyui"))
        ranks = {int(r["rank"]): str(r["file"]) for r in index["ranks"]}
        roles, shapes = {}, {}
        for layer in index["layers"]:
            prefix = str(layer["prefix"])
            roles[prefix] = Role(str(layer["parallel"]), int(layer["parts"]))
            shapes[prefix] = (int(layer["out_features"]), int(layer["in_features"]))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
        raise Error(f"{where}: cannot read the shard index: {e}") from None
    if degree != size:
        raise Error(f"{where} splits the checkpoint over {degree} rank(s) but tp_group has {size}")
    name = ranks.get(rank)
    if name is None:
        raise Error(f"{where} lists no file for rank {rank}")
    if pathlib.PurePath(name).name != name or name in ("", ".", ".."):
        raise Error(f"{where}: rank {rank}'s file {name!r} is not a file name inside the folder")
    rank_file = path.parent / name
    if not rank_file.is_file():
        raise Error(f"{where}: rank {rank}'s file {rank_file} does not exist")
    _check_rank_metadata(rank_file, rank, degree)
    index = ShardIndex(path, rank_file, degree, profile, roles, shapes)
    first = ranks.get(0, "")
    if pathlib.PurePath(first).name != first or first in ("", ".", ".."):
        raise Error(f"{where}: rank 0's file {first!r} is not a file name inside the folder")
    index.rank0_file = path.parent / first  # holds the row-parallel layers' biases
    return index


def _check_rank_metadata(rank_file: pathlib.Path, rank: int, degree: int):
    """The rank file's own header says which share it is (mixq_tp)."""
    from safetensors import safe_open

    try:
        with safe_open(str(rank_file), framework="pt") as handle:
            meta = (handle.metadata() or {}).get("mixq_tp")
        said = json.loads(meta) if meta else None
    except Exception as e:  # a damaged file: mixq.open reports it precisely later
        raise Error(f"load_quantized: {rank_file}: cannot read its header: {e}") from None
    if not isinstance(said, dict) or (said.get("rank"), said.get("degree")) != (rank, degree):
        raise Error(f"load_quantized: {rank_file} is not rank {rank} of {degree} "
                    f"(its header's mixq_tp says {meta!r})")
