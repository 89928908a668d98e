"""Tensor-parallel modules over a torch.distributed process group (docs/TP.md).

Each module holds one rank's share of a checkpoint layer (a
:class:`mixq.torch.Linear` built from ``Checkpoint.linear(prefix, tp_rank=,
tp_size=)`` or from a ``mixq shard`` rank file) and does the layer's
communication, as SGLang's ``ColumnParallelLinear`` / ``RowParallelLinear``
do:

* :class:`ColumnParallelLinear` computes its rows of every output part; with
  ``gather_output`` it all-gathers the ranks' rows and puts every part back
  together (the next layer needs the full width), otherwise it returns the
  rank's rows (the next layer is row-parallel, or attention runs on the
  rank's heads).
* :class:`RowParallelLinear` computes the partial product of its band of
  input features (``input_is_parallel``: the input is already that band,
  else it takes the band of a full-width input) and all-reduces the sum in
  float32. The bias is on rank 0 only (the shard rule), so it is added once.

Collectives use ``torch.distributed.all_gather`` and ``all_reduce`` on the
group (gloo on CPUs).
"""
from __future__ import annotations

import sys
import warnings
import weakref
from typing import Optional

import torch

from .._mixq import Error
from .linear import Linear


class TpLayout:
    """This process's rank in a tensor-parallel group of ``size`` ranks.

    The group is held by a weak reference: a model outlives
    ``destroy_process_group()`` (it is freed at interpreter exit), and a
    gloo ``ProcessGroup`` whose last reference goes only then aborts the
    process there ("terminate called without an active exception", about one
    exit in five with torch 2.15), after all the work is done. Held weakly, the
    group goes when torch lets it go; a layer called after that says so."""

    def __init__(self, group, rank: int, size: int):
        self.rank, self.size = rank, size
        try:
            self._group = weakref.ref(group)
        except TypeError:  # an object without weak references: hold it
            self._group = lambda: group

    @property
    def group(self):
        group = self._group()
        if group is None:
            raise Error(f"tensor-parallel layer ({self}): its process group was destroyed "
                        "(torch.distributed.destroy_process_group()); load the model again in a new group")
        return group

    def __repr__(self) -> str:
        return f"rank {self.rank} of {self.size}"


def tp_layout(group) -> TpLayout:
    """Rank and size of a process group (``ProcessGroup.rank()`` / ``.size()``);
    refuses a rank outside the group."""
    try:
        rank, size = int(group.rank()), int(group.size())
    except (AttributeError, TypeError, ValueError, RuntimeError) as e:
        raise Error(f"load_quantized: tp_group must be a torch.distributed process group "
                    f"(with rank() and size()), got {type(group).__name__}: {e}") from None
    if size < 1:
        raise Error(f"load_quantized: tp_group has {size} rank(s); a tensor-parallel degree must be >= 1")
    if not 0 <= rank < size:
        raise Error(f"load_quantized: tp_group rank {rank} is out of range for tensor-parallel degree {size} "
                    f"(ranks 0..{size - 1})")
    if held_by_torch_defaults(group):
        warnings.warn("load_quantized: torch.distributed.nn.functional was imported after init_process_group() "
                      "(diffusers and torch._dynamo import it), and its functions' defaults (group=group.WORLD) "
                      "hold this process group: it outlives destroy_process_group(), and a gloo group alive at "
                      "interpreter exit can abort the process there. Import diffusers (or torch._dynamo) before "
                      "init_process_group() (docs/TP.md, \"The group's lifetime\").", RuntimeWarning, stacklevel=4)
    return TpLayout(group, rank, size)


def held_by_torch_defaults(group) -> bool:
    """Whether a function of torch.distributed.nn.functional holds ``group``
    as a default argument: its defaults (``group=group.WORLD``) are evaluated
    when the module is imported, so an import after init_process_group()
    pins the default group for the life of the interpreter."""
    module = sys.modules.get("torch.distributed.nn.functional")
    functions = vars(module).values() if module is not None else ()
    return any(d is group for f in functions for d in (getattr(f, "__defaults__", None) or ()))


def all_gather_last(y: torch.Tensor, tp: TpLayout, parts: int = 1) -> torch.Tensor:
    """The ranks' column shards [..., parts x rows] put back as [..., parts x
    (size x rows)]: every part's rows in rank order, parts in order."""
    import torch.distributed as dist

    y = y.contiguous()
    chunks = [torch.empty_like(y) for _ in range(tp.size)]
    dist.all_gather(chunks, y, group=tp.group)
    if parts == 1:
        return torch.cat(chunks, dim=-1)
    split = [c.chunk(parts, dim=-1) for c in chunks]
    return torch.cat([split[r][p] for p in range(parts) for r in range(tp.size)], dim=-1)


def all_reduce_sum(y: torch.Tensor, tp: TpLayout) -> torch.Tensor:
    import torch.distributed as dist

    y = y.contiguous()
    dist.all_reduce(y, op=dist.ReduceOp.SUM, group=tp.group)
    return y


class _Parallel(torch.nn.Module):
    def __init__(self, local: Linear, tp: TpLayout, extra_bias: Optional[torch.Tensor]):
        super().__init__()
        self.local = local
        self.tp = tp
        if extra_bias is not None:
            # A layer stored without a bias whose module had one keeps it (as
            # load_quantized does without TP); this rank's share of it.
            self.register_buffer("missing_bias", extra_bias.detach().to(torch.float32).clone())
        else:
            self.missing_bias = None

    @property
    def prefix(self) -> str:
        return self.local.prefix

    @property
    def format(self) -> Optional[str]:
        return self.local.format

    @property
    def method(self) -> str:
        return self.local.method

    @property
    def kernel(self) -> str:
        return self.local.kernel


class ColumnParallelLinear(_Parallel):
    """Output rows of every part split over the ranks (``parts`` > 1: a fused
    layer, e.g. [gate; up]). ``in_features`` / ``out_features`` are the whole
    layer's; ``local.out_features`` is this rank's share."""

    def __init__(self, local: Linear, tp: TpLayout, parts: int, gather_output: bool,
                 extra_bias: Optional[torch.Tensor] = None):
        super().__init__(local, tp, extra_bias)
        self.parts = parts
        self.gather_output = gather_output
        self.in_features = local.in_features
        self.out_features = local.out_features * tp.size

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, tp={self.tp}, "
                f"parts={self.parts}, gather_output={self.gather_output}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.local(x)
        if self.missing_bias is not None:
            y = y + self.missing_bias.to(y.dtype)
        return all_gather_last(y, self.tp, self.parts) if self.gather_output else y


class RowParallelLinear(_Parallel):
    """Input features split over the ranks; the partial products are summed
    over the group (float32). ``in_features`` is the whole layer's;
    ``local.in_features`` this rank's band."""

    def __init__(self, local: Linear, tp: TpLayout, input_is_parallel: bool,
                 extra_bias: Optional[torch.Tensor] = None):
        super().__init__(local, tp, extra_bias)
        self.input_is_parallel = input_is_parallel
        self.in_features = local.in_features * tp.size
        self.out_features = local.out_features

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, tp={self.tp}, "
                f"input_is_parallel={self.input_is_parallel}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        band = self.local.in_features
        if not self.input_is_parallel:
            if x.dim() == 0 or x.shape[-1] != self.in_features:
                raise Error(f"layer '{self.prefix}': input shape {list(x.shape)} does not end in "
                            f"in_features = {self.in_features}")
            x = x[..., self.tp.rank * band:(self.tp.rank + 1) * band]
        dtype = x.dtype
        y = all_reduce_sum(self.local(x if dtype == torch.float32 else x.float()), self.tp)
        if self.missing_bias is not None:
            y = y + self.missing_bias
        return y if dtype == torch.float32 else y.to(dtype)


def gather_output_hook(tp: TpLayout):
    """A forward hook that all-gathers a module's (tensor) output along the
    last dimension: an attention without an output projection whose heads are
    split over the ranks."""

    def hook(module, inputs, output):
        if not isinstance(output, torch.Tensor):
            raise Error(f"{type(module).__name__}: tensor-parallel attention output must be one tensor, "
                        f"got {type(output).__name__}")
        return all_gather_last(output, tp)

    return hook
