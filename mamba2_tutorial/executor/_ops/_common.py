"""Shared helpers for the op implementations: operands, cuTile promotion, compute and rounding."""

from __future__ import annotations

import functools

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileTypeError, TileValueError
from cuda.tile._ir.ops_utils import promote_dtypes
from cuda.tile._ir.type import LooselyTypedScalar

from .. import _dtypes as D
from .._tile import Tile

__all__ = [
    "is_loose",
    "type_key",
    "promote",
    "promote_any",
    "values_as",
    "finish",
    "as_tile",
    "const_int",
    "const_shape",
    "normalize_axis",
    "check_pow2_shape",
]

_PY_NUMBERS = (bool, int, float)


def is_loose(x) -> bool:
    """True for loosely typed constants: Python numbers (literals, ct.Constant values) and loose tiles."""
    return isinstance(x, _PY_NUMBERS) or (isinstance(x, Tile) and x._loose)


def _py_value(x):
    if isinstance(x, Tile):
        return x._a.item()
    if isinstance(x, np.generic):
        return x.item()
    return x


def type_key(x):
    """What cuTile's promote_dtypes takes for ``x``: its DType, or LooselyTypedScalar(value) for a
    constant."""
    if isinstance(x, Tile):
        return LooselyTypedScalar(x._a.item()) if x._loose else x._dt
    if isinstance(x, _PY_NUMBERS):
        return LooselyTypedScalar(x)
    if isinstance(x, np.generic):
        return LooselyTypedScalar(x.item())
    raise TileTypeError(f"Expected a tile or a scalar, got {type(x).__name__}: {x!r}")


@functools.lru_cache(maxsize=4096)
def _promote_strict(a, b, force_float: bool):
    return promote_dtypes(a, b, force_float)


def promote(x, y, force_float: bool = False):
    """The result dtype of combining ``x`` and ``y`` under cuTile's rules (None if both are loose)."""
    kx, ky = type_key(x), type_key(y)
    lx, ly = isinstance(kx, LooselyTypedScalar), isinstance(ky, LooselyTypedScalar)
    if lx and ly:
        return None
    if not lx and not ly:
        return _promote_strict(kx, ky, force_float)
    return promote_dtypes(kx, ky, force_float)


def promote_any(x, y, force_float: bool = False):
    """Like ``promote`` but two loose constants also get a dtype (int32/int64/float32/bool by value)."""
    return promote_dtypes(type_key(x), type_key(y), force_float)


def values_as(x, dtype) -> np.ndarray:
    """``x``'s values converted to cuTile ``dtype`` (rounded as cuTile casts) and then to its compute
    dtype."""
    if isinstance(x, Tile) and not x._loose:
        a = D.convert(x._a, x._dt, dtype)
    else:
        v = _py_value(x)
        if D.is_int(dtype):
            info = np.iinfo(D.storage_dtype(dtype))
            if isinstance(v, float):
                a = D.convert(np.array(v), ct.float64, dtype)
            else:
                v = int(v)
                if not info.min <= v <= info.max:
                    raise TileValueError(f"Integer constant {v} is out of range of {dtype}")
                a = np.array(v, dtype=D.storage_dtype(dtype))
        elif D.is_bool(dtype):
            a = np.array(bool(v))
        else:
            a = D.convert(np.array(float(v), dtype=np.float64), ct.float64, dtype)
    cd = D.compute_dtype(dtype)
    return a if a.dtype == cd else a.astype(cd)


def finish(values, dtype) -> Tile:
    """A strict tile of ``dtype`` from compute-dtype ``values`` (narrow floats rounded to nearest even)."""
    values = np.asarray(values)
    sd = D.storage_dtype(dtype)
    if dtype == ct.tfloat32:
        return Tile(D.round_tf32(values), dtype)
    if values.dtype != sd:
        if sd.kind in "iu" and values.dtype.kind == "f":
            values = D.convert(values, ct.float64, dtype)
        else:
            values = values.astype(sd)
    return Tile(values, dtype)


def as_tile(x, dtype=None) -> Tile:
    """``x`` as a strict tile; Python numbers take ``dtype`` or cuTile's default for their kind."""
    if isinstance(x, Tile) and not x._loose:
        return x
    if dtype is None:
        v = _py_value(x)
        dtype = promote_dtypes(LooselyTypedScalar(v), LooselyTypedScalar(v))
    return finish(values_as(x, dtype), dtype)


def const_int(x, what: str = "value") -> int:
    """A compile-time integer (Python int or 0-d integer tile) as a Python int."""
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, Tile) and x._a.ndim == 0 and (D.is_int(x._dt) or D.is_bool(x._dt)):
        return int(x._a)
    raise TileTypeError(f"Expected an integer {what}, got {x!r}")


def const_shape(shape, what: str = "shape") -> tuple[int, ...]:
    if isinstance(shape, int | np.integer | Tile):
        return (const_int(shape, what),)
    return tuple(const_int(s, what) for s in shape)


def check_pow2_shape(shape: tuple[int, ...]) -> None:
    for i, n in enumerate(shape):
        if n <= 0 or n & (n - 1):
            raise TileValueError(f"Dimension #{i} of shape {tuple(shape)} is not a power of two")


def normalize_axis(axis, ndim: int) -> int:
    axis = const_int(axis, "axis")
    if not -ndim <= axis < max(ndim, 1):
        raise TileValueError(f"Axis {axis} is out of range for a tile of rank {ndim}")
    return axis % max(ndim, 1)
