"""Reductions and scans: sum, prod, max, min, argmax, argmin, reduce; cumsum, cumprod, scan.

Results keep the input dtype (bool -> int32); narrow floats accumulate in float32 and are rounded once (the
GPU accumulates in the narrow dtype in an unspecified order: compare with tolerances). ``max``/``min`` ignore
NaN unless ``propagate_nan=True``; ``argmax``/``argmin`` return int32, ties go to the smallest index, NaN is
the worst value.
"""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileValueError

from .. import _dtypes as D
from .._registry import op
from .._tile import Tile
from ._common import as_tile, finish, normalize_axis, values_as


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, tuple | list):
        return tuple(sorted({normalize_axis(a, ndim) for a in axis}))
    return (normalize_axis(axis, ndim),)


def _acc_dtype(t: Tile):
    return ct.int32 if D.is_bool(t._dt) else t._dt


def _reduce_with(t: Tile, axis, keepdims, fn):
    dt = _acc_dtype(t)
    a = values_as(t, dt)
    axes = _axes(axis, a.ndim)
    if not axes:
        return finish(a, dt)
    return finish(fn(a, axis=axes, keepdims=bool(keepdims)), dt)


@op("sum")
def sum_(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    t = as_tile(x)
    return _reduce_with(t, axis, keepdims, lambda a, axis, keepdims: np.sum(a, axis=axis, keepdims=keepdims,
                                                                          dtype=a.dtype))


@op("prod")
def prod(x, /, axis=None, *, keepdims=False, rounding_mode=None, flush_to_zero=False):
    t = as_tile(x)
    return _reduce_with(t, axis, keepdims, lambda a, axis, keepdims: np.prod(a, axis=axis, keepdims=keepdims,
                                                                           dtype=a.dtype))


def _minmax_reduce(x, axis, keepdims, propagate_nan, is_max):
    t = as_tile(x)

    def fn(a, axis, keepdims):
        if a.dtype.kind == "f":
            if propagate_nan:
                return (np.max if is_max else np.min)(a, axis=axis, keepdims=keepdims)
            ufunc = np.fmax if is_max else np.fmin
            init = -np.inf if is_max else np.inf
            return ufunc.reduce(a, axis=axis, keepdims=keepdims, initial=init)
        return (np.max if is_max else np.min)(a, axis=axis, keepdims=keepdims)

    return _reduce_with(t, axis, keepdims, fn)


@op("max")
def max_(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    return _minmax_reduce(x, axis, keepdims, propagate_nan, True)


@op("min")
def min_(x, /, axis=None, *, keepdims=False, flush_to_zero=False, propagate_nan=False):
    return _minmax_reduce(x, axis, keepdims, propagate_nan, False)


def _arg(x, axis, keepdims, propagate_nan, is_max):
    t = as_tile(x)
    a = values_as(t, _acc_dtype(t))
    if isinstance(axis, tuple | list):
        raise TileValueError("argmax/argmin do not support a tuple of axes")
    if axis is None:
        flat = a.reshape(-1)
        r = _arg_along(flat, 0, propagate_nan, is_max)
        out = np.asarray(r, dtype=np.int32)
        if keepdims:
            out = out.reshape((1,) * a.ndim)
        return Tile(out, ct.int32)
    ax = normalize_axis(axis, a.ndim)
    r = _arg_along(a, ax, propagate_nan, is_max).astype(np.int32)
    if keepdims:
        r = np.expand_dims(r, ax)
    return Tile(np.asarray(r), ct.int32)


def _arg_along(a, ax, propagate_nan, is_max):
    if a.dtype.kind != "f":
        return np.argmax(a, axis=ax) if is_max else np.argmin(a, axis=ax)
    nan = np.isnan(a)
    best = (np.fmax if is_max else np.fmin).reduce(a, axis=ax, keepdims=True)
    cand = a == best  # NaN never equal: NaN is the worst value
    idx = np.argmax(cand, axis=ax)  # first True: ties go to the smallest index; all-NaN -> 0
    if propagate_nan:
        any_nan = nan.any(axis=ax)
        idx = np.where(any_nan, np.argmax(nan, axis=ax), idx)
    return idx


@op("argmax")
def argmax(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    return _arg(x, axis, keepdims, propagate_nan, True)


@op("argmin")
def argmin(x, /, axis=None, *, keepdims=False, propagate_nan=False):
    return _arg(x, axis, keepdims, propagate_nan, False)


# ------------------------------------------------------------------------------------------------------------
# scans
# ------------------------------------------------------------------------------------------------------------
def _scan(x, axis, reverse, fn):
    t = as_tile(x)
    dt = _acc_dtype(t)
    a = values_as(t, dt)
    ax = normalize_axis(axis, a.ndim)
    if reverse:
        a = np.flip(a, ax)
    r = fn(a, axis=ax, dtype=a.dtype)
    if reverse:
        r = np.flip(r, ax)
    return finish(np.array(r, order="C"), dt)


@op("cumsum")
def cumsum(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    return _scan(x, axis, reverse, np.cumsum)


@op("cumprod")
def cumprod(x, /, axis=0, *, reverse=False, rounding_mode=None, flush_to_zero=False):
    return _scan(x, axis, reverse, np.cumprod)


# ------------------------------------------------------------------------------------------------------------
# custom reduce / scan: the combine function runs vectorized on whole slices (it is elementwise in cuTile)
# ------------------------------------------------------------------------------------------------------------
def _as_tuple(x):
    return (tuple(x), True) if isinstance(x, tuple | list) else ((x,), False)


def _slice_axis(t: Tile, ax, sl):
    key = [slice(None)] * t._a.ndim
    key[ax] = sl
    return Tile(t._a[tuple(key)], t._dt)


@op("reduce")
def reduce_(x, /, axis, func, identity, *, keepdims=False):
    xs, is_tuple = _as_tuple(x)
    xs = [as_tile(v) for v in xs]
    nd = xs[0]._a.ndim
    axes = _axes(axis, nd)
    # move reduced axes to the end and flatten them into one power-of-two axis
    perm = [d for d in range(nd) if d not in axes] + list(axes)
    keep_shape = [xs[0]._a.shape[d] for d in range(nd) if d not in axes]
    cur = [Tile(np.array(np.transpose(v._a, perm), order="C").reshape(keep_shape + [-1]), v._dt) for v in xs]
    while cur[0]._a.shape[-1] > 1:
        n = cur[0]._a.shape[-1] // 2
        lhs = [_slice_axis(v, -1 % v._a.ndim, slice(0, n)) for v in cur]
        rhs = [_slice_axis(v, -1 % v._a.ndim, slice(n, 2 * n)) for v in cur]
        res = func(*lhs, *rhs)
        res, _ = _as_tuple(res)
        cur = [as_tile(r) for r in res]
    outs = []
    for v in cur:
        a = v._a.reshape(keep_shape)
        if keepdims:
            a = a.reshape([1 if d in axes else xs[0]._a.shape[d] for d in range(nd)])
        outs.append(Tile(np.array(a, order="C"), v._dt))
    return tuple(outs) if is_tuple else outs[0]


@op("scan")
def scan(x, /, axis, func, identity, *, reverse=False):
    xs, is_tuple = _as_tuple(x)
    ids, _ = _as_tuple(identity)
    xs = [as_tile(v) for v in xs]
    ax = normalize_axis(axis, xs[0]._a.ndim)
    if reverse:
        xs = [Tile(np.flip(v._a, ax).copy(), v._dt) for v in xs]
    n = xs[0]._a.shape[ax]
    d = 1
    cur = xs
    while d < n:  # Hillis-Steele inclusive scan: combine(earlier, later)
        shifted = []
        for v, ident in zip(cur, ids):
            fill = np.full_like(v._a, values_as(ident, v._dt).astype(v._a.dtype))
            key_src = [slice(None)] * v._a.ndim
            key_dst = [slice(None)] * v._a.ndim
            key_src[ax] = slice(0, n - d)
            key_dst[ax] = slice(d, n)
            fill[tuple(key_dst)] = v._a[tuple(key_src)]
            shifted.append(Tile(fill, v._dt))
        res, _ = _as_tuple(func(*shifted, *cur))
        res = [as_tile(r) for r in res]
        # positions < d keep their value (combining with the identity is a no-op by definition)
        cur = res
        d *= 2
    if reverse:
        cur = [Tile(np.flip(v._a, ax).copy(), v._dt) for v in cur]
    return tuple(cur) if is_tuple else cur[0]
