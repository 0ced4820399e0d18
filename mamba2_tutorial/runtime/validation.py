"""Argument validation shared by the reference SSD forms and the cuTile forwards (``ssd_forward_taught``,
``ssd_forward``).

Every error names the argument, the expected shape written with the math names, and what was received, e.g.::

    ValueError: B must have shape (b, l, g, n) = (2, 37, g, n) (4 dimensions), got (2, 37, 16)

Shapes (the conventions of the whole package):

    x (b, l, h, p)   dt (b, l, h)   A (h,)   B, C (b, l, g, n)   D (h,) or (h, p)   z (b, l, h, p)
    dt_bias (h,)     initial_states (b, h, p, n)

with b batch, l sequence length, h heads, p head dimension, g groups (g divides h; head i reads group
``i // (h // g)``) and n state size.
"""

from __future__ import annotations

import math
import numbers
from typing import NamedTuple

import torch

from .launch import float64_tier

__all__ = ["FLOAT_DTYPES", "KERNEL_DTYPES", "SSDDims", "check_chunk_size", "check_decay_nonpositive",
           "check_kernel_chunk_size", "check_kernel_dtype", "check_not_varlen", "check_shape", "Packing",
           "validate_packing", "seq_idx_from_cu_seqlens",
           "validate_decode_inputs", "validate_kernel_inputs", "validate_ssd_inputs"]

#: dtypes of x, B, C, z that the cuTile SSD kernels take (mma operands; float32 accumulation)
KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_kernel_dtype(name: str, tensor: torch.Tensor) -> None:
    """TypeError unless ``tensor`` has a dtype the kernels take (float64 too under the float64 tier)."""
    if tensor.dtype not in KERNEL_DTYPES and not (tensor.dtype == torch.float64 and float64_tier()):
        raise TypeError(
            f"{name} has dtype {tensor.dtype}; the cuTile kernels take float32, float16 or bfloat16 "
            f"(use mamba2_tutorial.ssd_chunked for float64)"
        )


def check_kernel_chunk_size(chunk_size: int) -> None:
    """ValueError unless the chunk size is a power of two, as the kernels' tiles need."""
    if chunk_size & (chunk_size - 1):
        raise ValueError(
            f"chunk_size (Q) must be a power of two for the cuTile kernels (a chunk is one tile), "
            f"got {chunk_size}; mamba_ssm's usual sizes are 64, 128 and 256"
        )


#: dtypes the SSD functions accept for x, B, C and z
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_FLOAT_NAMES = "float16, bfloat16, float32 or float64"


class SSDDims(NamedTuple):
    """The sizes of one SSD problem, named as in the math."""

    batch: int  # b
    seqlen: int  # l
    nheads: int  # h
    headdim: int  # p
    ngroups: int  # g
    dstate: int  # n


def _require_tensor(value, name: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def _format_expected(dims: tuple[str, ...], sizes: tuple) -> str:
    names = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    values = [str(s) if s is not None else d for d, s in zip(dims, sizes)]
    shown = "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"
    return names if shown == names else f"{names} = {shown}"


def check_shape(tensor: torch.Tensor, name: str, dims: tuple[str, ...], sizes: tuple) -> None:
    """Raise ValueError unless ``tensor`` has ``len(dims)`` dimensions with the given sizes.

    ``dims`` are the math names, e.g. ``("b", "l", "g", "n")``; ``sizes`` the expected sizes, ``None``
    where any size is allowed.
    """
    expected = _format_expected(dims, sizes)
    got = tuple(tensor.shape)
    if tensor.ndim != len(dims):
        raise ValueError(
            f"{name} must have shape {expected} ({len(dims)} dimensions), "
            f"got {got} ({tensor.ndim} dimensions)"
        )
    for dim, want, have in zip(dims, sizes, got):
        if want is not None and want != have:
            raise ValueError(f"{name} must have shape {expected}, got {got} (size of {dim} differs)")


def _check_float(tensor: torch.Tensor, name: str) -> None:
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must have a floating dtype ({_FLOAT_NAMES}), got {tensor.dtype}")


def _check_same_dtype(tensor: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str, group: str) -> None:
    _check_float(tensor, name)
    if tensor.dtype != ref.dtype:
        raise TypeError(
            f"{name} has dtype {tensor.dtype} but {ref_name} has dtype {ref.dtype}: {group} must share one "
            f"floating dtype ({_FLOAT_NAMES}); cast with .to({ref_name}.dtype)"
        )


def _check_device(tensor: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> None:
    if tensor.device != ref.device:
        raise ValueError(
            f"{name} is on device {tensor.device} but {ref_name} is on device {ref.device}: "
            f"all tensors must be on one device"
        )


def _check_nonempty(tensor: torch.Tensor, name: str, dims: tuple[str, ...]) -> None:
    empty = [f"{d} = 0" for d, s in zip(dims, tensor.shape) if s == 0]
    if empty:
        raise ValueError(
            f"{name} with shape {_format_expected(dims, tuple(tensor.shape))} is empty ({', '.join(empty)}): "
            f"every dimension must be at least 1"
        )


def check_chunk_size(chunk_size) -> None:
    """Raise TypeError unless chunk_size is an int (not a bool), ValueError unless it is positive."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral):
        raise TypeError(f"chunk_size (Q) must be an int, got {type(chunk_size).__name__} {chunk_size!r}")
    if chunk_size <= 0:
        raise ValueError(f"chunk_size (Q) must be a positive int, got {chunk_size}")


def _check_dt_limit(dt_limit) -> None:
    if not isinstance(dt_limit, (tuple, list)) or len(dt_limit) != 2:
        raise TypeError(f"dt_limit must be a pair (lo, hi) of numbers, got {dt_limit!r}")
    lo, hi = dt_limit
    for part, value in (("lo", lo), ("hi", hi)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"dt_limit must be a pair (lo, hi) of numbers; {part} is {value!r}")
    if math.isnan(lo) or math.isnan(hi) or not lo <= hi:
        raise ValueError(f"dt_limit = (lo, hi) must have lo <= hi, got {tuple(dt_limit)!r}")


def _check_groups(nheads: int, ngroups: int) -> None:
    if ngroups == 0 or nheads % ngroups != 0:
        raise ValueError(
            f"nheads h = {nheads} must be divisible by ngroups g = {ngroups} (the size of dim 2 of B and C): "
            f"head i reads group i // (h // g)"
        )


def _check_optional(value, name, dims, sizes, x, x_name):
    """Type, shape and device of an optional float parameter (any floating dtype)."""
    if value is None:
        return
    _require_tensor(value, name)
    check_shape(value, name, dims, sizes)
    _check_float(value, name)
    _check_device(value, name, x, x_name)


def _check_D(D, x, x_name, nheads, headdim) -> None:
    if D is None:
        return
    _require_tensor(D, "D")
    if D.ndim == 2:
        check_shape(D, "D", ("h", "p"), (nheads, headdim))
    elif D.ndim == 1:
        check_shape(D, "D", ("h",), (nheads,))
    else:
        raise ValueError(
            f"D must have shape (h,) = ({nheads},) or (h, p) = ({nheads}, {headdim}), got {tuple(D.shape)}"
        )
    _check_float(D, "D")
    _check_device(D, "D", x, x_name)


def validate_ssd_inputs(
    x, dt, A, B, C, *, chunk_size=None, D=None, z=None, dt_bias=None, initial_states=None, dt_limit=None
) -> SSDDims:
    """Check the arguments of an SSD forward and return their dims ``SSDDims(b, l, h, p, g, n)``.

    Raises TypeError (not a tensor, wrong dtype, chunk_size not an int) or ValueError (wrong shape or rank,
    an empty dimension, h not divisible by g, chunk_size <= 0, tensors on different devices, dt_limit with
    lo > hi), always naming the argument and the expected shape in math names. x, B, C and z must share one
    floating dtype; dt, A, D, dt_bias and initial_states may have any floating dtype (mamba_ssm keeps A, D and
    dt_bias in float32). ``chunk_size`` and ``dt_limit`` are checked only when given.
    """
    _require_tensor(x, "x")
    if x.ndim != 4:
        raise ValueError(
            f"x must have shape (b, l, h, p) (4 dimensions), got {tuple(x.shape)} ({x.ndim} dimensions)"
        )
    _check_float(x, "x")
    b, l, h, p = x.shape
    _check_nonempty(x, "x", ("b", "l", "h", "p"))

    _require_tensor(dt, "dt")
    check_shape(dt, "dt", ("b", "l", "h"), (b, l, h))
    _check_float(dt, "dt")
    _check_device(dt, "dt", x, "x")

    _require_tensor(A, "A")
    check_shape(A, "A", ("h",), (h,))
    _check_float(A, "A")
    _check_device(A, "A", x, "x")

    _require_tensor(B, "B")
    check_shape(B, "B", ("b", "l", "g", "n"), (b, l, None, None))
    g, n = B.shape[2], B.shape[3]
    _check_nonempty(B, "B", ("b", "l", "g", "n"))
    _check_same_dtype(B, "B", x, "x", "x, B, C and z")
    _check_device(B, "B", x, "x")

    _require_tensor(C, "C")
    check_shape(C, "C", ("b", "l", "g", "n"), (b, l, g, n))
    _check_same_dtype(C, "C", x, "x", "x, B, C and z")
    _check_device(C, "C", x, "x")

    _check_groups(h, g)

    if z is not None:
        _require_tensor(z, "z")
        check_shape(z, "z", ("b", "l", "h", "p"), (b, l, h, p))
        _check_same_dtype(z, "z", x, "x", "x, B, C and z")
        _check_device(z, "z", x, "x")

    _check_D(D, x, "x", h, p)
    _check_optional(dt_bias, "dt_bias", ("h",), (h,), x, "x")
    _check_optional(initial_states, "initial_states", ("b", "h", "p", "n"), (b, h, p, n), x, "x")
    if chunk_size is not None:
        check_chunk_size(chunk_size)
    if dt_limit is not None:
        _check_dt_limit(dt_limit)
    return SSDDims(b, l, h, p, g, n)


def validate_decode_inputs(
    state, x_t, dt_t, A, B_t, C_t, *, D=None, z_t=None, dt_bias=None, dt_limit=None
) -> SSDDims:
    """Check the arguments of one decode step and return ``SSDDims`` with ``seqlen = 1``.

    Shapes: state (b, h, p, n), x_t (b, h, p), dt_t (b, h), A (h,), B_t and C_t (b, g, n), D (h,) or (h, p),
    z_t (b, h, p), dt_bias (h,).
    """
    _require_tensor(x_t, "x_t")
    if x_t.ndim != 3:
        raise ValueError(
            f"x_t must have shape (b, h, p) (3 dimensions), got {tuple(x_t.shape)} ({x_t.ndim} dimensions)"
        )
    _check_float(x_t, "x_t")
    b, h, p = x_t.shape
    _check_nonempty(x_t, "x_t", ("b", "h", "p"))

    _require_tensor(dt_t, "dt_t")
    check_shape(dt_t, "dt_t", ("b", "h"), (b, h))
    _check_float(dt_t, "dt_t")
    _check_device(dt_t, "dt_t", x_t, "x_t")

    _require_tensor(A, "A")
    check_shape(A, "A", ("h",), (h,))
    _check_float(A, "A")
    _check_device(A, "A", x_t, "x_t")

    _require_tensor(B_t, "B_t")
    check_shape(B_t, "B_t", ("b", "g", "n"), (b, None, None))
    g, n = B_t.shape[1], B_t.shape[2]
    _check_nonempty(B_t, "B_t", ("b", "g", "n"))
    _check_same_dtype(B_t, "B_t", x_t, "x_t", "x_t, B_t, C_t and z_t")
    _check_device(B_t, "B_t", x_t, "x_t")

    _require_tensor(C_t, "C_t")
    check_shape(C_t, "C_t", ("b", "g", "n"), (b, g, n))
    _check_same_dtype(C_t, "C_t", x_t, "x_t", "x_t, B_t, C_t and z_t")
    _check_device(C_t, "C_t", x_t, "x_t")

    _check_groups(h, g)

    _require_tensor(state, "state")
    check_shape(state, "state", ("b", "h", "p", "n"), (b, h, p, n))
    _check_float(state, "state")
    _check_device(state, "state", x_t, "x_t")

    if z_t is not None:
        _require_tensor(z_t, "z_t")
        check_shape(z_t, "z_t", ("b", "h", "p"), (b, h, p))
        _check_same_dtype(z_t, "z_t", x_t, "x_t", "x_t, B_t, C_t and z_t")
        _check_device(z_t, "z_t", x_t, "x_t")

    _check_D(D, x_t, "x_t", h, p)
    _check_optional(dt_bias, "dt_bias", ("h",), (h,), x_t, "x_t")
    if dt_limit is not None:
        _check_dt_limit(dt_limit)
    return SSDDims(b, 1, h, p, g, n)


_INT32_MAX = 2**31 - 1

#: argument metadata (types, shapes, dtypes, devices, chunk_size, dt_limit) of calls that passed validation
_VALIDATED: dict = {}


def _metadata(tensors, chunk_size, dt_limit):
    """A hashable description of everything validation looks at, or None if some argument is not a tensor."""
    key = [chunk_size if type(chunk_size) is int else None,
           tuple(dt_limit) if type(dt_limit) is tuple else None]
    for t in tensors:
        if t is None:
            key.append(None)
        elif isinstance(t, torch.Tensor):
            key.append((t.shape, t.dtype, t.device))
        else:
            return None
    if x_is_float64 := any(isinstance(t, torch.Tensor) and t.dtype == torch.float64 for t in tensors):
        key.append(("float64 tier", x_is_float64 and float64_tier()))   # float64 is valid only there
    return None if None in key[:2] else tuple(key)


#: (id, version, data pointer, device) of A tensors already found <= 0: on a GPU the check costs a host sync,
#: so an A that has not changed since (same tensor, same version counter) is not read again
_A_CHECKED: dict = {}


def check_decay_nonpositive(A: torch.Tensor) -> None:
    """ValueError unless every A_h <= 0, as Mamba-2 parameterizes it (A = -exp(A_log)): the kernels take the
    exponential of min(dA_cs_m - dA_cs_k, 0), which is the decay only when dt·A never increases the cumsum.
    A positive A would make them return a wrong answer without a word; the recurrence (``ssd_recurrent``)
    takes any A."""
    try:
        version = A._version
    except RuntimeError:  # an inference-mode tensor keeps no version counter: check it every time
        version = None
    key = (id(A), version, A.data_ptr(), A.device)
    if version is not None and _A_CHECKED.get(id(A)) == key:
        return
    top = float(A.detach().max()) if A.numel() else 0.0
    if not top <= 0.0:
        h = int(A.detach().argmax())
        raise ValueError(f"A must be <= 0 in every head (Mamba-2's A = -exp(A_log)); A[{h}] = {top:g}. The "
                         "cuTile kernels and the chunked reference assume decays exp(dt·A) <= 1; for other A "
                         "use ssd_recurrent")
    if len(_A_CHECKED) > 256:
        _A_CHECKED.clear()
    _A_CHECKED[id(A)] = key


def check_not_varlen(seq_idx=None, cu_seqlens=None, return_varlen_states=False) -> None:
    """NotImplementedError for the arguments of ``mamba_chunk_scan_combined`` that describe a packed batch of
    sequences of different lengths (``seq_idx``, ``cu_seqlens``, ``return_varlen_states``): the taught
    forward takes them in mamba_ssm's positions, refuses them, and says where they are supported."""
    for name, value, given in (("seq_idx", seq_idx, seq_idx is not None),
                               ("cu_seqlens", cu_seqlens, cu_seqlens is not None),
                               ("return_varlen_states", return_varlen_states, bool(return_varlen_states))):
        if given:
            shown = (f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor)
                     else repr(value))
            default = "False" if name == "return_varlen_states" else "None"
            raise NotImplementedError(
                f"{name} is not supported by ssd_forward_taught (got {shown}): the taught kernels run one "
                f"sequence per batch row. Packed sequences run in ssd_forward (the fast path, same "
                f"arguments) and in the reference forms ssd_recurrent and ssd_quadratic; or pass "
                f"{name}={default} and split the batch into rows")


class Packing(NamedTuple):
    """A checked description of packed sequences (:func:`validate_packing`).

    ``seq_idx`` (b, l) int32, non-decreasing along l: the sequence each position belongs to. The state resets
    wherever it changes; the call's ``initial_states`` is the state before position 0 of sequence 0 only.
    ``bounds[row]``: the ``(start, end)`` of each sequence of that row, in order (end exclusive).
    ``cu_seqlens`` (number of sequences + 1,) or None; ``return_varlen_states``: return each sequence's final
    state (b must be 1), as mamba_ssm does."""

    seq_idx: torch.Tensor
    bounds: tuple[tuple[tuple[int, int], ...], ...]
    cu_seqlens: torch.Tensor | None
    return_varlen_states: bool


def seq_idx_from_cu_seqlens(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """The ``seq_idx`` (1, l) int32 of one packed row from its ``cu_seqlens`` (0, l_0, l_0 + l_1, ..., l):
    position t belongs to sequence i when ``cu_seqlens[i] <= t < cu_seqlens[i + 1]``."""
    cu = _require_tensor(cu_seqlens, "cu_seqlens")
    if cu.dim() != 1 or cu.numel() < 2 or cu.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"cu_seqlens must be a 1-D int32 tensor (number of sequences + 1,) starting at 0, "
                         f"got shape {tuple(cu.shape)} and dtype {cu.dtype}")
    lengths = (cu[1:] - cu[:-1]).to(torch.int64)
    if int(cu[0]) != 0 or bool((lengths <= 0).any()):
        raise ValueError(f"cu_seqlens must start at 0 and strictly increase (every sequence at least one "
                         f"token), got {cu.tolist()}")
    ids = torch.arange(lengths.numel(), device=cu.device, dtype=torch.int32)
    return torch.repeat_interleave(ids, lengths)[None]


def validate_packing(seq_idx, cu_seqlens, return_varlen_states, b: int, l: int, device) -> Packing | None:
    """Check mamba_ssm's packed-sequence arguments of a call with ``b`` rows of length ``l`` on ``device``;
    None when the call packs nothing (all three absent).

    mamba_ssm's semantics: ``seq_idx`` decides where the state resets (no state and no decay crosses a change
    of seq_idx, also inside a chunk); ``cu_seqlens`` only says where each sequence ends, for
    ``return_varlen_states``, so it needs ``seq_idx`` (build it with :func:`seq_idx_from_cu_seqlens`) and must
    agree with it, and it needs b = 1."""
    if seq_idx is None and cu_seqlens is None and not return_varlen_states:
        return None
    if seq_idx is None:
        raise ValueError(
            "packed sequences need seq_idx (b, l) int32: it decides where the state resets; cu_seqlens alone "
            "only says where each sequence ends. Build it with seq_idx_from_cu_seqlens(cu_seqlens)")
    seq_idx = _require_tensor(seq_idx, "seq_idx")
    check_shape(seq_idx, "seq_idx", ("b", "l"), (b, l))
    if seq_idx.dtype != torch.int32:
        raise TypeError(f"seq_idx must be int32 (as mamba_ssm takes it), got {seq_idx.dtype}; pass "
                        "seq_idx.to(torch.int32)")
    if seq_idx.device != torch.device(device):
        raise ValueError(f"seq_idx is on {seq_idx.device}, but x is on {device}: put both on one device")
    steps = seq_idx[:, 1:] - seq_idx[:, :-1]
    if l > 1 and bool((steps < 0).any()):
        row, t = (int(v) for v in (steps < 0).nonzero()[0])
        raise ValueError(
            f"seq_idx must be non-decreasing along l (each sequence one contiguous run), but in row {row} it "
            f"goes from {int(seq_idx[row, t])} at position {t} to {int(seq_idx[row, t + 1])} at {t + 1}")
    if bool((seq_idx[:, 0] < 0).any()):
        raise ValueError(f"seq_idx must be >= 0, got {seq_idx[:, 0].min().item()} at the start of a row")
    bounds = []
    for row in range(b):
        starts = [0, *((steps[row] != 0).nonzero().flatten() + 1).tolist()]
        bounds.append(tuple(zip(starts, [*starts[1:], l])))
    if return_varlen_states and cu_seqlens is None:
        raise ValueError("return_varlen_states=True needs cu_seqlens (number of sequences + 1,): where each "
                         "sequence ends")
    if cu_seqlens is not None:
        if b != 1:
            raise ValueError(f"cu_seqlens describes one packed row: b must be 1, got b = {b}")
        expected = seq_idx_from_cu_seqlens(cu_seqlens)
        if expected.shape[1] != l:
            raise ValueError(f"cu_seqlens must end at the sequence length l = {l}, got {cu_seqlens.tolist()}")
        ends = [end for _, end in bounds[0]]
        if [int(v) for v in cu_seqlens[1:].tolist()] != ends:
            raise ValueError(f"cu_seqlens {cu_seqlens.tolist()} disagrees with seq_idx, whose sequences end "
                             f"at {ends}")
    return Packing(seq_idx, tuple(bounds), cu_seqlens, bool(return_varlen_states))


def validate_kernel_inputs(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                           dt_limit=(0.0, float("inf"))) -> SSDDims:
    """:func:`validate_ssd_inputs` plus the cuTile kernels' own limits (dtype float32, float16 or bfloat16;
    chunk size a power of two; int32 indexing): what both ``ssd_forward`` and ``ssd_forward_taught`` check
    before any launch. A repeat of an already validated argument set (same shapes, dtypes, devices,
    chunk_size, dt_limit) is recognized from its metadata and not checked again: validation is host time
    that every call pays."""
    key = _metadata((x, dt, A, B, C, D, z, dt_bias, initial_states), chunk_size, dt_limit)
    if key is not None and key in _VALIDATED:
        check_decay_nonpositive(A)  # values, not metadata: checked again when A changed
        return _VALIDATED[key]
    dims = validate_ssd_inputs(
        x, dt, A, B, C, chunk_size=chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
        dt_limit=dt_limit,
    )
    check_kernel_dtype("x", x)
    check_kernel_chunk_size(chunk_size)
    check_decay_nonpositive(A)
    for name, t in (("x", x), ("z", z), ("B", B), ("C", C)):
        if t is not None and t.numel() > _INT32_MAX:
            raise ValueError(f"{name} has {t.numel()} elements; the kernels index with int32 (< 2**31)")
    if key is not None:
        if len(_VALIDATED) > 1024:
            _VALIDATED.clear()
        _VALIDATED[key] = dims
    return dims


def validate_chunk_scan_inputs(x, dt_out, dA_cumsum, C, B, chunk_init_states, D=None, z=None) -> None:
    """The checks of kernel 3 run on its own (``chunk_scan_fwd``): the inputs and the intermediates of kernels
    1 and 2, their shapes, dtypes and the chunk size they imply."""
    for name, t in (("x", x), ("C", C), ("B", B)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        check_kernel_dtype(name, t)
    for name, t in (("dt_out", dt_out), ("dA_cumsum", dA_cumsum), ("chunk_init_states", chunk_init_states)):
        allowed = (torch.float32, x.dtype) if name == "chunk_init_states" else (torch.float32,)
        if not isinstance(t, torch.Tensor) or t.dtype not in allowed:
            got = getattr(t, "dtype", type(t).__name__)
            raise TypeError(f"{name} must be a float32 torch.Tensor, got {got}")
    check_shape(x, "x", ("b", "l", "h", "p"), (None,) * 4)
    b, l, h, p = x.shape
    check_shape(C, "C", ("b", "l", "g", "n"), (b, l, None, None))
    g, n = C.shape[2], C.shape[3]
    check_shape(B, "B", ("b", "l", "g", "n"), (b, l, g, n))
    if B.dtype != x.dtype or C.dtype != x.dtype:
        raise TypeError(f"x, B and C must share one dtype, got {x.dtype}, {B.dtype}, {C.dtype}")
    if g == 0 or h % g:
        raise ValueError(f"nheads h = {h} must be divisible by ngroups g = {g}")
    check_shape(dt_out, "dt_out", ("b", "h", "nchunks", "Q"), (b, h, None, None))
    Q = dt_out.shape[3]
    check_kernel_chunk_size(Q)
    nchunks = -(-l // Q)
    check_shape(dt_out, "dt_out", ("b", "h", "nchunks", "Q"), (b, h, nchunks, Q))
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "nchunks", "Q"), (b, h, nchunks, Q))
    check_shape(chunk_init_states, "chunk_init_states", ("b", "nchunks", "h", "p", "n"),
                (b, nchunks, h, p, n))
    if D is not None:
        check_shape(D, "D", ("h",) if D.ndim == 1 else ("h", "p"), (h,) if D.ndim == 1 else (h, p))
    if z is not None:
        check_shape(z, "z", ("b", "l", "h", "p"), (b, l, h, p))
        if z.dtype != x.dtype:
            raise TypeError(f"z must have x's dtype {x.dtype}, got {z.dtype}")
