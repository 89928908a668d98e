"""Packed mixq Linears cached per weight tensor.

comfy-kitchen hands a backend the raw weight tensors on every call. Packing
them for mixq's kernels is far more expensive than a forward, so each packed
Linear is kept, keyed by the weight (``qdata``) tensor object, and checked on
every use against a signature of all the tensors it was built from:

  * identity: a weak reference to each tensor, which must still resolve to
    the very object passed now (a freed tensor's id or address reused by a
    new tensor never matches);
  * ``data_ptr()``: the storage was not swapped (``tensor.data = ...``);
  * ``_version``: the tensor was not modified in place (``copy_``, LoRA
    patching, ...). Inference tensors (made under ``torch.inference_mode``)
    have no version counter: an in-place change to one inside inference mode
    is not seen.

A weak-reference callback drops the entry when its weight is freed, so the
cache never keeps a model's weights (or their packed copies) alive.
"""
from __future__ import annotations

import threading
import weakref
from typing import Callable, Sequence

import torch


def _version(t: torch.Tensor) -> int:
    try:
        return t._version
    except RuntimeError:  # inference tensors keep no version counter
        return -1


def _signature(tensors: Sequence[torch.Tensor]) -> tuple:
    return tuple((t.data_ptr(), _version(t)) for t in tensors)


class _Entry:
    __slots__ = ("refs", "signature", "value")

    def __init__(self, refs, signature, value):
        self.refs = refs
        self.signature = signature
        self.value = value


class WeightCache:
    def __init__(self):
        self._entries: dict[int, _Entry] = {}
        self._lock = threading.Lock()
        self.builds = 0  # how many Linears were packed (tests read it)

    def __len__(self) -> int:
        return len(self._entries)

    def holds(self, weight: torch.Tensor) -> bool:
        """Whether a Linear built from this weight tensor is cached."""
        with self._lock:
            entry = self._entries.get(id(weight))
            return entry is not None and entry.refs[0]() is weight

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _drop(self, key: int, ref: weakref.ref) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.refs[0] is ref:
                del self._entries[key]

    def get(self, tensors: Sequence[torch.Tensor], build: Callable[[], object], extra: tuple = ()):
        """The value built from `tensors` (weight first) and the call's other
        parameters `extra`, building it when the cache has none for them or
        theirs is stale."""
        key = id(tensors[0])
        signature = (_signature(tensors), extra)
        with self._lock:
            entry = self._entries.get(key)
            if (entry is not None and entry.signature == signature and len(entry.refs) == len(tensors)
                    and all(r() is t for r, t in zip(entry.refs, tensors))):
                return entry.value
        value = build()
        refs = [weakref.ref(tensors[0], lambda r, key=key: self._drop(key, r))]
        refs += [weakref.ref(t) for t in tensors[1:]]
        with self._lock:
            self._entries[key] = _Entry(refs, signature, value)
            self.builds += 1
        return value
