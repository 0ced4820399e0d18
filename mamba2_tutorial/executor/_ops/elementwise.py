"""Elementwise ops: arithmetic, comparisons, bitwise, math functions, where, astype, bitcast.

Dtypes follow cuTile (``promote`` uses cuTile's own ``promote_dtypes``); narrow floats compute in float32 and
round to the result dtype; integers wrap; integer ``//`` and ``%`` round toward minus infinity;
``minimum``/``maximum`` ignore NaN unless ``propagate_nan=True``. Rounding-mode hints are accepted; results
are always round-to-nearest (the GPU's default). ``flush_to_zero`` flushes subnormal inputs and results of
the float32 math functions to zero, as the GPU does; arithmetic operators accept it and keep subnormals.
"""

from __future__ import annotations

import math
import operator

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileTypeError

from .. import _dtypes as D
from .._registry import op
from .._tile import Tile
from ._common import as_tile, finish, is_loose, promote, promote_any, type_key, values_as

_PY = (bool, int, float)


def _py(x):
    return x._a.item() if isinstance(x, Tile) else x


def _both_loose(x, y) -> bool:
    return is_loose(x) and is_loose(y)


# ------------------------------------------------------------------------------------------------------------
# arithmetic
# ------------------------------------------------------------------------------------------------------------
def _floordiv(a, b):
    if a.dtype.kind == "f":
        return np.floor(a / b)
    return np.floor_divide(a, b)


def _mod(a, b):
    if a.dtype.kind == "f":
        v = np.fmod(a, b)
        fix = ((v < 0) != (b < 0)) & (v != 0)
        return np.where(fix, v + b, v)
    return np.remainder(a, b)


_ARITH = {
    "add": (np.add, operator.add),
    "sub": (np.subtract, operator.sub),
    "mul": (np.multiply, operator.mul),
    "truediv": (np.true_divide, operator.truediv),
    "floordiv": (_floordiv, operator.floordiv),
    "mod": (_mod, operator.mod),
    "atan2": (np.arctan2, math.atan2),
}


def _arith(name, x, y):
    npfn, pyfn = _ARITH[name]
    if _both_loose(x, y):
        return pyfn(_py(x), _py(y))
    dt = promote(x, y, force_float=(name == "truediv" or name == "atan2"))
    if dt == ct.bool_:
        raise TileTypeError(f"Binary arithmetic op `{name}` does not support bool, please cast bool to int")
    return finish(npfn(values_as(x, dt), values_as(y, dt)), dt)


def _make_arith(name):
    def impl(x, y, /, *, rounding_mode=None, flush_to_zero=False):
        return _arith(name, x, y)

    impl.__name__ = name
    return impl


for _name in ("add", "sub", "mul", "truediv"):
    op(_name)(_make_arith(_name))


@op("floordiv")
def floordiv(x, y, /):
    return _arith("floordiv", x, y)


@op("mod")
def mod(x, y, /):
    return _arith("mod", x, y)


@op("atan2")
def atan2(x1, x2, /):
    return _arith("atan2", x1, x2)


@op("divmod")
def divmod_(x, y, /):
    return _arith("floordiv", x, y), _arith("mod", x, y)


@op("pow")
def pow_(x, y, /):
    if _both_loose(x, y):
        return _py(x) ** _py(y)
    kx = x._dt if isinstance(x, Tile) and not x._loose else None
    ky = y._dt if isinstance(y, Tile) and not y._loose else None
    y_is_int = (ky is not None and D.is_int(ky) and ky.bitwidth <= 32) or (
        ky is None and isinstance(_py(y), int) and not isinstance(_py(y), bool)
    )
    if kx is not None and D.is_float(kx) and kx != ct.tfloat32 and y_is_int:
        # FPowI: float base, integer exponent; the result keeps the base's dtype
        a = values_as(x, kx)
        e = np.asarray(_py(y) if ky is None else y._a, dtype=np.int64)
        return finish(np.power(a, e.astype(a.dtype)), kx)
    dt = promote(x, y)
    if dt == ct.bool_:
        raise TileTypeError("Binary arithmetic op `pow` does not support bool, please cast bool to int")
    a, b = values_as(x, dt), values_as(y, dt)
    if a.dtype.kind in "iu":
        with np.errstate(all="ignore"):
            b_safe = np.where(b < 0, 0, b) if a.dtype.kind == "i" else b
            r = np.power(a, b_safe)
            if a.dtype.kind == "i":
                # negative exponents: 1 ** -n = 1, (-1) ** -n = +-1, otherwise 0 (integer division semantics)
                neg = b < 0
                r = np.where(neg, np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0)), r)
        return finish(r.astype(a.dtype), dt)
    return finish(np.power(a, b), dt)


# ------------------------------------------------------------------------------------------------------------
# min / max (NaN-ignoring by default)
# ------------------------------------------------------------------------------------------------------------
def _minmax(x, y, propagate_nan, is_max):
    if _both_loose(x, y):
        return (max if is_max else min)(_py(x), _py(y))
    dt = promote(x, y)
    if dt == ct.bool_:
        raise TileTypeError("minimum/maximum do not support bool, please cast bool to int")
    a, b = values_as(x, dt), values_as(y, dt)
    if propagate_nan:
        fn = np.maximum if is_max else np.minimum
    else:
        fn = np.fmax if is_max else np.fmin
    return finish(fn(a, b), dt)


@op("minimum")
def minimum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    return _minmax(x, y, propagate_nan, False)


@op("maximum")
def maximum(x, y, /, *, flush_to_zero=False, propagate_nan=False):
    return _minmax(x, y, propagate_nan, True)


# ------------------------------------------------------------------------------------------------------------
# comparisons
# ------------------------------------------------------------------------------------------------------------
_CMP = {
    "equal": (np.equal, operator.eq),
    "not_equal": (np.not_equal, operator.ne),
    "less": (np.less, operator.lt),
    "less_equal": (np.less_equal, operator.le),
    "greater": (np.greater, operator.gt),
    "greater_equal": (np.greater_equal, operator.ge),
}


def _make_cmp(name):
    npfn, pyfn = _CMP[name]

    def impl(x, y, /):
        if _both_loose(x, y):
            return pyfn(_py(x), _py(y))
        if not isinstance(x, (Tile, *_PY)) or not isinstance(y, (Tile, *_PY)):
            return pyfn(x, y)  # e.g. comparing DTypes, handled by Python
        dt = promote(x, y)
        return Tile(np.asarray(npfn(values_as(x, dt), values_as(y, dt))), ct.bool_)

    impl.__name__ = name
    return impl


for _name in _CMP:
    op(_name)(_make_cmp(_name))


# ------------------------------------------------------------------------------------------------------------
# bitwise
# ------------------------------------------------------------------------------------------------------------
_BITWISE = {
    "bitwise_and": (np.bitwise_and, operator.and_),
    "bitwise_or": (np.bitwise_or, operator.or_),
    "bitwise_xor": (np.bitwise_xor, operator.xor),
    "bitwise_lshift": (np.left_shift, operator.lshift),
    "bitwise_rshift": (np.right_shift, operator.rshift),
}


def _make_bitwise(name):
    npfn, pyfn = _BITWISE[name]

    def impl(x, y, /):
        if _both_loose(x, y):
            return pyfn(_py(x), _py(y))
        kx, ky = type_key(x), type_key(y)
        dx = kx if isinstance(kx, ct.DType) else promote_any(x, x)
        dy = ky if isinstance(ky, ct.DType) else promote_any(y, y)
        if name in ("bitwise_lshift", "bitwise_rshift"):
            if not (D.is_int(dx) and D.is_int(dy)):
                raise TileTypeError(f"Bitwise shift requires integers, got: {dx} and {dy}")
        elif D.is_float(dx) or D.is_float(dy):
            raise TileTypeError("Bitwise operations require integers or booleans."
                                " Use an explicit cuda.tile.bitcast() for non-integer operands.")
        elif is_loose(x) == is_loose(y) and dx != dy:
            raise TileTypeError(f"Bitwise operands must have same data type, got: {dx} and {dy}")
        if name not in ("bitwise_lshift", "bitwise_rshift") and {dx, dy} == {ct.bool_, ct.int8}:
            raise TileTypeError("Bitwise op does not support bool and int8")
        dt = promote(x, y)
        a, b = values_as(x, dt), values_as(y, dt)
        if name in ("bitwise_lshift", "bitwise_rshift"):
            b = b.astype(a.dtype)
        return finish(npfn(a, b), dt)

    impl.__name__ = name
    return impl


for _name in _BITWISE:
    op(_name)(_make_bitwise(_name))


@op("bitwise_not")
def bitwise_not(x, /):
    if is_loose(x):
        v = _py(x)
        return (not v) if isinstance(v, bool) else ~v
    t = as_tile(x)
    if D.is_float(t._dt):
        raise TileTypeError("Bitwise operations require integers or booleans.")
    return Tile(np.invert(t._a), t._dt)


# ------------------------------------------------------------------------------------------------------------
# unary
# ------------------------------------------------------------------------------------------------------------
def _float_result(t: Tile):
    return t._dt if D.is_float(t._dt) else ct.float32


def _rsqrt(a):
    return 1.0 / np.sqrt(a)


_FLOAT_UNARY = {
    "exp": np.exp,
    "exp2": np.exp2,
    "log": np.log,
    "log2": np.log2,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
}


def _flush(v):
    """Subnormal float32 values to (signed) zero: the GPU's flush-to-zero mode (``flush_to_zero=True``)."""
    v = np.asarray(v, dtype=D.compute_dtype(ct.float32))   # float32 (float64 under wide_floats)
    return np.where(np.abs(v) < np.finfo(np.float32).tiny, v * 0, v)


def _make_float_unary(name):
    fn = _FLOAT_UNARY[name]

    def impl(x, /, *, rounding_mode=None, flush_to_zero=False):
        if is_loose(x):  # cuTile folds math on a constant into a (loose) constant, in double precision
            return float(fn(np.float64(_py(x))))
        t = as_tile(x)
        dt = _float_result(t)
        v = values_as(t, dt)
        if flush_to_zero and dt == ct.float32:  # float32 only, as on the GPU: subnormals in and out -> 0
            return finish(_flush(fn(_flush(v))), dt)
        return finish(fn(v), dt)

    impl.__name__ = name
    return impl


for _name in _FLOAT_UNARY:
    op(_name)(_make_float_unary(_name))


def _make_round(name, fn):
    def impl(x, /):
        if is_loose(x) and isinstance(_py(x), float):
            return float(fn(_py(x)))
        t = as_tile(x)
        if not D.is_float(t._dt):
            raise TileTypeError(f"{name}() requires a float tile, got {t._dt}")
        return finish(fn(values_as(t, t._dt)), t._dt)

    impl.__name__ = name
    return impl


op("floor")(_make_round("floor", np.floor))
op("ceil")(_make_round("ceil", np.ceil))


@op("abs")
def abs_(x, /):
    if is_loose(x):
        return abs(_py(x))
    t = as_tile(x)
    if D.is_bool(t._dt) or (D.is_int(t._dt) and not D.is_signed(t._dt)):
        return t
    return finish(np.abs(values_as(t, t._dt)), t._dt)


@op("negative")
def negative(x, /):
    if is_loose(x):
        return -_py(x)
    t = as_tile(x)
    dt = ct.int32 if D.is_bool(t._dt) else t._dt
    return finish(np.negative(values_as(t, dt)), dt)


@op("isnan")
def isnan(x, /):
    if is_loose(x):
        return bool(np.isnan(float(_py(x))))
    t = as_tile(x)
    if not D.is_float(t._dt):
        raise TileTypeError(f"isnan() requires a float tile, got {t._dt}")
    return Tile(np.isnan(values_as(t, t._dt)), ct.bool_)


# ------------------------------------------------------------------------------------------------------------
# where, astype, bitcast
# ------------------------------------------------------------------------------------------------------------
@op("where")
def where(cond, x, y, /):
    c = as_tile(cond)
    c = c._a if D.is_bool(c._dt) else (c._a != 0)
    dt = promote_any(x, y)
    return finish(np.where(c, values_as(x, dt), values_as(y, dt)), dt)


@op("astype")
def astype(x, dtype, /, *, rounding_mode=None):
    dtype = D.resolve_dtype(dtype)
    if rounding_mode is not None and rounding_mode not in (ct.RoundingMode.RN,):
        raise NotImplementedError(
            f"cuda.tile.astype with rounding_mode={rounding_mode} is not supported by the CPU executor"
        )
    if is_loose(x) and not isinstance(x, Tile):
        return finish(values_as(x, dtype), dtype)
    t = as_tile(x)
    if t._dt == dtype:
        return t
    return Tile(D.convert(t._a, t._dt, dtype), dtype)


@op("bitcast")
def bitcast(x, /, dtype):
    dtype = D.resolve_dtype(dtype)
    t = as_tile(x)
    if t._dt.bitwidth != dtype.bitwidth:
        raise TileTypeError(f"bitcast needs dtypes of the same width, got {t._dt} and {dtype}")
    a = np.array(t._a, order="C")
    return Tile(a.view(D.storage_dtype(dtype)).copy(), dtype)
