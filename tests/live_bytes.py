"""Peak bytes of tensor storage alive while a region runs, measured in PyTorch on CPU.

A TorchDispatchMode sees every op's outputs: a storage that no input of the op shares is new and
counts until it is freed (a weakref finalizer). Views and in-place results share an input's
storage and do not count. This is what a caching allocator would have to hold allocated, without
its rounding and caching: what the exact terms and the framework terms are compared with.
"""

from __future__ import annotations

import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveBytes(TorchDispatchMode):
    """``with LiveBytes() as live: ...`` then ``live.peak`` (bytes allocated inside the region at most)."""

    def __init__(self):
        super().__init__()
        self.live = 0
        self.peak = 0
        self._sizes: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        inputs = {t.untyped_storage().data_ptr() for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if isinstance(tensor, torch.Tensor):
                self._count(tensor.untyped_storage(), inputs)
        return out

    def _count(self, storage, inputs) -> None:
        key, size = storage.data_ptr(), storage.nbytes()
        if key in inputs or key in self._sizes or size == 0:
            return
        self._sizes[key] = size
        self.live += size
        self.peak = max(self.peak, self.live)
        weakref.finalize(storage, self._freed, key)

    def _freed(self, key: int) -> None:
        self.live -= self._sizes.pop(key, 0)
