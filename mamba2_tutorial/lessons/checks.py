"""One way to check a result: ``assert_close``, with dtype-aware tolerances and a report that explains.

    assert_close(y_kernel, y_reference, name="y")

passes silently or raises ``AssertionError`` with the number of mismatching elements, the max absolute and
relative errors and where they occur (indices named after the math dims when the layout is known), the
values there, the relative L2 error, and a hint at the likely cause.

Default tolerances (``default_tolerance``), for ``|actual - expected| <= atol + rtol·|expected|``, taken
from the LOWER precision of the two tensors (a float32 kernel checked against a float64 reference is held to
float32 tolerances). Each leaves room for the rounding of an SSD forward in that dtype, not for a wrong
result:

=========  ======  ======  ===========================================================================
dtype      rtol    atol    why
=========  ======  ======  ===========================================================================
float64    1e-10   1e-10   roundoff 1.1e-16: sums of thousands of terms agree to ~1e-13; 1000x margin
float32    1e-4    1e-4    roundoff 6e-8, accumulated: at mamba2-130m dims (l 2048, n 128) the float32
                           chunked reference needs atol 1.5e-5 next to rtol 1e-4 (measured); 7x margin
float16    5e-3    5e-3    roundoff 4.9e-4: output rounding plus fp16 operands inside the kernel
bfloat16   2e-2    2e-2    roundoff 3.9e-3 (8-bit mantissa): output rounding plus bf16 operands
=========  ======  ======  ===========================================================================

Absolute errors of an SSD output scale with its terms (y is a sum of many), so atol is not tiny. When one
number is wanted instead, use ``relative_error(actual, expected)`` = ||a - e||₂ / ||e||₂ in float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

__all__ = ["assert_close", "default_tolerance", "relative_error", "ssd_gradients", "SSD_TENSOR_ARGS",
           "TOLERANCES"]

#: (rtol, atol) per dtype; see the module docstring for why
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (5e-3, 5e-3),
    torch.bfloat16: (2e-2, 2e-2),
}

# machine epsilon decides which of two dtypes is the lower precision
_EPS = {torch.float64: 2.0**-52, torch.float32: 2.0**-23, torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}

# index names of the package's layouts, chosen by the ``name`` of the compared tensor
_LAYOUTS: dict[str, tuple[str, ...]] = {
    "y": ("b", "l", "h", "p"),
    "out": ("b", "l", "h", "p"),
    "x": ("b", "l", "h", "p"),
    "z": ("b", "l", "h", "p"),
    "y_t": ("b", "h", "p"),
    "dt": ("b", "l", "h"),
    "B": ("b", "l", "g", "n"),
    "C": ("b", "l", "g", "n"),
    "state": ("b", "h", "p", "n"),
    "new_state": ("b", "h", "p", "n"),
    "final_states": ("b", "h", "p", "n"),
    "initial_states": ("b", "h", "p", "n"),
    "states": ("b", "c", "h", "p", "n"),
    "chunk_states": ("b", "c", "h", "p", "n"),
    "chunk_init_states": ("b", "c", "h", "p", "n"),
    "dt_out": ("b", "h", "c", "Q"),
    "dA_cumsum": ("b", "h", "c", "Q"),
}


def _as_tensor(value, what: str) -> tuple[torch.Tensor, torch.dtype]:
    """(values as a float64 tensor on the value's own device, the dtype that sets the tolerance)."""
    if isinstance(value, torch.Tensor):
        t = value.detach()
        src = t.dtype
        if t.is_complex():
            raise TypeError(f"{what} is complex ({t.dtype}); assert_close compares real tensors")
        return t.to(torch.float64), src
    arr = np.asarray(value)
    name = str(arr.dtype)
    if name == "bfloat16":  # ml_dtypes.bfloat16 arrays
        return torch.from_numpy(arr.astype(np.float32)).double(), torch.bfloat16
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"{what} must be a tensor or array of numbers, got dtype {arr.dtype}")
    src = {"float16": torch.float16, "float32": torch.float32}.get(name, torch.float64)
    return torch.from_numpy(arr.astype(np.float64)), src


def _pair(actual, expected, name: str):
    """Both as float64 tensors on one device: their common device, else the CPU."""
    a, a_dtype = _as_tensor(actual, f"{name} (actual)")
    e, e_dtype = _as_tensor(expected, f"{name} (expected)")
    if a.device != e.device:
        a, e = a.cpu(), e.cpu()
    return a, a_dtype, e, e_dtype


def default_tolerance(dtype) -> tuple[float, float]:
    """``(rtol, atol)`` for results of this dtype (a torch dtype, numpy dtype or its name); see TOLERANCES.

    Integer and unknown dtypes get the float64 tolerances.
    """
    if not isinstance(dtype, torch.dtype):
        name = str(np.dtype(dtype)) if not isinstance(dtype, str) else dtype
        dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}.get(
            name.replace("torch.", ""), torch.float64
        )
    return TOLERANCES.get(dtype, TOLERANCES[torch.float64])


def _lower_precision(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    return max((a, b), key=lambda d: _EPS.get(d, 0.0))


def relative_error(actual, expected) -> float:
    """``||actual - expected||_2 / ||expected||_2`` computed in float64 (tensors or arrays, any device).

    0.0 when both are all zeros, inf when only ``expected`` is; NaN if either holds a NaN. Raises ValueError
    if the shapes differ.
    """
    a, _, e, _ = _pair(actual, expected, "relative_error")
    if a.shape != e.shape:
        raise ValueError(
            f"relative_error: shapes differ: actual {tuple(a.shape)} vs expected {tuple(e.shape)}"
        )
    num = torch.linalg.vector_norm(a - e).item()
    den = torch.linalg.vector_norm(e).item()
    if math.isnan(num) or math.isnan(den):
        return math.nan
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def _short(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _fmt_index(flat: int, shape: tuple[int, ...], dims: tuple[str, ...] | None) -> str:
    idx = np.unravel_index(flat, shape) if shape else ()
    idx = tuple(int(i) for i in idx)
    if dims is not None and len(dims) == len(idx):
        return "(" + ", ".join(f"{d}={i}" for d, i in zip(dims, idx)) + ")"
    return str(idx)


def _axis_patterns(bad: torch.Tensor, dims: tuple[str, ...], shape: tuple[int, ...]) -> list[str]:
    """Mismatches confined to part of one named axis (and dense there: at least 10 % of that block fails)."""
    hints = []
    for axis, dim in enumerate(dims):
        size = shape[axis]
        per_index = bad.movedim(axis, 0).reshape(size, -1).float().mean(dim=1).cpu()  # failing fraction
        hit = per_index.nonzero().flatten()
        if size < 2 or hit.numel() == size or float(per_index[hit].mean()) < 0.1:
            continue
        listed = f"{[int(i) for i in hit[:8]]}{' ...' if hit.numel() > 8 else ''}"
        if dim == "l":
            t0, t1 = int(hit.min()), int(hit.max())
            if t0 > 0 and t1 == size - 1:
                hints.append(
                    f"mismatches only at sequence positions l >= {t0} (of {size}); the first {t0} are right. "
                    "If that is where the last, ragged chunk starts: the tail past the sequence end "
                    "(masking or zero padding of the partial chunk). If it is an earlier chunk boundary: "
                    "the state entering that chunk (state passing)"
                )
            elif t0 == 0 and t1 < size - 1:
                hints.append(f"mismatches only at sequence positions l <= {t1} (of {size})")
            else:
                hints.append(f"mismatches only at sequence positions {listed} (of {size})")
        elif dim == "h":
            hints.append(
                f"only heads {listed} of {size} mismatch: look for what depends on the head index (a "
                "per-head parameter such as A, D or dt_bias; the head's group, i // (h // g); or an index "
                "built from the wrong ct.bid)"
            )
        elif dim == "b":
            hints.append(f"only batch entries {listed} of {size} mismatch: check batch offsets")
        elif dim == "c":
            last = hit.numel() == 1 and int(hit[0]) == size - 1
            tail = " (the last one)" if last else ""
            hints.append(f"mismatches only in chunks {listed} of {size}{tail}")
    return hints


def _diagnose(a, e, bad, dims, shape) -> list[str]:
    """Honest guesses at the cause, from the pattern of the mismatches."""
    hints: list[str] = []
    n = a.numel()
    a_nan, a_inf = torch.isnan(a), torch.isinf(a)
    e_finite = torch.isfinite(e)
    if n and bool(a_nan.all()):
        return ["every element of actual is NaN: an output that was never written (torch.empty), "
                "or a read of uninitialized memory / padding"]
    nonfinite = (a_nan | a_inf) & e_finite
    if bool(nonfinite.any()):
        hints.append(
            f"actual has {int((a_nan & e_finite).sum())} NaN and {int((a_inf & e_finite).sum())} inf where "
            "expected is finite: an exp of a positive exponent (clamp segment sums / decay exponents at 0), "
            "0·inf, a division by zero, or a read past the end of the data"
        )
    if n and bool((a == 0).all()) and bool((e != 0).any()):
        hints.append("actual is all zeros: the result was never stored (or was stored into a copy)")
    nbad = int(bad.sum())
    if 0 < nbad <= 3 and n >= 100:
        hints.append(
            f"only {nbad} element(s) wrong: an isolated error (a race, a stray write, one boundary element), "
            "not a systematic one"
        )
    elif dims is not None and len(dims) == len(shape) and nbad:
        hints += _axis_patterns(bad, dims, shape)
    if not hints and bool(bad.any()):
        frac = float(bad.float().mean())
        rel = relative_error(a, e)
        if frac < 0.01 and rel < 1e-2:
            hints.append(
                f"only {frac:.2%} of the elements fail and the relative L2 error is {rel:.1e}: the result is "
                "nearly right, so either a rounding-level difference (is the tolerance right for the dtype?) "
                "or an error confined to a few elements"
            )
    return hints


def assert_close(
    actual,
    expected,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    name: str = "output",
    hint: str | None = None,
    dims: str | Sequence[str] | None = None,
) -> None:
    """Raise AssertionError unless ``|actual - expected| <= atol + rtol·|expected|`` everywhere.

    ``actual``/``expected``: torch tensors (any device, any dtype) or numpy arrays; compared in float64.
    ``rtol``/``atol`` default to ``default_tolerance`` of the lower precision of the two dtypes (either one
    may be given alone). NaN never passes; an inf passes only where expected has the same inf. ``name`` labels
    the message and, for the package's tensors (``y``, ``final_states``, ``states``, ``dA_cumsum``...), names
    the index dims; ``dims`` (e.g. ``"b l h p"``) names them explicitly. ``hint`` is added to the message,
    after the automatic diagnosis.
    """
    a, a_dtype, e, e_dtype = _pair(actual, expected, name)
    if a.shape != e.shape:
        msg = f"{name}: shape mismatch: actual {tuple(a.shape)} vs expected {tuple(e.shape)}"
        if a.numel() == e.numel():
            msg += " (same number of elements: a missing reshape or transpose?)"
        raise AssertionError(msg + (f"\n  hint: {hint}" if hint else ""))

    tol_dtype = _lower_precision(a_dtype, e_dtype)
    d_rtol, d_atol = default_tolerance(tol_dtype)
    rtol = d_rtol if rtol is None else float(rtol)
    atol = d_atol if atol is None else float(atol)
    if isinstance(dims, str):
        dims = tuple(dims.replace(",", " ").split())
    elif dims is not None:
        dims = tuple(dims)
    else:
        dims = _LAYOUTS.get(name)
    shape = tuple(a.shape)
    if dims is not None and len(dims) != len(shape):
        dims = None

    err = (a - e).abs()
    both_inf_same = torch.isinf(a) & torch.isinf(e) & (a == e)
    err = torch.where(both_inf_same, torch.zeros_like(err), err)
    bad = ~(err <= atol + rtol * e.abs())  # NaN anywhere compares False, so it is bad
    bad = (bad | torch.isinf(e) | torch.isinf(a)) & ~both_inf_same  # an inf must be matched exactly
    if not bool(bad.any()):
        return

    nbad, n = int(bad.sum()), a.numel()
    if (rtol, atol) == (d_rtol, d_atol):
        tol_note = f"the {_short(tol_dtype)} defaults"
    else:
        tol_note = f"the {_short(tol_dtype)} defaults are rtol={d_rtol:.0e}, atol={d_atol:.0e}"
    finite_err = torch.where(torch.isnan(err), torch.full_like(err, math.inf), err)
    worst = int(torch.argmax(finite_err).item())
    rel = finite_err / e.abs()
    rel = torch.where(torch.isnan(rel), torch.full_like(rel, math.inf), rel)
    worst_rel = int(torch.argmax(rel).item())
    first = int(torch.argmax(bad.flatten().to(torch.uint8)).item())  # argmax returns the first of ties
    flat_a, flat_e = a.flatten(), e.flatten()

    def at(i: int) -> str:
        return f"{_fmt_index(i, shape, dims)}: actual {flat_a[i].item():.6g}, expected {flat_e[i].item():.6g}"

    lines = [
        f"{name}: {nbad} of {n} elements ({nbad / n:.2%}) differ beyond tolerance "
        f"(rtol={rtol:.1e}, atol={atol:.1e}; {tol_note}; "
        f"actual {_short(a_dtype)}, expected {_short(e_dtype)})",
        f"  max abs error {err.flatten()[worst].item():.3e} at {at(worst)}",
        f"  max rel error {(err / e.abs()).flatten()[worst_rel].item():.3e} at {at(worst_rel)}",
        f"  first mismatch at {at(first)}",
        f"  relative L2 error {relative_error(a, e):.3e}",
    ]
    if dims is not None:
        lines.append(f"  indices are ({', '.join(dims)}), shape {shape}")
    for h in _diagnose(a, e, bad, dims, shape):
        lines.append(f"  diagnosis: {h}")
    if hint:
        lines.append(f"  hint: {hint}")
    raise AssertionError("\n".join(lines))


#: the tensor arguments of an SSD function with mamba_ssm's signature
SSD_TENSOR_ARGS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")


def ssd_gradients(ssd, inputs, chunk_size: int, dout=None, dfinal_states=None, *, dtype=None,
                  **kwargs) -> dict:
    """The gradient of every tensor input of ``ssd`` (an SSD function with mamba_ssm's signature:
    ``ssd_chunked``, ``ssd_forward``, ``mamba_chunk_scan_combined``...) for the loss

        L = sum(dout · out) + sum(dfinal_states · final_states)

    ``inputs``: keyword arguments as ``make_inputs`` returns them; the tensors among x, dt, A, B, C, D, z,
    dt_bias, initial_states become leaves (cast to ``dtype`` if given, e.g. float64 for the ground truth).
    ``dout`` or ``dfinal_states`` may be None (that output is then not in the loss); each is moved to its
    output's device and dtype. ``kwargs`` go to ``ssd`` (e.g. ``backend``). Returns ``{name: gradient}``; a
    gradient is None for an input the loss does not depend on."""
    if dout is None and dfinal_states is None:
        raise ValueError("ssd_gradients: give dout, dfinal_states or both")
    leaves = {k: (v.to(dtype) if dtype else v).detach().clone().requires_grad_()
              for k, v in inputs.items() if k in SSD_TENSOR_ARGS and v is not None}
    out, final = ssd(**(dict(inputs) | leaves), chunk_size=chunk_size, return_final_states=True, **kwargs)
    outputs, grads = [], []
    for output, grad in ((out, dout), (final, dfinal_states)):
        if grad is not None:
            outputs.append(output)
            grads.append(grad.to(output.device, output.dtype))
    torch.autograd.backward(outputs, grads)
    return {k: v.grad for k, v in leaves.items()}
