"""Run a kernel's Python function under tile-code rules: a copy whose globals give builtins tile meanings.

cuTile compiles ``range`` as a runtime loop whose induction variable is a strictly typed int32 scalar, and
maps the builtins ``min``, ``max``, ``abs`` and ``print`` on tiles to ``ct.minimum``, ``ct.maximum``,
``ct.abs`` and ``ct.print``. Plain Python would give Python ints and compare tiles with ``__bool__``. So the
executor calls a *copy* of the kernel function (same code object, same line numbers) whose globals add these
names; helper functions the kernel reaches through its globals or closure are copied the same way
(recursively), and ``ct.static_iter(range(n))`` still yields plain (constant) ints.
"""

from __future__ import annotations

import builtins
import types
from types import FunctionType

import cuda.tile as ct
import numpy as np
from cuda.tile._exception import TileTypeError
from cuda.tile._execution import is_function_wrapper, is_stub

from ._carry import RUNTIME_HELPERS, transformed_code
from ._tile import Tile, scalar_tile

__all__ = ["TypedRange", "FunctionPatcher"]

_SKIP_MODULE_PREFIXES = ("cuda.", "numpy", "torch", "ml_dtypes", "mamba2_tutorial.executor", "builtins")


class TypedRange:
    """``range`` in tile code: yields strictly typed 0-d int32 tiles (int64 if a bound is int64)."""

    __slots__ = ("args", "dtype")

    def __init__(self, *args):
        if not 1 <= len(args) <= 3:
            raise TileTypeError(f"Invalid number of arguments: {len(args)}")
        dtype = ct.int32
        vals = []
        for a in args:
            if isinstance(a, Tile):
                if a._a.ndim != 0 or a._dt not in (ct.int8, ct.int16, ct.int32, ct.int64):
                    raise TileTypeError(f"range() bounds must be signed integer scalars, got {a!r}")
                if a._dt == ct.int64:
                    dtype = ct.int64
                vals.append(int(a._a))
            elif isinstance(a, int | np.integer) and not isinstance(a, bool):
                vals.append(int(a))
            else:
                raise TileTypeError(f"range() bounds must be signed integer scalars, got {a!r}")
        if len(vals) == 3 and vals[2] <= 0:
            raise TileTypeError(f"Step must be positive, got {vals[2]}")
        self.args = tuple(vals)
        self.dtype = dtype

    def __iter__(self):
        dt = self.dtype
        for v in builtins.range(*self.args):
            yield scalar_tile(v, dt)

    def python_range(self) -> range:
        return builtins.range(*self.args)


def _static_iter(iterable):
    if isinstance(iterable, TypedRange):
        return iterable.python_range()
    return iterable


def _has_tile(args) -> bool:
    return any(isinstance(a, Tile) for a in args)


def _tile_min(*args, **kwargs):
    if len(args) >= 2 and not kwargs and _has_tile(args):
        r = args[0]
        for a in args[1:]:
            r = ct.minimum(r, a)
        return r
    return builtins.min(*args, **kwargs)


def _tile_max(*args, **kwargs):
    if len(args) >= 2 and not kwargs and _has_tile(args):
        r = args[0]
        for a in args[1:]:
            r = ct.maximum(r, a)
        return r
    return builtins.max(*args, **kwargs)


def _tile_abs(x):
    return ct.abs(x) if isinstance(x, Tile) else builtins.abs(x)


def _tile_print(*args, sep=" ", end="\n", **kwargs):
    if kwargs:
        return builtins.print(*args, sep=sep, end=end, **kwargs)
    return ct.print(*args, sep=sep, end=end)


class _TileModule(types.ModuleType):
    """``cuda.tile`` as seen from tile code on the CPU: everything the same, except ``static_iter``."""


def _make_ct_proxy():
    m = _TileModule(ct.__name__, ct.__doc__)
    m.__dict__.update({k: v for k, v in vars(ct).items() if k not in ("__name__", "__doc__")})
    m.static_iter = _static_iter
    return m


_CT_PROXY = _make_ct_proxy()

TILE_BUILTINS = {
    "range": TypedRange,
    "min": _tile_min,
    "max": _tile_max,
    "abs": _tile_abs,
    "print": _tile_print,
}


def _referenced_names(code) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _referenced_names(c)
    return names


def _is_user_function(v) -> bool:
    if not isinstance(v, FunctionType):
        return False
    mod = getattr(v, "__module__", "") or ""
    return not mod.startswith(_SKIP_MODULE_PREFIXES)


class FunctionPatcher:
    """Makes (and memoizes, for one launch) tile-code copies of functions."""

    def __init__(self):
        self._memo: dict = {}

    def __call__(self, fn: FunctionType) -> FunctionType:
        done = self._memo.get(fn)
        if done is not None:
            return done
        g = dict(fn.__globals__)
        g.update(TILE_BUILTINS)
        g.update(RUNTIME_HELPERS)
        values = {}  # free variable name -> value (cells may be empty)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                values[name] = cell.cell_contents
            except ValueError:
                pass
        module_code = transformed_code(fn)
        if module_code is None:
            cells = tuple(types.CellType() for _ in fn.__code__.co_freevars)
            new = FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, cells or None)
        else:
            # the kernel rewritten so loop-carried / branch-merged variables become strict (see _carry)
            scope: dict = {}
            exec(module_code, g, scope)
            new = scope["__cpu_tile_outer__"](*(None for _ in fn.__code__.co_freevars))
            new.__defaults__ = fn.__defaults__
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__dict__.update(fn.__dict__)
        self._memo[fn] = new
        # fill the closure and globals after memoizing, so that recursion terminates
        for name, cell in zip(new.__code__.co_freevars, new.__closure__ or ()):
            if name in values:
                v = values[name]
                cell.cell_contents = self(v) if self._wants_patch(v) else v
        for name in _referenced_names(fn.__code__):
            if name not in g:
                continue
            v = g[name]
            if v is ct:
                g[name] = _CT_PROXY
            elif v is ct.static_iter:
                g[name] = _static_iter
            elif self._wants_patch(v):
                g[name] = self(v)
        return new

    @staticmethod
    def _wants_patch(v) -> bool:
        if is_function_wrapper(v) and not is_stub(v):
            return False  # @ct.function helpers go through the dispatch hook, which patches them then
        return _is_user_function(v)

