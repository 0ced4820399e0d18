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


# A representative constant of each kind a loose Python number can have (cuTile types a constant by its value:
# bool, int32, int64 or uint64 by range, float32). Promotion depends on the kind only; the range check of an
# integer constant against an integer dtype is done separately (below), exactly as cuTile does.
def _kind(v):
    t = type(v)
    if t is bool:
        return False
    if t is float:
        return 0.0
    if t is int:
        if -(2**31) <= v < 2**31:
            return 0
        if -(2**63) <= v < 2**63:
            return 2**40
        return 2**63
    return v


@functools.lru_cache(maxsize=4096, typed=True)  # typed: the kinds 0, 0.0 and False are equal as keys
def _promote_with_loose(dtype, kind, dtype_first: bool, force_float: bool):
    k = LooselyTypedScalar(kind)
    return promote_dtypes(dtype, k, force_float) if dtype_first else promote_dtypes(k, dtype, force_float)


_IINFO = {d: np.iinfo(D.storage_dtype(d)) for d in D.STORAGE if D.is_int(d)}


def _check_int_range(dtype, v, force_float):
    if type(v) is int and not force_float:
        info = _IINFO.get(dtype)
        if info is not None and not info.min <= v <= info.max:
            raise TileValueError(f"Integer constant {v} is out of range of {dtype}")


def promote(x, y, force_float: bool = False):
    """The result dtype of combining ``x`` and ``y`` under cuTile's rules (None if both are loose)."""
    tx, ty = type(x), type(y)
    sx = tx is Tile and not x._loose
    sy = ty is Tile and not y._loose
    if sx and sy:
        return _promote_strict(x._dt, y._dt, force_float)
    if sx:
        v = _py_value(y)
        r = _promote_with_loose(x._dt, _kind(v), True, force_float)
        _check_int_range(x._dt, v, force_float)
        return r
    if sy:
        v = _py_value(x)
        r = _promote_with_loose(y._dt, _kind(v), False, force_float)
        _check_int_range(y._dt, v, force_float)
        return r
    kx, ky = type_key(x), type_key(y)
    if isinstance(kx, LooselyTypedScalar) and isinstance(ky, LooselyTypedScalar):
        return None
    return promote_dtypes(kx, ky, force_float)


def promote_any(x, y, force_float: bool = False):
    """Like ``promote`` but two loose constants also get a dtype (int32/int64/float32/bool by value)."""
    return promote_dtypes(type_key(x), type_key(y), force_float)


_COMPUTE = D.COMPUTE


def values_as(x, dtype) -> np.ndarray:
    """``x``'s values converted to cuTile ``dtype`` (rounded as cuTile casts) and then to its compute
    dtype."""
    if type(x) is Tile and not x._loose:
        a = x._a if x._dt == dtype else D.convert(x._a, x._dt, dtype)
    else:
        v = _py_value(x)
        if dtype in _IINFO:
            info = _IINFO[dtype]
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
    cd = _COMPUTE[dtype]
    return a if a.dtype == cd else a.astype(cd)


def finish(values, dtype) -> Tile:
    """A strict tile of ``dtype`` from compute-dtype ``values`` (narrow floats rounded to nearest even)."""
    values = np.asarray(values)
    sd = D.STORAGE[dtype]
    if values.dtype != sd:
        if dtype == ct.tfloat32:
            return Tile(D.round_tf32(values), dtype)
        if sd.kind in "iu" and values.dtype.kind == "f":
            values = D.convert(values, ct.float64, dtype)
        else:
            values = values.astype(sd)
    elif dtype == ct.tfloat32:
        return Tile(D.round_tf32(values), dtype)
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
