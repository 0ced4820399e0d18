"""Memory ops: tile-indexed load/store (order, padding, masking), gather/scatter, atomics, views, block ids.

``load(array, index, shape)`` reads ``array[index[d]*shape[d] : (index[d]+1)*shape[d]]`` in each dimension of
the array viewed through ``order``; elements past the end are filled per ``padding_mode``. The default
``UNDETERMINED`` padding is poisoned (NaN for floats, ``INT_SENTINEL`` for integers) so that a kernel relying
on it fails loudly. A tile that lies entirely outside the array, or a negative index, raises ``IndexError``.
Loads return copies; stores write only the in-bounds part.
"""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
from cuda.tile._dispatch_mode import DispatchMode
from cuda.tile._exception import TileTypeError, TileValueError

from .. import _dtypes as D
from .._registry import op
from .._tile import CpuArray, Tile, scalar_tile
from ._common import as_tile, check_pow2_shape, const_int, const_shape, normalize_axis, values_as

PaddingMode = ct.PaddingMode

# Fill value of UNDETERMINED padding for integer arrays (bool arrays get True): a value a kernel will not
# mistake for data. Change it to probe a kernel, e.g. ``mamba2_tutorial.executor.set_int_poison(0)``.
INT_SENTINEL = -123456789


def _mode():
    return DispatchMode.get_current()


# ------------------------------------------------------------------------------------------------------------
# block ids
# ------------------------------------------------------------------------------------------------------------
@op("bid")
def bid(axis):
    axis = const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise TileValueError(f"Axis must be 0, 1 or 2, got {axis}")
    return scalar_tile(_mode().block_id[axis])


@op("num_blocks")
def num_blocks(axis):
    axis = const_int(axis, "axis")
    if axis not in (0, 1, 2):
        raise TileValueError(f"Axis must be 0, 1 or 2, got {axis}")
    return scalar_tile(_mode().grid[axis])


# ------------------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------------------
def _array(a) -> CpuArray:
    if isinstance(a, CpuArray):
        return a
    raise TileTypeError(f"Expected an array, got {type(a).__name__}")


def _order(order, ndim: int) -> tuple[int, ...]:
    if isinstance(order, str):
        if order == "C":
            return tuple(range(ndim))
        if order == "F":
            return tuple(reversed(range(ndim)))
        raise TileValueError(f"Invalid order {order!r}: expected 'C', 'F' or a permutation")
    perm = tuple(const_int(o, "order") % max(ndim, 1) for o in order)
    if sorted(perm) != list(range(ndim)):
        raise TileValueError(f"Invalid order {tuple(order)} for an array of rank {ndim}")
    return perm


def _index(index, ndim: int) -> tuple[int, ...]:
    items = tuple(index) if isinstance(index, tuple | list) else (index,)
    if len(items) != ndim:
        raise TileTypeError(f"Index size {len(items)} does not match the array rank {ndim}")
    return tuple(const_int(i, "index") for i in items)


def _view(arr: CpuArray, perm) -> np.ndarray:
    a = arr._np
    return a if perm == tuple(range(a.ndim)) else a.transpose(perm)


def pad_value(padding_mode, dtype):
    if D.is_float(dtype):
        return {
            PaddingMode.UNDETERMINED: np.nan,
            PaddingMode.ZERO: 0.0,
            PaddingMode.NEG_ZERO: -0.0,
            PaddingMode.NAN: np.nan,
            PaddingMode.POS_INF: np.inf,
            PaddingMode.NEG_INF: -np.inf,
        }[padding_mode]
    if D.is_bool(dtype):
        return padding_mode is PaddingMode.UNDETERMINED
    if padding_mode in (PaddingMode.ZERO, PaddingMode.NEG_ZERO):
        return 0
    if padding_mode is PaddingMode.UNDETERMINED:
        info = np.iinfo(D.storage_dtype(dtype))
        return INT_SENTINEL if info.min <= INT_SENTINEL else info.max
    raise TileValueError(f"Padding mode {padding_mode} is not valid for an integer array of dtype {dtype}")


def _region(view_shape, starts, tshape, what: str):
    """Slices of the in-bounds part and its extent per dimension; raises for a fully out-of-bounds tile."""
    src, dst, partial = [], [], False
    for d, (n, s, t) in enumerate(zip(view_shape, starts, tshape)):
        if s < 0:
            raise IndexError(f"{what}: negative tile index in dimension {d} (element offset {s})")
        stop = min(s + t, n)
        if stop <= s:
            raise IndexError(
                f"{what}: the tile at element offsets {tuple(starts)} with shape {tuple(tshape)} lies "
                f"entirely "
                f"outside the array of shape {tuple(view_shape)} (undefined behaviour on the GPU)"
            )
        partial |= stop - s < t
        src.append(slice(s, stop))
        dst.append(slice(0, stop - s))
    return tuple(src), tuple(dst), partial


def load_tile(arr: CpuArray, idx, tshape, perm, padding_mode, check_bounds, steps=None, what="load"):
    view = _view(arr, perm)
    steps = tshape if steps is None else steps
    starts = tuple(i * s for i, s in zip(idx, steps))
    src, dst, partial = _region(view.shape, starts, tshape, what)
    if partial:
        if check_bounds is False:
            raise IndexError(f"{what} with check_bounds=False: the tile at element offsets {starts} "
                             f"with shape {tuple(tshape)} crosses the end of the array of shape {view.shape}")
        out = np.full(tshape, pad_value(padding_mode, arr._dt), dtype=view.dtype)
        out[dst] = view[src]
    else:
        out = view[src].copy()
    return Tile(out, arr._dt)


def store_tile(arr: CpuArray, idx, values: np.ndarray, perm, check_bounds, steps=None, what="store"):
    view = _view(arr, perm)
    tshape = values.shape
    steps = tshape if steps is None else steps
    starts = tuple(i * s for i, s in zip(idx, steps))
    src, dst, partial = _region(view.shape, starts, tshape, what)
    if partial and check_bounds is False:
        raise IndexError(f"{what} with check_bounds=False: the tile at element offsets {starts} with shape "
                         f"{tuple(tshape)} crosses the end of the array of shape {view.shape}")
    view[src] = values[dst]


def _stored_values(arr: CpuArray, tile, ndim: int) -> np.ndarray:
    """The tile's values in the array's dtype (cuTile's implicit widening cast), at least 1 element per
    dim."""
    if isinstance(tile, Tile) and not tile._loose:
        v = D.convert(tile._a, tile._dt, arr._dt)
    else:
        v = values_as(tile, arr._dt)
        v = v.astype(D.storage_dtype(arr._dt)) if arr._dt != ct.tfloat32 else v
    if v.dtype != arr._np.dtype:
        v = v.astype(arr._np.dtype)
    if v.ndim == 0:
        v = v.reshape((1,) * ndim)
    elif v.ndim != ndim:
        raise TileTypeError(f"Tile of rank {v.ndim} cannot be stored into an array of rank {ndim}")
    return v


# ------------------------------------------------------------------------------------------------------------
# load / store
# ------------------------------------------------------------------------------------------------------------
@op("load")
def load(array, /, index, shape, *, order="C", padding_mode=PaddingMode.UNDETERMINED, check_bounds=True,
         latency=None, allow_tma=None, memory_order=None, memory_scope=None):
    arr = _array(array)
    nd = arr._np.ndim
    idx = _index(index, nd)
    tshape = const_shape(shape)
    scalar = tshape == ()
    if scalar:
        tshape = (1,) * nd
    if len(tshape) != nd:
        raise TileTypeError(f"Expected shape length to be {nd}, got {len(tshape)}")
    check_pow2_shape(tshape)
    t = load_tile(arr, idx, tshape, _order(order, nd), padding_mode, check_bounds)
    if scalar:
        t = Tile(t._a.reshape(()), t._dt)
    return t


@op("store")
def store(array, /, index, tile, *, order="C", check_bounds=True, latency=None, allow_tma=None,
          memory_order=None, memory_scope=None):
    arr = _array(array)
    nd = arr._np.ndim
    idx = _index(index, nd)
    values = _stored_values(arr, tile, nd)
    store_tile(arr, idx, values, _order(order, nd), check_bounds)


@op("num_tiles")
def num_tiles(array, /, axis, shape, order="C"):
    arr = _array(array)
    nd = arr._np.ndim
    perm = _order(order, nd)
    tshape = const_shape(shape)
    axis = normalize_axis(axis, nd)
    n = arr._np.shape[perm[axis]]
    return scalar_tile(-(-n // tshape[axis]))


# ------------------------------------------------------------------------------------------------------------
# Array methods and tiled views
# ------------------------------------------------------------------------------------------------------------
@op("Array.slice")
def array_slice(self, axis, start, stop):
    arr = _array(self)
    nd = arr._np.ndim
    axis = normalize_axis(axis, nd)
    start, stop = const_int(start, "start"), const_int(stop, "stop")
    n = arr._np.shape[axis]
    if not (0 <= start <= stop <= n):
        raise IndexError(f"Array.slice({axis}, {start}, {stop}) is out of range for a dimension of size {n}")
    sl = [slice(None)] * nd
    sl[axis] = slice(start, stop)
    return CpuArray(arr._np[tuple(sl)], arr._dt, arr._index_dtype)


class CpuTiledView(ct.TiledView):
    """``Array.tiled_view(tile_shape, padding_mode, traversal_steps)`` on the CPU."""

    def __init__(self, arr: CpuArray, tile_shape, padding_mode, steps):
        self._arr = arr
        self._tile_shape = tile_shape
        self._padding_mode = padding_mode
        self._steps = steps

    @property
    def dtype(self):
        return self._arr._dt

    @property
    def tile_shape(self):
        return self._tile_shape

    @property
    def traversal_steps(self):
        return self._steps if self._steps is not None else self._tile_shape


@op("Array.tiled_view")
def tiled_view(self, tile_shape, *, padding_mode=PaddingMode.UNDETERMINED, traversal_steps=None):
    arr = _array(self)
    tshape = const_shape(tile_shape)
    if len(tshape) != arr._np.ndim:
        raise TileTypeError(f"Expected tile_shape length to be {arr._np.ndim}, got {len(tshape)}")
    check_pow2_shape(tshape)
    steps = None if traversal_steps is None else const_shape(traversal_steps)
    return CpuTiledView(arr, tshape, padding_mode, steps)


@op("TiledView.num_tiles")
def tv_num_tiles(self, axis):
    axis = normalize_axis(axis, len(self._tile_shape))
    n = self._arr._np.shape[axis]
    t = self._tile_shape[axis]
    if self._steps is None:
        return scalar_tile(-(-n // t))
    if self._steps[axis] == t:
        return scalar_tile(-(-n // t))
    raise NotImplementedError(
        "cuda.tile.TiledView.num_tiles with traversal_steps other than the tile shape is not supported "
        "by the CPU executor"
    )


@op("TiledView.load")
def tv_load(self, index, *, check_bounds=True, latency=None, allow_tma=None):
    nd = len(self._tile_shape)
    return load_tile(self._arr, _index(index, nd), self._tile_shape, tuple(range(nd)), self._padding_mode,
                     check_bounds, self._steps, "TiledView.load")


@op("TiledView.store")
def tv_store(self, index, tile, *, check_bounds=True, latency=None, allow_tma=None):
    nd = len(self._tile_shape)
    values = _stored_values(self._arr, tile, nd)
    store_tile(self._arr, _index(index, nd), values, tuple(range(nd)), check_bounds, self._steps,
               "TiledView.store")


def _tv_rmw(fn, name):
    def impl(self, index, update, /):
        nd = len(self._tile_shape)
        idx = _index(index, nd)
        view = self._arr._np
        steps = self._steps or self._tile_shape
        starts = tuple(i * s for i, s in zip(idx, steps))
        src, dst, _ = _region(view.shape, starts, self._tile_shape, name)
        upd = _stored_values(self._arr, update, nd)
        upd = np.broadcast_to(upd, self._tile_shape)
        view[src] = fn(view[src], upd[dst])

    impl.__name__ = name
    return impl


for _n, _f in (("add", np.add), ("max", np.maximum), ("min", np.minimum), ("and", np.bitwise_and),
               ("or", np.bitwise_or), ("xor", np.bitwise_xor)):
    op(f"TiledView.atomic_store_{_n}")(_tv_rmw(_f, f"TiledView.atomic_store_{_n}"))


# ------------------------------------------------------------------------------------------------------------
# gather / scatter / atomics (element indices)
# ------------------------------------------------------------------------------------------------------------
def _element_indices(arr: CpuArray, indices, extra=()):
    nd = arr._np.ndim
    items = tuple(indices) if isinstance(indices, tuple | list) else (indices,)
    if len(items) != nd:
        raise TileTypeError(f"Expected {nd} index tiles for an array of rank {nd}, got {len(items)}")
    idx = [np.asarray(as_tile(i)._a).astype(np.int64) for i in items]
    extra_arrays = [None if e is None else e for e in extra]
    shapes = [i.shape for i in idx] + [np.shape(e) for e in extra_arrays if e is not None]
    shape = np.broadcast_shapes(*shapes)
    idx = [np.broadcast_to(i, shape) for i in idx]
    valid = np.ones(shape, dtype=bool)
    for d, i in enumerate(idx):
        valid &= (i >= 0) & (i < arr._np.shape[d])
    return idx, valid, shape


def _mask(mask, shape):
    if mask is None:
        return np.ones(shape, dtype=bool)
    m = as_tile(mask)
    return np.broadcast_to(m._a if D.is_bool(m._dt) else m._a != 0, shape)


@op("gather")
def gather(array, indices, /, *, mask=None, padding_value=0, check_bounds=True, latency=None):
    arr = _array(array)
    m = None if mask is None else as_tile(mask)._a
    idx, valid, shape = _element_indices(arr, indices, (m,))
    inb = valid.copy()
    valid &= _mask(mask, shape)
    if check_bounds is False and not inb[_mask(mask, shape)].all():
        raise IndexError("gather with check_bounds=False: an index is out of bounds")
    pad = values_as(padding_value, arr._dt)
    out = np.empty(shape, dtype=arr._np.dtype)
    out[...] = pad.astype(arr._np.dtype) if arr._dt != ct.tfloat32 else pad
    sel = tuple(i[valid] for i in idx)
    out[valid] = arr._np[sel]
    return Tile(out, arr._dt)


@op("scatter")
def scatter(array, indices, value, /, *, mask=None, check_bounds=True, latency=None):
    arr = _array(array)
    m = None if mask is None else as_tile(mask)._a
    v = value._a if isinstance(value, Tile) else None
    idx, valid, shape = _element_indices(arr, indices, (m, v))
    inb = valid.copy()
    valid &= _mask(mask, shape)
    if check_bounds is False and not inb[_mask(mask, shape)].all():
        raise IndexError("scatter with check_bounds=False: an index is out of bounds")
    vals = np.broadcast_to(_stored_values_any(arr, value), shape)
    arr._np[tuple(i[valid] for i in idx)] = vals[valid]


def _stored_values_any(arr, value):
    if isinstance(value, Tile) and not value._loose:
        v = D.convert(value._a, value._dt, arr._dt)
    else:
        v = values_as(value, arr._dt)
    return v.astype(arr._np.dtype) if v.dtype != arr._np.dtype else v


def _atomic(name, fn):
    def impl(array, indices, *operands, check_bounds=True, memory_order=None, memory_scope=None):
        arr = _array(array)
        ops = [_stored_values_any(arr, o) for o in operands]
        idx, valid, shape = _element_indices(arr, indices, tuple(ops))
        if not valid.all():
            raise IndexError(f"{name}: an index is out of bounds")
        ops = [np.broadcast_to(o, shape) for o in ops]
        old = np.empty(shape, dtype=arr._np.dtype)
        # sequential semantics, one element at a time, in row-major order of the index tile
        for pos in np.ndindex(*shape):
            where = tuple(int(i[pos]) for i in idx)
            cur = arr._np[where]
            old[pos] = cur
            arr._np[where] = fn(cur, *(o[pos] for o in ops))
        return Tile(old, arr._dt)

    impl.__name__ = name
    return impl


op("atomic_add")(_atomic("atomic_add", lambda c, u: c + u))
op("atomic_max")(_atomic("atomic_max", lambda c, u: max(c, u)))
op("atomic_min")(_atomic("atomic_min", lambda c, u: min(c, u)))
op("atomic_and")(_atomic("atomic_and", lambda c, u: c & u))
op("atomic_or")(_atomic("atomic_or", lambda c, u: c | u))
op("atomic_xor")(_atomic("atomic_xor", lambda c, u: c ^ u))
op("atomic_xchg")(_atomic("atomic_xchg", lambda c, u: u))
op("atomic_cas")(_atomic("atomic_cas", lambda c, e, d: d if c == e else c))
