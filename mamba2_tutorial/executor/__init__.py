"""A faithful CPU executor for cuTile Python kernels.

``run_kernel(kernel, grid, args)`` type-checks the kernel with cuTile's own front end (so the CPU raises the
same compile errors as the GPU), then runs the kernel's own Python function once per block with every ``ct.*``
call and tile operator routed through cuTile's dispatch hook to NumPy implementations that follow cuTile's
rules (dtype promotion, loose constants, int32 loop variables, tile-indexed loads with padding, masked stores,
mma dtypes, ...). Use it through ``mamba2_tutorial.launch(kernel, grid, args, backend="cpu")``.

Timings of the CPU executor mean nothing about GPU performance.

How it differs from the GPU (on purpose, or because a sequential CPU cannot tell):

- Narrow-float accumulations (``sum``/``cumsum`` of float16/bfloat16, ``mma`` into a float16 accumulator,
  ``@`` on float16) are computed in float32 and rounded once, so the CPU is slightly MORE accurate than the
  GPU: compare with dtype-aware tolerances (``mamba2_tutorial.lessons.checks.assert_close``).
- Rounding-mode hints are accepted and ignored (round to nearest even). ``flush_to_zero`` is emulated on the
  float32 math functions (``exp2``, ``exp``, ...: subnormal inputs and results become 0, as on the GPU) and
  ignored elsewhere (subnormals kept); ``latency``, ``allow_tma``, memory order and scope are accepted and
  ignored.
- Blocks run one after another (x fastest, or ``block_order="random"``/``"reversed"``), so races between
  blocks never show as torn values: run a kernel under several orders to expose order dependence.
- UNDETERMINED padding is poisoned (NaN, or ``-123456789`` for integers; see ``set_int_poison``); a fully out-
  of-bounds tile, a negative tile index and a ``check_bounds=False`` violation raise ``IndexError``.
- ``wide_floats()`` (the float64 tier) holds and computes every float32 of a kernel in float64, float64
  arrays entering as float32: the kernels' own code in double precision, for ``torch.autograd.gradcheck``.
  The GPU has no such mode.
- Not emulated (each raises ``NotImplementedError`` naming the operation): advanced indexing
  (``load/store_advanced_indexing``), ``mma_scaled``, ``pack_to_bytes``/``unpack_from_bytes``, raw pointers
  (``Array.get_raw_memory``, ``foreign_pointer``), ``TiledView.num_tiles`` with ``traversal_steps``. Calling a
  dtype (``ct.int32(5)``) raises cuTile's own "DType cannot be constructed in pure Python".
- Helper functions run with tile-code builtins (``range`` yields int32 tiles;
  ``min``/``max``/``abs``/``print`` on tiles) when the kernel reaches them by name or as ``@ct.function``; a
  plain helper reached as a module attribute (``mod.helper(x)``) sees Python's builtins. Loop-carried and
  branch-merged variables become strictly typed as in cuTile by rewriting the kernel's source; a function
  whose source is unavailable runs without that rewrite.
"""

from __future__ import annotations

from ._dtypes import wide_floats
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
    "wide_floats",
]


def set_int_poison(value: int) -> None:
    """Set the value UNDETERMINED padding gives integer arrays (default -123456789)."""
    from ._ops import memory

    memory.INT_SENTINEL = int(value)
