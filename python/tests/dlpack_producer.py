"""Minimal DLPack producers (ctypes), standing in for torch tensors in the
tests: DLPackArray exports bfloat16 / float16 / float32 data with any strides
through __dlpack__ only (no buffer protocol, no NumPy type); OwningDLPack
hands out buffers that its capsule owns and its deleter frees."""
import ctypes

import numpy as np


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _Device),
        ("ndim", ctypes.c_int32),
        ("dtype", _DType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

FLOAT, BFLOAT = 2, 4


def bf16_round(values):
    """float32 values rounded to the nearest bfloat16 (ties to even), as float32."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return (rounded.astype(np.uint32) << 16).view(np.float32)


class DLPackArray:
    """Exports `storage` (a NumPy array whose bytes hold the elements) as a
    DLPack tensor of the given dtype, shape and element strides. Keep this
    object alive while a consumer uses the data."""

    def __init__(self, storage, code, bits, shape, strides=None):
        self._storage = storage
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        if strides is None:
            strides, step = [], 1
            for extent in reversed(shape):
                strides.insert(0, step)
                step *= extent
        self._strides = (ctypes.c_int64 * len(shape))(*strides)
        self._managed = _Managed()
        t = self._managed.dl_tensor
        t.data = storage.ctypes.data
        t.device = _Device(1, 0)  # kDLCPU
        t.ndim = len(shape)
        t.dtype = _DType(code, bits, 1)
        t.shape = self._shape
        t.strides = self._strides
        t.byte_offset = 0

    @classmethod
    def bfloat16(cls, values):
        """bfloat16 copy of float32 `values` (C order)."""
        values = np.ascontiguousarray(values, np.float32)
        bits = (bf16_round(values).view(np.uint32) >> 16).astype(np.uint16)
        return cls(bits, BFLOAT, 16, values.shape)

    @classmethod
    def view_of(cls, array):
        """The same memory as a NumPy float array, exported through DLPack only."""
        item = array.dtype.itemsize
        strides = [s // item for s in array.strides]
        return cls(array, FLOAT, item * 8, array.shape, strides)

    def __dlpack__(self, *args, **kwargs):
        return _capsule_new(ctypes.addressof(self._managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                       ctypes.c_long]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_PROT_NONE, _PROT_READ_WRITE = 0, 3
_MAP_PRIVATE_ANONYMOUS = 0x22
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class OwningDLPack:
    """A producer whose DLPack capsule owns its buffer, as the DLPack contract
    allows: each __dlpack__ call maps a fresh float32 buffer (a copy of
    `values`), and the managed tensor's deleter, which the consumer calls when
    it is done, frees it. Here "frees" means: copy the buffer into `released`
    (what the consumer left there), then make its pages inaccessible
    (mprotect PROT_NONE; never unmapped, so no later allocation can reuse the
    address). A consumer that reads or writes the buffer after calling the
    deleter therefore dies of SIGSEGV instead of corrupting memory silently."""

    def __init__(self, values):
        self._values = np.ascontiguousarray(values, np.float32)
        self.deleted = 0         # deleter calls
        self.released = []       # the buffer's contents at each deleter call
        self._exports = []       # keeps each export's ctypes memory alive

    def __dlpack__(self, *args, **kwargs):
        values = self._values
        size = max(values.nbytes, 1)
        address = _libc.mmap(None, size, _PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, -1, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        ctypes.memmove(address, values.ctypes.data, values.nbytes)
        shape = (ctypes.c_int64 * values.ndim)(*values.shape)
        strides = (ctypes.c_int64 * values.ndim)(*[s // 4 for s in values.strides])
        managed = _Managed()

        def deleter(_):
            self.released.append(np.frombuffer(ctypes.string_at(address, values.nbytes), np.float32)
                                 .reshape(values.shape).copy())
            self.deleted += 1
            if _libc.mprotect(address, size, _PROT_NONE) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")

        callback = _DELETER(deleter)
        t = managed.dl_tensor
        t.data = address
        t.device = _Device(1, 0)  # kDLCPU
        t.ndim = values.ndim
        t.dtype = _DType(FLOAT, 32, 1)
        t.shape = shape
        t.strides = strides
        t.byte_offset = 0
        managed.deleter = ctypes.cast(callback, ctypes.c_void_p)
        self._exports.append((managed, shape, strides, callback))
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)
