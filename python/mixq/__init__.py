"""mixq: load, plan and run mixed-precision quantized diffusion checkpoints.

Checkpoints follow the "Comfy" convention: each linear layer's quantization
format is declared by a ``<prefix>.comfy_quant`` marker (or in the header's
``_quantization_metadata``), and every layer may use a different format.

>>> import mixq, numpy as np
>>> ckpt = mixq.open("model.safetensors")         # headers only
>>> ckpt.inspect()["formats"]                      # same data as `mixq inspect --json`
>>> layer = ckpt.linear("blocks.0.mlp.fc1")
>>> y = layer.forward(np.ones((4, layer.in_features), np.float32))

Every rejection raises :class:`mixq.Error` (a ``ValueError``) with the message
the ``mixq`` command prints. ``mixq.torch`` (PyTorch modules, ``load_quantized``)
and ``mixq.comfy_kitchen`` (a comfy-kitchen backend) need the ``[torch]`` extra
and are imported on their own.
"""
from ._mixq import (
    Checkpoint,
    Error,
    Linear,
    num_threads,
    open,
    quantize,
    save_file,
    __version__,
)
from ._threads import set_num_threads

__all__ = [
    "Checkpoint",
    "Error",
    "Linear",
    "num_threads",
    "open",
    "quantize",
    "save_file",
    "set_num_threads",
]
