"""PyTorch modules over mixq's CPU kernels (``pip install mixq[torch]``).

:class:`Linear` runs one checkpoint layer as a ``torch.nn.Module``;
:func:`load_quantized` loads a Comfy checkpoint into any model (diffusers,
hand-written, ...) by replacing its ``nn.Linear`` modules::

    import torch, mixq.torch
    from diffusers import FluxTransformer2DModel

    with torch.device("meta"):            # no float weights are allocated
        model = FluxTransformer2DModel(**config)
    mixq.torch.load_quantized(model, "flux-mixed.safetensors")
    with torch.inference_mode():
        out = model(**inputs)

With ``load_quantized(..., tp_group=group)`` every rank of a
``torch.distributed`` group holds only its share of each layer
(:class:`ColumnParallelLinear`, :class:`RowParallelLinear`; docs/TP.md).

Inference only: a forward that would need a gradient raises ``mixq.Error``.
mixq's thread pool follows ``torch.get_num_threads()`` unless
``mixq.set_num_threads`` was called.
"""
from .linear import Linear
from .load import IncompatibleKeys, load_quantized, make_linear_module
from .tp import ColumnParallelLinear, RowParallelLinear

__all__ = ["ColumnParallelLinear", "IncompatibleKeys", "Linear", "RowParallelLinear", "load_quantized",
           "make_linear_module"]
