"""A faithful CPU executor for cuTile Python kernels.

``run_kernel(kernel, grid, args)`` type-checks the kernel with cuTile's own front end (so the CPU raises the
same
compile errors as the GPU), then runs the kernel's own Python function once per block with every ``ct.*``
call and
tile operator routed through cuTile's dispatch hook to NumPy implementations that follow cuTile's rules (dtype
promotion, loose constants, int32 loop variables, tile-indexed loads with padding, masked stores, mma dtypes,
...).
Use it through ``mamba2_tutorial.launch(kernel, grid, args, backend="cpu")``.

Timings of the CPU executor mean nothing about GPU performance.
"""

from __future__ import annotations

from ._registry import HANDLERS
from ._run import block_ids, run_kernel, to_numpy
from ._tile import CpuArray, Tile
from ._typecheck import cache_info as typecheck_cache_info
from ._typecheck import clear_cache as clear_typecheck_cache

__all__ = [
    "run_kernel",
    "block_ids",
    "to_numpy",
    "Tile",
    "CpuArray",
    "HANDLERS",
    "typecheck_cache_info",
    "clear_typecheck_cache",
    "set_int_poison",
]


def set_int_poison(value: int) -> None:
    """Set the value UNDETERMINED padding gives integer arrays (default -123456789)."""
    from ._ops import memory

    memory.INT_SENTINEL = int(value)
