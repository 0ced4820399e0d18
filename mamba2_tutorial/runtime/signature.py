"""Kernel signatures from example launch arguments, without a GPU.

cuTile compiles a kernel once per *signature*: the dtype and rank of every array argument, the dtype of every
runtime scalar, and the value of every ``ct.Constant`` parameter. ``ct.launch`` derives the signature from the
arguments inside its C extension, which needs a CUDA driver. :func:`kernel_signature` builds the same
information from CPU torch tensors and plain Python values, through cuTile's public ahead-of-time API
(``cuda.tile.compilation``), so that both the CPU executor's type check and the ahead-of-time compile check
(``python -m mamba2_tutorial compile``) can run cuTile's front end on a machine without a GPU.

The mapping follows ``ct.launch``:

- a torch tensor -> ``ArrayConstraint`` (dtype, ndim, int32 shape/strides unless the parameter is annotated
  ``ct.IndexedWithInt64``; what ct.launch's C code specializes on: unit strides, strides that are a multiple
  of 16 bytes, sizes that are a multiple of 16 or equal to 1, 16-byte base alignment, whether elements may
  overlap; see :func:`array_constraint`). ``tests/test_signature_parity.py`` checks it against cuTile's own
  derivation, run on the CPU through a stand-in CUDA driver (``tests/driverless.py``);
- a Python ``int`` -> int32 runtime scalar (int64 under ``ct.ScalarInt64``); ``float`` -> float32;
  ``bool`` -> bool;
- a parameter annotated ``ct.Constant`` -> its plain value, embedded into the compiled code;
- a tuple -> a tuple of the above, a list of tensors -> a list of arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

__all__ = ["TORCH_TO_CT_DTYPE", "array_constraint", "ct_dtype", "kernel_signature"]


def _dtype_table() -> dict:
    import cuda.tile as ct
    import torch

    table = {
        torch.bool: ct.bool_,
        torch.uint8: ct.uint8,
        torch.int8: ct.int8,
        torch.int16: ct.int16,
        torch.int32: ct.int32,
        torch.int64: ct.int64,
        torch.float16: ct.float16,
        torch.bfloat16: ct.bfloat16,
        torch.float32: ct.float32,
        torch.float64: ct.float64,
    }
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            table[getattr(torch, name)] = getattr(ct, name)
    return table


TORCH_TO_CT_DTYPE: dict = {}


def ct_dtype(torch_dtype):
    """The cuTile dtype (``ct.float32``, ...) of a torch dtype; TypeError if cuTile has none."""
    if not TORCH_TO_CT_DTYPE:
        TORCH_TO_CT_DTYPE.update(_dtype_table())
    try:
        return TORCH_TO_CT_DTYPE[torch_dtype]
    except KeyError:
        raise TypeError(f"torch dtype {torch_dtype} has no cuTile equivalent") from None


#: ct.launch specializes strides and shapes of arrays up to this rank (TMA's limit)
_TMA_MAX_NDIM = 5


class _Facts(NamedTuple):
    """What ct.launch's C code reads off one array: per dimension, whether the stride is 1, whether it is a
    multiple of 16 bytes, whether the size is a multiple of 16 or is 1; whether the base pointer is 16-byte
    aligned; whether no two indices address the same element. The items of a list argument share one
    constraint: their facts are AND-ed."""

    stride_one: tuple
    stride_16_bytes: tuple
    shape_16: tuple
    shape_one: tuple
    base_16: bool
    disjoint: bool

    def __and__(self, other: _Facts) -> _Facts:
        return _Facts(*(tuple(x and y for x, y in zip(a, b)) if isinstance(a, tuple) else a and b
                        for a, b in zip(self, other)))


def _elements_disjoint(shape: tuple, strides: tuple) -> bool:
    """Whether no two indices of the array address the same element, by ct.launch's test: sorted by stride,
    every stride is positive and at least the previous stride times the previous size. A broadcast view
    (stride 0) or overlapping windows (``as_strided``) fail it and compile as ``may_alias_internally``."""
    if not shape:
        return True
    pairs = sorted(zip(strides, shape))
    if pairs[0][0] <= 0:
        return False
    return all(cur[0] > 0 and cur[0] >= prev[0] * prev[1] for prev, cur in zip(pairs, pairs[1:]))


def _facts(tensor, name: str, index_dtype) -> _Facts:
    import cuda.tile as ct

    ndim = tensor.dim()
    shape = tuple(int(s) for s in tensor.shape)
    strides = tuple(int(s) for s in tensor.stride())
    if any(s < 0 for s in strides):
        raise ValueError(f"{name}: negative strides are not supported by cuTile (strides {strides})")
    if index_dtype == ct.int32:
        limit = 2**31 - 1
        if any(s > limit for s in shape) or any(s > limit for s in strides):
            raise ValueError(
                f"{name}: shape {shape} / strides {strides} exceed int32; annotate the parameter "
                "ct.IndexedWithInt64"
            )
    # strides and sizes are specialized only up to rank 5; a stride of 0 (broadcast) counts as a multiple
    specialize = ndim <= _TMA_MAX_NDIM
    nbytes = tensor.element_size()
    return _Facts(
        stride_one=tuple(specialize and st == 1 for st in strides),
        stride_16_bytes=tuple(specialize and (st * nbytes) % 16 == 0 for st in strides),
        shape_16=tuple(specialize and sz % 16 == 0 for sz in shape),
        shape_one=tuple(specialize and sz == 1 for sz in shape),
        base_16=tensor.data_ptr() % 16 == 0,
        disjoint=_elements_disjoint(shape, strides),
    )


def _static_axes(dims, ndim: int, what: str, name: str) -> list[int]:
    axes = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise ValueError(f"{name}: {what} contains axis {d}, but the array has rank {ndim}")
        if d % ndim in axes:
            raise ValueError(f"{name}: {what} contains duplicate axis {d} (rank {ndim})")
        axes.append(d % ndim)
    return axes


def array_constraint(tensors, annotation=None, *, name: str = "array"):
    """``ArrayConstraint`` describing ``tensors`` (one tensor, or the items of a list argument) the way
    ``ct.launch`` would.

    ``annotation`` is the parameter's ``ct.ArrayAnnotation`` (or None): it selects int64 indexing and static
    shape/stride dimensions. What the C code records: a unit stride as the constant 1; a stride that is a
    multiple of 16 bytes as "divisible by" 16 bytes counted in elements (8 for 16-bit types, 4 for float32);
    a size that is a multiple of 16 as divisible by 16, a size of 1 as the constant 1; a 16-byte aligned
    base; and whether the elements may overlap. ``tests/test_signature_parity.py`` checks this function
    against cuTile's own C derivation.
    """
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    tensors = list(tensors) if isinstance(tensors, list | tuple) else [tensors]
    first = tensors[0]
    ndim = first.dim()
    index_dtype = ct.int32 if annotation is None else annotation.index_dtype
    facts = _facts(first, name, index_dtype)
    for t in tensors[1:]:
        if t.dtype != first.dtype or t.dim() != ndim:
            raise TypeError(f"{name}: the items of a list must share dtype and rank, got {first.dtype} rank "
                            f"{ndim} and {t.dtype} rank {t.dim()}")
        facts = facts & _facts(t, name, index_dtype)

    static_shape = _static_axes(annotation.static_shape_dims, ndim, "static_shape_dims", name) \
        if annotation is not None else []
    static_stride = _static_axes(annotation.static_stride_dims, ndim, "static_stride_dims", name) \
        if annotation is not None else []
    for d in static_shape:
        sizes = {int(t.shape[d]) for t in tensors}
        if len(sizes) > 1:
            raise ValueError(f"{name}: the arrays of the list vary in static shape at axis {d} "
                             f"({sorted(sizes)})")
    if static_shape:  # an explicit static_shape_dims list is the sole source of static sizes
        shape_constant = tuple(int(first.shape[d]) if d in static_shape else None for d in range(ndim))
    else:  # otherwise every size of 1 is one
        shape_constant = tuple(1 if one else None for one in facts.shape_one)
    if static_stride:
        # an explicit static_stride_dims list is the sole source of static strides (see ct.ArrayAnnotation)
        stride_constant = tuple(int(first.stride(d)) if d in static_stride else None for d in range(ndim))
    else:
        stride_constant = tuple(1 if one else None for one in facts.stride_one)
    bits = first.element_size() * 8
    stride_unit = 128 // bits if 128 % bits == 0 else 1
    return ArrayConstraint(
        ct_dtype(first.dtype),
        ndim,
        index_dtype=index_dtype,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=not facts.disjoint,
        stride_constant=stride_constant,
        shape_constant=shape_constant if any(s is not None for s in shape_constant) else None,
        stride_divisible_by=tuple(stride_unit if ok else 1 for ok in facts.stride_16_bytes),
        shape_divisible_by=tuple(16 if ok and d not in static_shape else 1
                                 for d, ok in enumerate(facts.shape_16)),
        base_addr_divisible_by=16 if facts.base_16 else 1,
    )


def _constraint(value: Any, node, name: str):
    import cuda.tile as ct
    import torch
    from cuda.tile._annotated_function import HeterogeneousTupleNode, HomogeneousTupleNode
    from cuda.tile.compilation import ConstantConstraint, ListConstraint, ScalarConstraint, TupleConstraint

    if isinstance(node, HomogeneousTupleNode | HeterogeneousTupleNode):
        if not isinstance(value, tuple):
            raise TypeError(f"kernel parameter {name!r} is annotated as a tuple, got {type(value).__name__}")
        if isinstance(node, HomogeneousTupleNode):
            nodes = [node.each] * len(value)
        else:
            if len(node.items) != len(value):
                raise TypeError(
                    f"kernel parameter {name!r}: tuple of length {len(value)}, "
                    f"annotation expects {len(node.items)}"
                )
            nodes = list(node.items)
        items = (_constraint(v, n, f"{name}[{i}]") for i, (v, n) in enumerate(zip(value, nodes)))
        return TupleConstraint(tuple(items))

    if node.constant:
        if isinstance(value, torch.Tensor):
            raise TypeError(f"kernel parameter {name!r} is ct.Constant but got a tensor")
        return value if isinstance(value, tuple) else ConstantConstraint(value)
    if isinstance(value, torch.Tensor):
        return array_constraint(value, node.array, name=name)
    if isinstance(value, list):
        if not value or not all(isinstance(v, torch.Tensor) for v in value):
            raise TypeError(f"kernel parameter {name!r}: a list argument must be a non-empty list of tensors")
        element = array_constraint(value, None if node.list is None else node.list.element, name=name)
        # ct.launch does not check the items for overlap: it always lets them alias
        return ListConstraint(element, alias_groups=(), elements_may_alias=True)
    if isinstance(value, tuple):
        return TupleConstraint(tuple(_constraint(v, node, f"{name}[{i}]") for i, v in enumerate(value)))
    if isinstance(value, bool):
        return ScalarConstraint(ct.bool_)
    if isinstance(value, int):
        return ScalarConstraint(ct.int32 if node.scalar is None else node.scalar.dtype)
    if isinstance(value, float):
        return ScalarConstraint(ct.float32)
    if isinstance(value, ct.DType) or isinstance(value, torch.dtype):
        raise TypeError(
            f"kernel parameter {name!r}: a dtype argument must be declared ct.Constant (got {value})"
        )
    raise TypeError(
        f"kernel parameter {name!r}: unsupported argument type {type(value).__name__} "
        "(expected a torch tensor, int, float, bool, tuple, or a ct.Constant value)"
    )


def kernel_signature(kernel, args: Sequence[Any]):
    """The ``cuda.tile.compilation.KernelSignature`` that ``ct.launch(stream, grid, kernel, args)`` would use.

    ``kernel`` is a ``@ct.kernel`` function, ``args`` its launch arguments (CPU or CUDA torch tensors, Python
    scalars, ``ct.Constant`` values). Raises TypeError naming the parameter for a wrong argument count or
    kind.
    """
    from cuda.tile.compilation import CallingConvention, KernelSignature

    annotated = getattr(kernel, "_annotated_function", None)
    if annotated is None:
        raise TypeError(f"expected a @ct.kernel function, got {kernel!r}")
    args = tuple(args)
    params = list(annotated.pysig.parameters)
    kname = annotated.pyfunc.__name__
    if len(args) != len(params):
        raise TypeError(
            f"kernel {kname} takes {len(params)} arguments ({', '.join(params)}), got {len(args)}"
        )
    constraints = [
        _constraint(value, node, f"{kname}.{pname}")
        for value, node, pname in zip(args, annotated.parameter_annotations, params)
    ]
    return KernelSignature(constraints, CallingConvention.cutile_python_v2())
