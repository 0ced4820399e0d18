"""The grid loop: convert the launch arguments, type-check, then run the kernel function once per block."""

from __future__ import annotations

import sys

import cuda.tile as ct
import numpy as np

from . import _dtypes as D
from ._mode import CpuMode
from ._patch import FunctionPatcher
from ._tile import CpuArray, scalar_tile
from ._typecheck import ArgSpec, typecheck

__all__ = ["run_kernel", "block_ids", "to_numpy"]

MAX_GRID_DIM = 2**24 - 1


def _normalize_grid(grid) -> tuple[int, int, int]:
    if isinstance(grid, int):
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    if not 1 <= len(grid) <= 3:
        raise ValueError(f"grid must have 1 to 3 dimensions, got {grid}")
    for g in grid:
        if not 1 <= g <= MAX_GRID_DIM:
            raise ValueError(f"grid dimensions must be between 1 and {MAX_GRID_DIM}, got {grid}")
    return grid + (1,) * (3 - len(grid))


def block_ids(grid, block_order: str = "sequential", seed: int | None = None) -> list[tuple[int, int, int]]:
    """The block ids in execution order: x fastest, then y, then z; or a seeded random permutation."""
    gx, gy, gz = _normalize_grid(grid)
    ids = [(x, y, z) for z in range(gz) for y in range(gy) for x in range(gx)]
    if block_order == "random":
        rng = np.random.default_rng(seed)
        ids = [ids[i] for i in rng.permutation(len(ids))]
    elif block_order == "reversed":
        ids.reverse()
    elif block_order != "sequential":
        raise ValueError(f"block_order must be 'sequential', 'random' or 'reversed', got {block_order!r}")
    return ids


def to_numpy(x) -> np.ndarray:
    """A NumPy view (sharing memory) of a CPU torch tensor or NumPy array; bf16/fp8 via ml_dtypes views."""
    if isinstance(x, np.ndarray):
        return x
    import torch

    if isinstance(x, torch.Tensor):
        if x.device.type != "cpu":
            raise ValueError(f"the CPU executor needs CPU tensors, got one on {x.device}")
        ctd = D.ct_dtype_of_torch(x.dtype)
        sd = D.storage_dtype(ctd)
        if sd.kind == "V" or sd.type.__module__.startswith("ml_dtypes"):
            carrier = {1: torch.uint8, 2: torch.int16}[sd.itemsize]
            return x.view(carrier).numpy().view(sd)
        return x.numpy()
    raise TypeError(f"expected a torch tensor or NumPy array, got {type(x).__name__}")


def _is_array(x) -> bool:
    if isinstance(x, np.ndarray | CpuArray):
        return True
    mod = type(x).__module__
    return mod.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "shape")


def _array_arg(x, ann):
    a = x._np if isinstance(x, CpuArray) else to_numpy(x)
    arr_ann = getattr(ann, "array", None) if ann is not None else None
    index_dtype = getattr(arr_ann, "index_dtype", ct.int32) if arr_ann is not None else ct.int32
    ctd = D.ct_dtype_of_numpy(a.dtype)
    static_shape = tuple(d % a.ndim for d in getattr(arr_ann, "static_shape_dims", ())) if a.ndim else ()
    static_stride = tuple(d % a.ndim for d in getattr(arr_ann, "static_stride_dims", ())) if a.ndim else ()
    arr = CpuArray(a, ctd, index_dtype, static_shape, static_stride)
    shape_c = (tuple(a.shape[d] if d in static_shape else None for d in range(a.ndim))
               if static_shape else None)
    stride_c = (tuple(a.strides[d] // a.itemsize if d in static_stride else None for d in range(a.ndim))
                if static_stride else None)
    spec = ArgSpec("array", ctd, a.ndim, index_dtype, shape_constant=shape_c, stride_constant=stride_c)
    return arr, spec


def _convert(x, ann):
    """(value the kernel sees, ArgSpec for the type check) for one launch argument."""
    if ann is not None and getattr(ann, "constant", False):
        return x, ArgSpec("constant", value=(type(x).__name__, x))
    if ann is not None and getattr(ann, "KIND", "leaf") != "leaf":
        items = tuple(_convert(v, _tuple_ann(ann, i)) for i, v in enumerate(x))
        return tuple(v for v, _ in items), ArgSpec("tuple", value=tuple(s for _, s in items))
    if _is_array(x):
        return _array_arg(x, ann)
    if isinstance(x, bool):
        return scalar_tile(x, ct.bool_), ArgSpec("scalar", ct.bool_)
    if isinstance(x, int):
        scal = getattr(ann, "scalar", None) if ann is not None else None
        dt = getattr(scal, "dtype", ct.int32) if scal is not None else ct.int32
        info = np.iinfo(D.storage_dtype(dt))
        if not info.min <= x <= info.max:
            raise OverflowError(f"integer argument {x} does not fit the kernel's {dt} scalar parameter")
        return scalar_tile(x, dt), ArgSpec("scalar", dt)
    if isinstance(x, float):
        return scalar_tile(x, ct.float32), ArgSpec("scalar", ct.float32)
    if isinstance(x, list):
        if not x or not all(_is_array(v) for v in x):
            raise TypeError("list kernel arguments must be non-empty lists of arrays")
        items = [_array_arg(v, getattr(ann, "list", None) and getattr(ann.list, "element", None)) for v in x]
        specs = {s for _, s in items}
        if len(specs) != 1:
            raise TypeError("all arrays in a list argument must have one dtype and rank")
        return [a for a, _ in items], ArgSpec("list", value=(items[0][1],))
    if isinstance(x, tuple):
        items = tuple(_convert(v, None) for v in x)
        return tuple(v for v, _ in items), ArgSpec("tuple", value=tuple(s for _, s in items))
    raise TypeError(f"unsupported kernel argument of type {type(x).__name__}: {x!r}")


def _tuple_ann(ann, i):
    if getattr(ann, "KIND", "") == "homogeneous_tuple":
        return ann.each
    return ann.items[i]


def run_kernel(kernel, grid, args, *, block_order: str = "sequential", seed: int | None = None,
               check_types: bool = True) -> None:
    """Run a ``@ct.kernel`` on the CPU: type-check with cuTile's front end, then call the kernel's function
    once per block with cuTile's dispatch hook routed to NumPy. Arrays (CPU torch tensors or NumPy arrays)
    are written in place, as with ``ct.launch``.

    Args:
        kernel: a ``cuda.tile.kernel``.
        grid: 1 to 3 positive ints.
        args: tuple of kernel arguments (arrays, Python ints/floats/bools, ``ct.Constant`` values,
            lists/tuples).
        block_order: ``"sequential"`` (x fastest), ``"random"`` (seeded by ``seed``) or ``"reversed"``; the
            GPU runs blocks in no particular order, so a kernel must give the same result for all three.
        check_types: run cuTile's static type check first (cached per signature). Leave it on.
    """
    if not isinstance(kernel, ct.kernel):
        raise TypeError(f"expected a @ct.kernel function, got {type(kernel).__name__}")
    if not isinstance(args, tuple):
        raise TypeError(f"kernel arguments must be a tuple, got {type(args).__name__}")
    grid3 = _normalize_grid(grid)
    anns = kernel._annotated_function.parameter_annotations
    if len(args) != len(anns):
        raise TypeError(f"{kernel._pyfunc.__name__}() takes {len(anns)} arguments, {len(args)} given")
    converted = [_convert(a, ann) for a, ann in zip(args, anns)]
    kargs = tuple(v for v, _ in converted)
    if check_types:
        typecheck(kernel, tuple(s for _, s in converted))

    patcher = FunctionPatcher()
    fn = patcher(kernel._pyfunc)
    mode = CpuMode(grid3, patcher)
    order = block_ids(grid3, block_order, seed)
    with np.errstate(all="ignore"), mode.as_current():
        for b in order:
            mode.block_id = b
            try:
                fn(*kargs)
            except Exception as exc:
                _note(exc, f"while running block {b} of grid {grid3} of kernel "
                           f"{kernel._pyfunc.__name__!r} on the CPU executor")
                raise


def _note(exc: BaseException, msg: str) -> None:
    if sys.version_info >= (3, 11):
        exc.add_note(msg)
