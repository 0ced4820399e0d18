"""Step 0 of every SSD form: the compute dtype and the preprocessing of the step sizes dt.

mamba_ssm's semantics (``_chunk_cumsum_fwd``)::

    dt = dt + dt_bias                 # if dt_bias is given, (h,) broadcast over (b, l, h)
    dt = softplus(dt)                 # if dt_softplus; log(1 + e^dt), and dt itself where dt > 20
    dt = clamp(dt, lo, hi)            # dt_limit = (lo, hi), default (0, inf): always applied, so dt >= 0

The discrete decay of head i at time t is then ``exp(dt_t · A_i)`` with A_i < 0, a number in (0, 1].

``prepare_sequence`` is the whole of step 0 for the sequence forms (recurrent, quadratic): check every
argument, pick the compute dtype, process dt.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..runtime.validation import validate_ssd_inputs

__all__ = ["compute_dtype", "process_dt", "prepare_sequence"]


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the reference computes in: float64 for float64 inputs (the ground truth), else float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def process_dt(
    dt: torch.Tensor,
    *,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Bias, softplus and clamp the step sizes; returns dt (same shape, last dim h) in ``dtype``.

    ``dt`` has heads in its last dimension: (b, l, h) for a sequence or (b, h) for one decode step.
    The softplus is ``torch.nn.functional.softplus`` (threshold 20, like mamba_ssm): it never overflows.
    """
    dt = dt.to(dtype)
    if dt_bias is not None:
        dt = dt + dt_bias.to(dtype)  # (h,) broadcasts over the last dim
    if dt_softplus:
        dt = F.softplus(dt)  # log(1 + exp(dt)); returns dt itself where dt > 20, so no overflow
    lo, hi = dt_limit
    return dt.clamp(min=lo, max=hi)  # always, like mamba_ssm: the default (0, inf) maps negative dt to 0


def prepare_sequence(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    *,
    D: torch.Tensor | None,
    z: torch.Tensor | None,
    dt_bias: torch.Tensor | None,
    initial_states: torch.Tensor | None,
    dt_softplus: bool,
    dt_limit: tuple[float, float],
) -> tuple[tuple[int, int, int, int, int, int], torch.dtype, torch.Tensor]:
    """Step 0 of a sequence form: validate the arguments, pick the compute dtype, process dt.

    Arguments as for ``ssd_recurrent``. Returns ``((b, l, h, p, g, n), dtype, dt)``: the dims, float32
    (float64 for float64 x), and dt (b, l, h) after bias, softplus and clamp, in that dtype.
    """
    dims = validate_ssd_inputs(
        x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states, dt_limit=dt_limit
    )
    dtype = compute_dtype(x.dtype)
    dt = process_dt(dt, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit, dtype=dtype)  # (b, l, h)
    return dims, dtype, dt
