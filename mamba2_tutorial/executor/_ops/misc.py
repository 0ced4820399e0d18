"""Debugging and compile-time helpers: print/printf (prefixed with the block id), assert_, static_eval,
static_assert, ensure_constant, assume_divisible_by, and the PDL grid-dependency ops (no-ops when blocks run
one after another)."""

from __future__ import annotations

import re
import sys

import numpy as np
from cuda.tile._dispatch_mode import DispatchMode
from cuda.tile._exception import TileStaticAssertionError

from .. import _dtypes as D
from .._registry import op
from .._tile import Tile, format_tile
from ._common import as_tile


def _emit(text: str) -> None:
    """Write ``text``, starting each new output line with the block id (``[block (x, y, z)] ``)."""
    mode = DispatchMode.get_current()
    prefix = f"[block {mode.block_id}] "
    at_start = getattr(mode, "at_line_start", True)
    out = []
    for piece in text.splitlines(keepends=True):
        if at_start:
            out.append(prefix)
        out.append(piece)
        at_start = piece.endswith("\n")
    mode.at_line_start = at_start
    sys.stdout.write("".join(out))


def _text(v) -> str:
    if isinstance(v, Tile):
        return format_tile(v)
    return str(v)


@op("print")
def print_(*args, sep=" ", end="\n"):
    _emit(sep.join(_text(a) for a in args) + end)


_SPEC = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(hh|h|ll|l|z|j|t|L)?([diuoxXeEfFgGaAc%])")


@op("printf")
def printf(format, *args):
    it = iter(args)

    def sub(m):
        flags, _length, conv = m.groups()
        if conv == "%":
            return "%"
        t = as_tile(next(it))
        conv = {"u": "d", "i": "d", "a": "e", "A": "E"}.get(conv, conv)
        spec = "%" + flags + conv

        def one(v):
            v = int(v) if conv in "dioxXc" else float(v)
            return spec % v

        if t._a.ndim == 0:
            return one(t._a.item() if not D.is_bool(t._dt) else int(t._a))
        return "[" + ", ".join(one(v) for v in np.asarray(t._a, dtype=np.float64 if D.is_float(t._dt)
                                                          else np.int64).reshape(-1)) + "]"

    _emit(_SPEC.sub(sub, format))


@op("assert_")
def assert_(cond, /, message=None):
    c = as_tile(cond)
    ok = c._a if D.is_bool(c._dt) else c._a != 0
    if not np.all(ok):
        bad = np.argwhere(~np.asarray(ok))
        where = tuple(int(i) for i in bad[0]) if bad.size else ()
        raise AssertionError(f"{message or 'ct.assert_ failed'} (first failing element at {where} of "
                             f"{c._a.shape})")


@op("static_eval")
def static_eval(expr, /):
    return expr


@op("static_assert")
def static_assert(condition, message=None, /):
    if not condition:
        raise TileStaticAssertionError(f"Static assertion failed: {'' if message is None else message}")


@op("ensure_constant")
def ensure_constant(value, /):
    return value


@op("assume_divisible_by")
def assume_divisible_by(x, divisor):
    v = int(x) if isinstance(x, Tile) else x
    if isinstance(v, int) and v % int(divisor):
        raise AssertionError(f"assume_divisible_by({v}, {divisor}) is false: the kernel lied to the compiler")
    return x


@op("grid_dependency_control_wait", "grid_dependency_control_launch_dependents")
def _pdl_noop():
    return None


# Attributes implemented as Python properties on Tile / CpuArray / CpuTiledView; registered too, in case a
# kernel reaches the base class's stub (e.g. ``ct.Tile.dtype.fget(t)``).
def _attr(name):
    def impl(self):
        return getattr(self, name)

    impl.__name__ = name
    return impl


for _cls, _names in (("Tile", ("dtype", "shape", "ndim")), ("Array", ("dtype", "shape", "strides", "ndim")),
                     ("TiledView", ("dtype", "tile_shape", "traversal_steps"))):
    for _n in _names:
        op(f"{_cls}.{_n}")(_attr(_n))


@op("Tile.__index__")
def _tile_index(self):
    return self.__index__()
