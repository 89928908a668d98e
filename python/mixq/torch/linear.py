"""mixq.torch.Linear: one checkpoint layer as a torch.nn.Module."""
from __future__ import annotations

from typing import Optional

import torch

from .. import _mixq, _threads
from .._mixq import Error

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class Linear(torch.nn.Module):
    """One checkpoint layer (any format mixq runs, or unquantized) as a module.

    ``forward(x)`` takes a CPU tensor of float32, bfloat16 or float16 with any
    leading dimensions and returns ``x @ W.T + b`` in x's dtype, computed with
    the format's own arithmetic and float32 accumulation, like ``nn.Linear``
    running in that compute dtype. Contiguous float32 input is read in place.

    ``in_features`` / ``out_features`` are the model's (logical) sizes; a
    layer whose stored K or N is padded (NVFP4 to 16, MXFP8 to 32) pads the
    input with zeros and drops the padded outputs.
    """

    def __init__(self, linear: _mixq.Linear, in_features: Optional[int] = None,
                 out_features: Optional[int] = None):
        super().__init__()
        if not isinstance(linear, _mixq.Linear):
            raise Error(f"mixq.torch.Linear needs a mixq.Linear (from Checkpoint.linear), got {type(linear).__name__}")
        stored_in, stored_out = linear.in_features, linear.out_features
        in_features = stored_in if in_features is None else int(in_features)
        out_features = stored_out if out_features is None else int(out_features)
        unit = linear.k_pad_unit
        for what, logical, stored in (("in_features", in_features, stored_in),
                                      ("out_features", out_features, stored_out)):
            if logical == stored:
                continue
            if not (unit > 0 and stored - unit < logical < stored):
                raise Error(f"layer '{linear.prefix}': {what} {logical} does not fit the stored "
                            f"{stored}" + (f" (padded to a multiple of {unit})" if unit else ""))
        self._linear = linear
        self.in_features = in_features
        self.out_features = out_features
        # The module's sizes are the stored ones (no padding of x or y): the
        # short path of forward.
        self._stored_sizes = in_features == stored_in and out_features == stored_out

    @property
    def prefix(self) -> str:
        return self._linear.prefix

    @property
    def format(self) -> Optional[str]:
        """The marker's format name; None for an unquantized layer."""
        return self._linear.format

    @property
    def method(self) -> str:
        return self._linear.method

    @property
    def kernel(self) -> str:
        return self._linear.kernel

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"format={self.format or 'unquantized'}, method={self.method}, kernel={self.kernel}")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Runs for every layer of a model, every step. The common call (a
        # float32 CPU tensor without grad, stored sizes = the module's) takes
        # the short path: the binding checks the shape itself (its error names
        # the layer) and reads the NumPy view in place; torch.from_numpy
        # shares the result. Everything else goes through _forward_checked.
        if (type(x) is torch.Tensor and x.dtype is torch.float32 and x.is_cpu and not x.requires_grad
                and self._stored_sizes):
            _threads.follow_torch(torch.get_num_threads)
            return torch.from_numpy(self._linear.forward(x.numpy()))
        return self._forward_checked(x)

    def _forward_checked(self, x: torch.Tensor) -> torch.Tensor:
        # The messages are built only on error.
        if not isinstance(x, torch.Tensor):
            raise Error(f"{self._where()}: input must be a torch.Tensor, got {type(x).__name__}")
        if not x.is_cpu:
            raise Error(f"{self._where()}: input is on {x.device}; mixq runs on the CPU (move it with .cpu())")
        if x.dtype not in _FLOAT_DTYPES:
            raise Error(f"{self._where()}: input dtype {x.dtype} is not float32, bfloat16 or float16")
        if x.requires_grad:
            if torch.is_grad_enabled():
                raise Error(f"{self._where()}: mixq.torch.Linear is inference only and has no gradient; "
                            "run under torch.no_grad() or torch.inference_mode(), or detach the input")
            x = x.detach()
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise Error(f"{self._where()}: input shape {list(x.shape)} does not end in "
                        f"in_features = {self.in_features}")
        _threads.follow_torch(torch.get_num_threads)
        dtype = x.dtype
        stored_in, stored_out = self._linear.in_features, self._linear.out_features
        if stored_in != self.in_features:
            x = torch.nn.functional.pad(x, (0, stored_in - self.in_features))
        # float32 input crosses as a NumPy view, bfloat16 / float16 through
        # DLPack (converted in the binding). bfloat16 comes back as bfloat16:
        # the binding rounds its float32 result into `out` as Tensor.to does,
        # through per-thread buffers kept between calls (a fresh float32
        # output, then a conversion, cost a page fault per 4 KiB every call).
        if dtype == torch.bfloat16:
            y = torch.empty(*x.shape[:-1], stored_out, dtype=dtype)
            self._linear.forward(x, out=y)
        else:
            y = torch.from_numpy(self._linear.forward(x.numpy() if dtype == torch.float32 else x))
        if stored_out != self.out_features:
            y = y[..., : self.out_features].contiguous()
        return y if y.dtype == dtype else y.to(dtype)

    def _where(self) -> str:
        return f"layer '{self._linear.prefix}'"
