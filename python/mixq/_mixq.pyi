# Type stubs of the nanobind extension `mixq._mixq` (re-exported by `mixq`).
# python/tests/test_stubs.py checks that these names match the module.
import os
from typing import Any, Literal, Optional, Protocol, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str  # project(mixq VERSION ...) in CMakeLists.txt

_Path = Union[str, os.PathLike[str]]
_Paths = Union[_Path, Sequence[_Path]]

class _DLPack(Protocol):
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...

# float32 (used in place when C-contiguous), float16, bfloat16 or float64,
# as a NumPy array or any CPU object with __dlpack__ (e.g. a torch.Tensor).
_Activation = Union[npt.NDArray[Any], _DLPack]

class Error(ValueError):
    """Every input mixq rejects: the message names the file, tensor or layer."""

class Checkpoint:
    """An opened checkpoint (memory-mapped; tensor data is read on use)."""

    @property
    def paths(self) -> list[str]: ...
    def inspect(self) -> dict[str, Any]:
        """The data of `mixq inspect --json`: files, layers, other_tensors, formats, warnings."""
    def plan(self, profile: str = "comfyui", tp: int = 1) -> dict[str, Any]:
        """The data of `mixq plan --json`; raises Error when the profile rejects it."""
    def linear(
        self,
        prefix: str,
        kernel: Literal["auto", "ref"] = "auto",
        *,
        tp_rank: int = 0,
        tp_size: int = 1,
        profile: str = "comfyui",
    ) -> Linear:
        """The runtime linear of one layer; with tp_size > 1, rank tp_rank's share of it."""
    def prefixes(self) -> list[str]:
        """The prefix of every linear layer, sorted."""

class Linear:
    """One layer's quantized linear, y = x·Wᵀ + b."""

    @property
    def prefix(self) -> str: ...
    @property
    def in_features(self) -> int: ...
    @property
    def out_features(self) -> int: ...
    @property
    def format(self) -> Optional[str]:
        """The marker's format name; None for an unquantized layer."""
    @property
    def params(self) -> dict[str, Any]:
        """The marker's parameters with the format's defaults applied."""
    @property
    def method(self) -> str:
        """The method that runs the layer, e.g. 'int8_convrot'."""
    @property
    def tp_rank(self) -> int: ...
    @property
    def tp_size(self) -> int: ...
    @property
    def parallel(self) -> Literal["column", "row", "replicated", "none"]:
        """How this rank's share was cut ('none' without tp)."""
    @property
    def kernel(self) -> str:
        """The kernel that runs it: 'ref', 'avx2', 'avx512_vnni', ..."""
    @property
    def k_pad_unit(self) -> int:
        """> 0 when in_features is a stored K padded to this unit (NVFP4 16, MXFP8 32)."""
    @property
    def in_place(self) -> bool:
        """True when forward reads the weight in place from the mapped file
        (INT8, ConvRot W4A4, NVFP4, FP8, MXFP8 on AVX2 / AVX-512); the file
        stays mapped while the Linear lives."""
    @property
    def stored_bytes(self) -> int:
        """Bytes of the layer's tensors as stored (this rank's share under tp):
        what an in_place Linear reads from the file."""
    def detach(self) -> None:
        """Releases the checkpoint (the prepared weights are the Linear's own;
        an in_place Linear keeps only its mapped file); dequantize() then
        raises mixq.Error."""
    def forward(
        self, x: _Activation, out: Optional[Any] = None
    ) -> Any:
        """y = x·Wᵀ + b for x [..., in_features]; float32 [..., out_features], or
        written into `out` (float32 or bfloat16, C-contiguous) and returned."""
    def _time_forward(
        self, x: _Activation, iterations: int, clock: Literal["wall", "thread"] = "wall"
    ) -> float:
        """Benchmark helper: seconds per C++ forward call, without Python."""
    def __call__(self, x: _Activation, out: Optional[Any] = None) -> Any: ...
    def dequantize(
        self, basis: Literal["original", "stored"] = "original"
    ) -> npt.NDArray[np.float32]:
        """The weight as float32 [out_features, in_features]."""

def _linear_from_tensors(
    prefix: str, marker: str, tensors: dict[str, tuple[str, list[int], Any]], kernel: str = "auto"
) -> Linear:
    """A Linear from tensors in memory: {role: (safetensors dtype, shape, 1-D uint8 bytes)}."""

def open(path: _Paths) -> Checkpoint:
    """Opens a .safetensors file, an index.json, a folder of shards, or a list of shards."""

def quantize(
    source: _Paths,
    out: _Path,
    *,
    rules: Optional[Sequence[str]] = None,
    recipe: Union[_Path, dict[str, Any], None] = None,
    markers: Literal["tensor", "header", "both"] = "tensor",
    shard_size: Union[int, str, None] = None,
) -> dict[str, Any]:
    """Quantizes a float checkpoint into a Comfy checkpoint, like `mixq quantize`."""

def save_file(
    path: _Path, tensors: dict[str, Union[npt.NDArray[Any], _DLPack]], metadata: dict[str, str] = ...
) -> None:
    """Writes {name: array} as one safetensors file, atomically."""

def set_num_threads(threads: int) -> None:
    """Threads used by every Linear; 0 = all cores."""

def num_threads() -> int: ...
