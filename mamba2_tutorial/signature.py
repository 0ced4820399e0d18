"""Kernel signatures from example launch arguments, without a GPU.

cuTile compiles a kernel once per *signature*: the dtype and rank of every array argument, the dtype of every
runtime scalar, and the value of every ``ct.Constant`` parameter. ``ct.launch`` derives the signature from the
arguments inside its C extension, which needs a CUDA driver. :func:`kernel_signature` builds the same
information from CPU torch tensors and plain Python values, through cuTile's public ahead-of-time API
(``cuda.tile.compilation``), so that both the CPU executor's type check and the ahead-of-time compile check
(``python -m mamba2_tutorial compile``) can run cuTile's front end on a machine without a GPU.

The mapping follows ``ct.launch``:

- a torch tensor -> ``ArrayConstraint`` (dtype, ndim, int32 shape/strides unless the parameter is annotated
  ``ct.IndexedWithInt64``; unit strides, 16-divisible shapes/strides and 16-byte base alignment are recorded
  as the JIT does);
- a Python ``int`` -> int32 runtime scalar (int64 under ``ct.ScalarInt64``); ``float`` -> float32;
  ``bool`` -> bool;
- a parameter annotated ``ct.Constant`` -> its plain value, embedded into the compiled code;
- a tuple -> a tuple of the above, a list of tensors -> a list of arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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


def array_constraint(tensor, annotation=None, *, name: str = "array"):
    """``ArrayConstraint`` describing ``tensor`` the way ``ct.launch`` would.

    ``annotation`` is the parameter's ``ct.ArrayAnnotation`` (or None): it selects int64 indexing and static
    shape/stride dimensions.
    """
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint

    ndim = tensor.dim()
    shape = tuple(int(s) for s in tensor.shape)
    strides = tuple(int(s) for s in tensor.stride())
    if any(s < 0 for s in strides):
        raise ValueError(f"{name}: negative strides are not supported by cuTile (strides {strides})")
    index_dtype = ct.int32 if annotation is None else annotation.index_dtype
    if index_dtype == ct.int32:
        limit = 2**31 - 1
        if any(s > limit for s in shape) or any(s > limit for s in strides):
            raise ValueError(
                f"{name}: shape {shape} / strides {strides} exceed int32; annotate the parameter "
                "ct.IndexedWithInt64"
            )

    def axes(dims):
        return {d % ndim for d in dims} if ndim else set()

    static_shape = axes(annotation.static_shape_dims) if annotation is not None else set()
    static_stride = axes(annotation.static_stride_dims) if annotation is not None else set()
    shape_constant = tuple(shape[d] if d in static_shape else None for d in range(ndim))
    if static_stride:
        # an explicit static_stride_dims list is the sole source of static strides (see ct.ArrayAnnotation)
        stride_constant = tuple(strides[d] if d in static_stride else None for d in range(ndim))
    else:
        stride_constant = tuple(1 if strides[d] == 1 else None for d in range(ndim))
    shape_div = tuple(1 if shape_constant[d] is not None or shape[d] % 16 else 16 for d in range(ndim))
    stride_div = tuple(
        1 if stride_constant[d] is not None or strides[d] % 16 or strides[d] == 0 else 16 for d in range(ndim)
    )
    base_div = 16 if tensor.data_ptr() % 16 == 0 else 1
    return ArrayConstraint(
        ct_dtype(tensor.dtype),
        ndim,
        index_dtype=index_dtype,
        stride_lower_bound_incl=0,
        alias_groups=(),
        may_alias_internally=False,
        stride_constant=stride_constant,
        shape_constant=shape_constant if any(s is not None for s in shape_constant) else None,
        stride_divisible_by=stride_div,
        shape_divisible_by=shape_div,
        base_addr_divisible_by=base_div,
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
        element = array_constraint(value[0], None if node.list is None else node.list.element, name=name)
        return ListConstraint(element, alias_groups=(), elements_may_alias=False)
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
