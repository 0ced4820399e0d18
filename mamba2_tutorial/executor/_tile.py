"""Tile and array objects the CPU executor hands to a kernel.

``Tile`` subclasses ``cuda.tile.Tile`` so cuTile's own operator methods (``+``, ``@``, ``[:, None]``, ...)
accept it and route through the dispatch hook into the executor. It holds ``(values: np.ndarray, dtype:
ct.DType, loose: bool)``; values are stored in the dtype's NumPy storage dtype (see ``_dtypes``). Tiles are
immutable: every operation returns a new tile and loads copy.

``CpuArray`` subclasses ``cuda.tile.Array``: a NumPy view of the kernel argument (writes go to the caller's
tensor). Its ``shape``/``strides`` are strictly typed int32 scalars, as on the GPU.
"""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileTypeError

from . import _dtypes as D

__all__ = ["Tile", "CpuArray", "make_tile", "scalar_tile", "format_tile"]


class Tile(ct.Tile):
    """A tile on the CPU: a NumPy array, its cuTile dtype, and whether it is a loosely typed constant."""

    __slots__ = ("_a", "_dt", "_loose")

    def __init__(self, values: np.ndarray, dtype, loose: bool = False):
        self._a = values
        self._dt = dtype
        self._loose = loose

    # --- constant attributes (cuTile: compile-time constants) --------------------------------------------
    @property
    def dtype(self):
        return self._dt

    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def values(self) -> np.ndarray:
        """The tile's values (a read-only NumPy view, for debugging and tests)."""
        v = self._a.view()
        v.flags.writeable = False
        return v

    # --- Python protocol ----------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        if self._a.ndim != 0:
            raise TileTypeError(f"Expected a scalar value, but given value has type {self.describe()}")
        return bool(self._a)

    def __index__(self) -> int:
        if self._a.ndim != 0 or not (D.is_int(self._dt) or D.is_bool(self._dt)):
            raise TileTypeError(f"Only a 0-d integer tile can be used as an index, got {self.describe()}")
        return int(self._a)

    def __int__(self) -> int:
        return self.__index__()

    def __float__(self) -> float:
        if self._a.ndim != 0:
            raise TileTypeError(f"Expected a scalar value, got {self.describe()}")
        return float(self._a)

    def __abs__(self):
        return ct.abs(self)

    def __pos__(self):
        return self

    __hash__ = None  # like ct.Tile: __eq__ is elementwise

    def __setitem__(self, key, value):
        raise TileTypeError("Tiles are immutable")

    def __iter__(self):
        raise TileTypeError("Tiles are not iterable; use extract() or item()")

    def __len__(self):
        raise TileTypeError("len() of a tile is not supported; use tile.shape")

    def __array__(self, dtype=None, copy=None):
        a = self._a
        if a.dtype.type.__module__.startswith("ml_dtypes"):
            a = a.astype(np.float32)
        return a.astype(dtype) if dtype is not None else a.copy()

    def __str__(self) -> str:
        return format_tile(self)

    def __format__(self, spec: str) -> str:
        return format_tile(self, spec)

    def __repr__(self) -> str:
        # cuTile prints tiles (also inside tuples) as nested lists: [0, 1, 2, 3]
        return format_tile(self)

    def describe(self) -> str:
        """``Tile[float32,(16, 8)]``: dtype and shape, for error messages."""
        return f"Tile[{self._dt},{self._a.shape}]"


def _fmt_scalar(v, dtype, spec: str = "") -> str:
    if D.is_bool(dtype):
        return format(int(bool(v)), spec) if spec else ("1" if v else "0")
    if D.is_float(dtype):
        f = float(v)
        if spec:
            return format(f, spec)
        return str(np.float64(f)) if dtype == ct.float64 else str(np.float32(f))
    return format(int(v), spec)


def format_tile(t: Tile, spec: str = "") -> str:
    """Render a tile as cuTile's print does: ``42`` for 0-d, ``[0, 1, 2, 3]`` and nested lists otherwise;
    a format ``spec`` (``f"{t:.1f}"``) applies to each element."""
    a = t._a

    def rec(x):
        if x.ndim == 0:
            return _fmt_scalar(x[()], t._dt, spec)
        return "[" + ", ".join(rec(x[i]) for i in range(x.shape[0])) + "]"

    return rec(a)


def make_tile(values: np.ndarray, dtype) -> Tile:
    """A strict tile of ``dtype`` from values already in (or castable to) the storage dtype."""
    sd = D.storage_dtype(dtype)
    if values.dtype != sd:
        values = values.astype(sd)
    return Tile(values, dtype)


_INT32 = np.dtype(np.int32)


def scalar_tile(value, dtype=ct.int32) -> Tile:
    """A strictly typed 0-d tile (e.g. ``bid``, loop variables, array shapes)."""
    return Tile(np.array(value, dtype=D.storage_dtype(dtype)), dtype)


class CpuArray(ct.Array):
    """A kernel array argument on the CPU: a NumPy view of the caller's memory plus its cuTile dtype."""

    __slots__ = ("_np", "_dt", "_shape_tiles", "_index_dtype", "_static_shape", "_static_stride")

    def __init__(self, values: np.ndarray, dtype, index_dtype=ct.int32, static_shape_dims=(),
                 static_stride_dims=()):
        self._np = values
        self._dt = dtype
        self._index_dtype = index_dtype
        self._static_shape = tuple(static_shape_dims)
        self._static_stride = tuple(static_stride_dims)
        self._shape_tiles = None

    @property
    def dtype(self):
        return self._dt

    @property
    def ndim(self) -> int:
        return self._np.ndim

    @property
    def shape(self) -> tuple:
        if self._shape_tiles is None:
            self._shape_tiles = tuple(
                int(n) if d in self._static_shape else scalar_tile(n, self._index_dtype)
                for d, n in enumerate(self._np.shape)
            )
        return self._shape_tiles

    @property
    def strides(self) -> tuple:
        item = self._np.itemsize
        return tuple(
            int(s // item) if d in self._static_stride else scalar_tile(s // item, self._index_dtype)
            for d, s in enumerate(self._np.strides)
        )

    @property
    def values(self) -> np.ndarray:
        return self._np

    def __getitem__(self, key):
        raise TileTypeError("Arrays are not directly subscriptable. Use load() or gather() instead.")

    def __setitem__(self, key, value):
        raise TileTypeError("Arrays are not directly subscriptable. Use store() or scatter() instead.")

    def __repr__(self) -> str:
        return f"CpuArray[{self._dt},{self._np.shape}]"
