"""Shape ops and factories: reshape, expand_dims / ``[:, None]``, permute, transpose, broadcast_to, cat,
extract, insert, item; arange, full, zeros, ones, astile. Every tile dimension is a power of two (0-d
allowed)."""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileTypeError, TileValueError

from .. import _dtypes as D
from .._registry import op
from .._tile import Tile
from ._common import as_tile, check_pow2_shape, const_int, const_shape, finish, normalize_axis, values_as


@op("reshape")
def reshape(x, /, shape):
    t = as_tile(x)
    shape = const_shape(shape)
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1])) or 1
        shape = tuple(t._a.size // known if s == -1 else s for s in shape)
    if int(np.prod(shape)) != t._a.size:
        raise TileValueError(f"Cannot reshape a tile of shape {t._a.shape} to {shape}")
    check_pow2_shape(shape)
    return Tile(t._a.reshape(shape), t._dt)


@op("Tile.item")
def item(self):
    if self._a.size != 1:
        raise TileValueError(f"item() needs a tile with one element, got shape {self._a.shape}")
    return Tile(self._a.reshape(()), self._dt)


@op("expand_dims")
def expand_dims(x, /, axis):
    t = as_tile(x)
    if isinstance(axis, int | np.integer) or isinstance(axis, Tile):
        ax = const_int(axis, "axis")
        nd = t._a.ndim + 1
        if not -nd <= ax < nd:
            raise TileValueError(f"Axis {ax} is out of range for expand_dims of a rank-{t._a.ndim} tile")
        return Tile(np.expand_dims(t._a, ax % nd), t._dt)
    # subscript sugar: x[None], x[:, None], x[..., None]
    key = axis if isinstance(axis, tuple) else (axis,)
    for k in key:
        if not (k is None or k is Ellipsis or (isinstance(k, slice) and k == slice(None))):
            raise TileTypeError(
                "Directly indexing a tile is not supported; use `extract()` or `item()` instead."
            )
    return Tile(t._a[key], t._dt)


@op("permute")
def permute(x, /, axes):
    t = as_tile(x)
    axes = tuple(normalize_axis(a, t._a.ndim) for a in axes)
    if sorted(axes) != list(range(t._a.ndim)):
        raise TileValueError(f"Invalid permutation {axes} for a tile of rank {t._a.ndim}")
    return Tile(np.array(np.transpose(t._a, axes), order="C"), t._dt)


@op("transpose")
def transpose(x, /, axis0=None, axis1=None):
    t = as_tile(x)
    nd = t._a.ndim
    if axis0 is None and axis1 is None:
        if nd != 2:
            raise TileValueError(f"transpose() of a rank-{nd} tile needs axis0 and axis1")
        a0, a1 = 0, 1
    elif axis0 is None or axis1 is None:
        raise TileValueError("transpose() needs both axis0 and axis1, or neither")
    else:
        a0, a1 = normalize_axis(axis0, nd), normalize_axis(axis1, nd)
    return Tile(np.array(np.swapaxes(t._a, a0, a1), order="C"), t._dt)


@op("broadcast_to")
def broadcast_to(x, /, shape):
    t = as_tile(x)
    shape = const_shape(shape)
    check_pow2_shape(shape)
    return Tile(np.broadcast_to(t._a, shape).copy(), t._dt)


@op("cat")
def cat(tiles, /, axis):
    tiles = tuple(tiles)
    if len(tiles) != 2:
        raise TileValueError(f"cat() takes exactly two tiles, got {len(tiles)}")
    a, b = (as_tile(t) for t in tiles)
    if a._dt != b._dt:
        raise TileTypeError(f"cat() needs tiles of one dtype, got {a._dt} and {b._dt}")
    ax = normalize_axis(axis, a._a.ndim)
    out = np.concatenate([a._a, b._a], axis=ax)
    check_pow2_shape(out.shape)
    return Tile(out, a._dt)


def _subtile_slices(full_shape, index, shape):
    index = (index,) if not isinstance(index, tuple | list) else tuple(index)
    index = tuple(const_int(i, "index") for i in index)
    if len(index) != len(full_shape):
        raise TileValueError(f"Index {index} does not match the tile rank {len(full_shape)}")
    sl = []
    for d, (n, i, s) in enumerate(zip(full_shape, index, shape)):
        if n % s:
            raise TileValueError(f"Subtile shape {shape} does not divide the tile shape {full_shape}")
        if not 0 <= i < n // s:
            raise IndexError(f"Subtile index {i} is out of range in dimension {d} ({n // s} subtiles)")
        sl.append(slice(i * s, (i + 1) * s))
    return tuple(sl)


@op("extract")
def extract(x, /, index, shape):
    t = as_tile(x)
    shape = const_shape(shape)
    scalar = shape == ()
    if scalar:
        shape = (1,) * t._a.ndim
    check_pow2_shape(shape)
    out = t._a[_subtile_slices(t._a.shape, index, shape)].copy()
    return Tile(out.reshape(()) if scalar else out, t._dt)


@op("insert")
def insert(x, /, index, value):
    t = as_tile(x)
    v = values_as(value, t._dt) if not isinstance(value, Tile) else D.convert(value._a, value._dt, t._dt)
    v = np.asarray(v).astype(t._a.dtype)
    shape = v.shape if v.ndim else (1,) * t._a.ndim
    out = t._a.copy()
    out[_subtile_slices(t._a.shape, index, shape)] = v.reshape(shape)
    return Tile(out, t._dt)


# ------------------------------------------------------------------------------------------------------------
# factories
# ------------------------------------------------------------------------------------------------------------
@op("arange")
def arange(size, /, *, dtype, start=0, step=1):
    n = const_int(size, "size")
    check_pow2_shape((n,))
    dtype = D.resolve_dtype(dtype)
    cd = D.compute_dtype(dtype)
    s0 = values_as(start, dtype)
    st = values_as(step, dtype)
    return finish(s0 + np.arange(n).astype(cd) * st, dtype)


@op("full")
def full(shape, fill_value, dtype):
    shape = const_shape(shape)
    check_pow2_shape(shape)
    dtype = D.resolve_dtype(dtype)
    v = values_as(fill_value, dtype)
    return finish(np.full(shape, v, dtype=v.dtype), dtype)


@op("zeros")
def zeros(shape, dtype):
    return full(shape, 0, dtype)


@op("ones")
def ones(shape, dtype):
    return full(shape, 1, dtype)


@op("astile")
def astile(value, /, *, dtype):
    dtype = D.resolve_dtype(dtype)

    def flat(v):
        if isinstance(v, tuple | list):
            return [flat(e) for e in v]
        return values_as(v, dtype).item()

    a = np.array(flat(value), dtype=D.compute_dtype(dtype))
    check_pow2_shape(a.shape)
    return finish(a, dtype)


__all__ = ["reshape", "expand_dims", "permute", "transpose", "broadcast_to", "cat", "extract", "insert",
           "arange", "full", "zeros", "ones", "astile", "ct"]
