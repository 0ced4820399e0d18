"""cuTile dtypes on NumPy: storage dtypes, compute dtypes, rounding and conversion.

Every tile stores its values in a NumPy array of the *storage* dtype of its cuTile dtype (float16 ->
np.float16, bfloat16 -> ml_dtypes.bfloat16, tfloat32 -> np.float32 rounded to a 10-bit mantissa, ...).
Arithmetic on narrow floats runs in float32 (the *compute* dtype) and is rounded back to the result dtype, as
the GPU's f16/bf16 units round each result.
"""

from __future__ import annotations

from contextlib import contextmanager

import cuda.tile as ct
import ml_dtypes
import numpy as np
from cuda.tile import _datatype as _dt

__all__ = [
    "STORAGE",
    "wide_floats",
    "is_wide",
    "storage_dtype",
    "compute_dtype",
    "ct_dtype_of_numpy",
    "ct_dtype_of_torch",
    "resolve_dtype",
    "convert",
    "round_tf32",
    "is_float",
    "is_int",
    "is_bool",
    "is_signed",
]

# cuTile dtype -> NumPy storage dtype
STORAGE: dict = {
    ct.bool_: np.dtype(np.bool_),
    ct.int8: np.dtype(np.int8),
    ct.int16: np.dtype(np.int16),
    ct.int32: np.dtype(np.int32),
    ct.int64: np.dtype(np.int64),
    ct.uint8: np.dtype(np.uint8),
    ct.uint16: np.dtype(np.uint16),
    ct.uint32: np.dtype(np.uint32),
    ct.uint64: np.dtype(np.uint64),
    ct.float16: np.dtype(np.float16),
    ct.float32: np.dtype(np.float32),
    ct.float64: np.dtype(np.float64),
    ct.bfloat16: np.dtype(ml_dtypes.bfloat16),
    ct.tfloat32: np.dtype(np.float32),
}
# The narrow floats need a recent ml_dtypes (float8_e5m3fnu arrived in 0.6); an older one (the H200 image)
# simply lacks them, and the executor then rejects those dtypes instead of failing at import.
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e5m3fnu", "float4_e2m1fn"):
    if hasattr(ct, _name) and hasattr(ml_dtypes, _name):
        STORAGE[getattr(ct, _name)] = np.dtype(getattr(ml_dtypes, _name))

# NumPy storage dtype -> cuTile dtype (tfloat32 is never inferred from an array)
_FROM_NUMPY = {v: k for k, v in STORAGE.items() if k is not ct.tfloat32}

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)

_WIDE = False


def is_wide() -> bool:
    """Whether :func:`wide_floats` is on."""
    return _WIDE


@contextmanager
def wide_floats():
    """The float64 tier: inside the block, float32 in a kernel is held and computed in float64, and a float64
    array argument enters a kernel as a float32 array (so a kernel written for float32 type-checks as it does
    on the GPU). Kernels then run the same code in double precision: what ``torch.autograd.gradcheck``'s
    finite differences need. CPU only; not reentrant."""
    global _WIDE, _F32
    if _WIDE:
        raise RuntimeError("wide_floats() is already on")
    saved = _F32
    _WIDE, _F32 = True, _F64
    STORAGE[ct.float32] = COMPUTE[ct.float32] = _F64
    _FROM_NUMPY[_F64] = ct.float32
    try:
        yield
    finally:
        _WIDE, _F32 = False, saved
        STORAGE[ct.float32] = COMPUTE[ct.float32] = saved
        _FROM_NUMPY[_F64] = ct.float64


_FLOAT = frozenset(k for k in STORAGE if _dt.is_float(k))
_INT = frozenset(k for k in STORAGE if _dt.is_integral(k))
_SIGNED = frozenset(k for k in _INT if _dt.is_signed(k))


def is_float(dtype) -> bool:
    return dtype in _FLOAT


def is_int(dtype) -> bool:
    return dtype in _INT


def is_signed(dtype) -> bool:
    return dtype in _SIGNED


def is_bool(dtype) -> bool:
    return dtype is ct.bool_ or dtype == ct.bool_


def storage_dtype(dtype) -> np.dtype:
    """The NumPy dtype that holds values of cuTile ``dtype``."""
    try:
        return STORAGE[dtype]
    except KeyError:
        raise NotImplementedError(f"dtype {dtype} is not supported by the CPU executor") from None


def compute_dtype(dtype) -> np.dtype:
    """The NumPy dtype arithmetic on ``dtype`` runs in: float32 for narrow floats, else the storage dtype."""
    if dtype in _FLOAT:
        return _F64 if dtype == ct.float64 else _F32
    return storage_dtype(dtype)


#: cuTile dtype -> its compute dtype, looked up on every operation (``wide_floats`` changes float32's)
COMPUTE: dict = {d: compute_dtype(d) for d in STORAGE}


def ct_dtype_of_numpy(np_dtype) -> object:
    np_dtype = np.dtype(np_dtype)
    try:
        return _FROM_NUMPY[np_dtype]
    except KeyError:
        raise TypeError(f"NumPy dtype {np_dtype} has no cuTile equivalent") from None


def ct_dtype_of_torch(torch_dtype) -> object:
    import torch

    table = {
        torch.bool: ct.bool_,
        torch.int8: ct.int8,
        torch.int16: ct.int16,
        torch.int32: ct.int32,
        torch.int64: ct.int64,
        torch.uint8: ct.uint8,
        torch.float16: ct.float16,
        torch.bfloat16: ct.bfloat16,
        torch.float32: ct.float32,
        torch.float64: ct.float32 if _WIDE else ct.float64,
    }
    for name, ctd in (("uint16", ct.uint16), ("uint32", ct.uint32), ("uint64", ct.uint64),
                      ("float8_e4m3fn", ct.float8_e4m3fn), ("float8_e5m2", ct.float8_e5m2),
                      ("float8_e8m0fnu", ct.float8_e8m0fnu)):
        if hasattr(torch, name):
            table[getattr(torch, name)] = ctd
    try:
        return table[torch_dtype]
    except KeyError:
        raise TypeError(f"torch dtype {torch_dtype} has no cuTile equivalent") from None


def resolve_dtype(dtype) -> object:
    """A cuTile DType from a cuTile, torch or NumPy dtype argument (kernels may pass any of them)."""
    if isinstance(dtype, ct.DType):
        return dtype
    mod = type(dtype).__module__
    if mod.startswith("torch"):
        return ct_dtype_of_torch(dtype)
    try:
        return ct_dtype_of_numpy(dtype)
    except TypeError:
        raise TypeError(f"Expected a dtype, got {dtype!r}") from None


def round_tf32(a: np.ndarray) -> np.ndarray:
    """Round float32 values to TF32 (10-bit mantissa), round-to-nearest-even; inf and NaN pass through."""
    a = np.array(a, dtype=np.float32, order="C")
    u = a.view(np.uint32)
    finite = (u & 0x7F800000) != 0x7F800000
    lsb = (u >> 13) & 1
    r = ((u + np.uint32(0xFFF) + lsb) & np.uint32(0xFFFFE000)).astype(np.uint32)
    return np.where(finite, r, u).astype(np.uint32).view(np.float32)


def _float_to_int(a: np.ndarray, dst) -> np.ndarray:
    """Hardware float->int convert: truncate toward zero, saturate, NaN -> 0."""
    info = np.iinfo(storage_dtype(dst))
    a = np.asarray(a, dtype=np.float64)
    t = np.trunc(np.where(np.isnan(a), 0.0, a))
    t = np.clip(t, info.min, info.max)
    # float64 cannot represent int64/uint64 limits exactly: clamp after the cast too
    out = t.astype(storage_dtype(dst))
    if dst in (ct.int64, ct.uint64):
        out = np.where(t >= float(info.max), np.array(info.max, dtype=out.dtype), out)
    return out


def convert(a: np.ndarray, src, dst) -> np.ndarray:
    """Convert an array holding cuTile dtype ``src`` values to cuTile dtype ``dst`` (round to nearest
    even)."""
    if src == dst:
        return a
    sd = storage_dtype(dst)
    if dst == ct.bool_:
        return np.asarray(a != 0) if src != ct.bool_ else a
    if dst in _INT:
        if src in _FLOAT:
            return _float_to_int(a.astype(np.float64) if a.dtype != _F64 else a, dst)
        return np.asarray(a).astype(sd)  # integers wrap, bool -> 0/1
    # float destinations
    if dst == ct.tfloat32:
        return round_tf32(np.asarray(a).astype(np.float32))
    if src in _FLOAT and a.dtype.itemsize < 4 and sd != _F32:
        # narrow float -> other narrow float: go through float32 (exact for every narrow source)
        a = a.astype(np.float32)
    if src in _INT and sd.itemsize < 4:
        a = a.astype(np.float64)
    return np.asarray(a).astype(sd)
