"""Matrix multiply: ``mma(x, y, acc)`` and ``matmul``/``@``.

``mma``: x and y of one dtype (int8/uint8 may mix), 2-D or 3-D (batch dims broadcast); the accumulator dtype
must be one cuTile allows for the input (f16 -> f16 or f32, bf16 -> f32, f32 -> f32, tf32 -> f32, f64 -> f64,
fp8 -> f16 or f32, int8 -> int32). Products are computed in float32 (float64 for f64, exact int64 for int8)
from the stored values (tf32 inputs were rounded to 10 mantissa bits by ``astype(ct.tfloat32)``), added to
``acc`` and rounded once to the accumulator dtype. The GPU rounds more often, so compare with dtype-aware
tolerances.

``matmul``: inputs promoted to a common dtype, accumulated in cuTile's default accumulator (f16 -> f16, bf16
-> f32, int8 -> int32) and cast back to the input dtype.
"""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
from cuda.tile._datatype import _resolve_mma_supported_dtype
from cuda.tile._exception import TileTypeError

from .. import _dtypes as D
from .._registry import op
from .._tile import Tile
from ._common import as_tile, finish, promote


def _operand(t: Tile) -> np.ndarray:
    if D.is_int(t._dt):
        return t._a.astype(np.int64)
    if t._dt == ct.float64:
        return t._a
    return t._a.astype(D.compute_dtype(ct.float32))     # float32 (float64 under wide_floats)


def _product(x: Tile, y: Tile) -> np.ndarray:
    if x._a.ndim not in (2, 3) or y._a.ndim not in (2, 3):
        raise TileTypeError(
            f"mma operands must be 2-D or 3-D tiles, got shapes {x._a.shape} and {y._a.shape}"
        )
    return np.matmul(_operand(x), _operand(y))


@op("mma")
def mma(x, y, /, acc, *, use_fast_acc=False):
    x, y, acc = as_tile(x), as_tile(y), as_tile(acc)
    acc_dt = _resolve_mma_supported_dtype(x._dt, y._dt, acc._dt)
    p = _product(x, y)
    if p.shape != acc._a.shape:
        raise TileTypeError(f"mma: acc shape {acc._a.shape} does not match the product shape {p.shape}")
    if D.is_int(acc_dt):
        r = (p + acc._a.astype(np.int64)).astype(np.int32)  # wraps like int32 hardware accumulation
        return Tile(r, acc_dt)
    a = acc._a if acc._a.dtype == p.dtype else acc._a.astype(p.dtype)
    return finish(p + a, acc_dt)


@op("matmul")
def matmul(x, y, /):
    x, y = as_tile(x), as_tile(y)
    dt = promote(x, y)
    if x._dt != dt:
        x = Tile(D.convert(x._a, x._dt, dt), dt)
    if y._dt != dt:
        y = Tile(D.convert(y._a, y._dt, dt), dt)
    acc_dt = _resolve_mma_supported_dtype(dt, dt)
    if x._a.ndim == 0 or y._a.ndim == 0:
        raise TileTypeError("matmul operands must be at least 1-D")
    if x._a.ndim > 3 or y._a.ndim > 3:
        raise TileTypeError("matmul operands must be 1-D, 2-D or 3-D")
    p = np.matmul(_operand(x), _operand(y))
    if D.is_int(acc_dt):
        p = p.astype(np.int32)
        return Tile(D.convert(p, acc_dt, dt), dt)
    r = finish(p, acc_dt)
    return Tile(D.convert(r._a, acc_dt, dt), dt)
