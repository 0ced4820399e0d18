"""The static check: cuTile's own front end type-checks the kernel for the launch's signature.

``export_kernel(kernel, [signature], BytesIO(), output_format="tileir_bytecode", bytecode_version="13.4")``
runs cuTile's parser, type inference and lowering to Tile IR bytecode; it needs neither a GPU nor tileiras. It
raises exactly the errors a GPU launch would (``TileTypeError``, ``TileSyntaxError``, ``TileValueError``,
``TileStaticAssertionError``, ...): storing float32 into a float16 array, a non-power-of-two tile shape, an
``if`` on a vector tile, a loop variable whose type changes. Results are cached per (kernel function,
signature).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass

import cuda.tile as ct

__all__ = ["ArgSpec", "typecheck", "clear_cache", "cache_info"]

BYTECODE_VERSION = "13.4"


@dataclass(frozen=True)
class ArgSpec:
    """How one kernel argument looks to the compiler (hashable, so signatures can be cached)."""

    kind: str  # "array" | "scalar" | "constant" | "list" | "tuple"
    dtype: object = None
    ndim: int = 0
    index_dtype: object = None
    value: object = None  # constants: (type name, value); tuples: tuple of ArgSpec; lists: (ArgSpec,)
    shape_constant: tuple | None = None
    stride_constant: tuple | None = None


def _constraint(spec: ArgSpec):
    from cuda.tile.compilation import ArrayConstraint, ListConstraint, ScalarConstraint, TupleConstraint

    if spec.kind == "array":
        return ArrayConstraint(spec.dtype, spec.ndim, index_dtype=spec.index_dtype, stride_lower_bound_incl=0,
                               alias_groups=(), may_alias_internally=False,
                               shape_constant=spec.shape_constant, stride_constant=spec.stride_constant)
    if spec.kind == "scalar":
        return ScalarConstraint(spec.dtype)
    if spec.kind == "constant":
        return spec.value[1]
    if spec.kind == "list":
        return ListConstraint(_constraint(spec.value[0]), alias_groups=(), elements_may_alias=False)
    if spec.kind == "tuple":
        return TupleConstraint(tuple(_constraint(s) for s in spec.value))
    raise ValueError(f"unknown argument kind {spec.kind}")


_CACHE: dict = {}
_LOCK = threading.Lock()
_STATS = {"hits": 0, "misses": 0}


def typecheck(kernel, specs: tuple[ArgSpec, ...]) -> None:
    """Type-check ``kernel`` for arguments described by ``specs``; raise cuTile's own error if it fails."""
    key = (kernel._pyfunc, specs)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        _STATS["hits"] += 1
        if cached is not True:
            raise cached.with_traceback(None)
        return
    _STATS["misses"] += 1
    from cuda.tile.compilation import CallingConvention, KernelSignature, export_kernel

    sig = KernelSignature([_constraint(s) for s in specs], CallingConvention.cutile_python_v2())
    try:
        export_kernel(kernel, [sig], io.BytesIO(), output_format="tileir_bytecode",
                      bytecode_version=BYTECODE_VERSION)
    except ct.TileError as exc:
        with _LOCK:
            _CACHE[key] = exc
        raise exc.with_traceback(None) from None
    with _LOCK:
        _CACHE[key] = True


def clear_cache() -> None:
    with _LOCK:
        _CACHE.clear()


def cache_info() -> dict:
    return dict(_STATS, size=len(_CACHE))
