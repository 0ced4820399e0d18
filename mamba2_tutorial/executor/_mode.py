"""``CpuMode``: cuTile's dispatch hook, routed to the CPU implementations.

Every cuTile stub (``ct.load``, ``ct.exp``, the ``ct.Tile`` operators, ``Array.slice``, ...) calls
``DispatchMode.get_current().call_tile_function_from_host(func, args, kwargs)``. While a kernel runs on the
CPU, the current mode is a ``CpuMode``: it looks ``func`` up by its qualified name in ``HANDLERS`` and calls
the NumPy implementation. User ``@ct.function`` helpers arrive here too; they run as Python (a patched copy of
the undecorated function). Anything unknown raises ``NotImplementedError`` naming the operation.
"""

from __future__ import annotations

from cuda.tile._dispatch_mode import DispatchMode
from cuda.tile._execution import is_function_wrapper, is_stub

from . import _ops  # noqa: F401  (registers the implementations)
from ._registry import HANDLERS, unsupported

__all__ = ["CpuMode", "KNOWN_UNSUPPORTED"]

# cuTile operations the CPU executor deliberately does not implement (calling one raises NotImplementedError
# naming it). Not needed by this project: advanced indexing, block-scaled mma, byte packing, raw pointers.
KNOWN_UNSUPPORTED = frozenset({
    "load_advanced_indexing",
    "store_advanced_indexing",
    "Slice.__init__",
    "mma_scaled",
    "pack_to_bytes",
    "unpack_from_bytes",
    "Array.foreign_pointer",
    "Array.from_foreign",
    "Array.get_raw_memory",
    "RawArrayMemory.dtype",
    "RawArrayMemory.load_offset",
    "RawArrayMemory.store_offset",
    "RawArrayMemory.atomic_cas_offset",
    "RawArrayMemory.atomic_xchg_offset",
    "RawArrayMemory.atomic_add_offset",
    "RawArrayMemory.atomic_max_offset",
    "RawArrayMemory.atomic_min_offset",
    "RawArrayMemory.atomic_and_offset",
    "RawArrayMemory.atomic_or_offset",
    "RawArrayMemory.atomic_xor_offset",
})

_RESOLVED: dict = {}  # stub function object -> implementation (stubs never change)


def _resolve_stub(func):
    impl = _RESOLVED.get(func)
    if impl is None:
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", str(func))
        impl = HANDLERS.get(name) or unsupported(name)
        _RESOLVED[func] = impl
    return impl


class CpuMode(DispatchMode):
    """The dispatch mode of one CPU launch: the grid, the current block id and the patched helper
    functions."""

    def __init__(self, grid: tuple[int, int, int], patch):
        self.grid = grid
        self.block_id = (0, 0, 0)
        self._patch = patch  # FunctionType -> patched copy (range, min, max, ... as in tile code)

    def call_tile_function_from_host(self, func, args, kwargs):
        impl = _RESOLVED.get(func)
        if impl is None:
            if is_stub(func):
                impl = _resolve_stub(func)
            elif is_function_wrapper(func):
                # a user @ct.function helper: run its body as Python, under the same rules as the kernel
                return self._patch(func.__wrapped__)(*args, **kwargs)
            else:
                name = getattr(func, "__qualname__", repr(func))
                raise NotImplementedError(f"cuda.tile.{name} is not supported by the CPU executor")
        return impl(*args, **kwargs)
