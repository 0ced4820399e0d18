"""Rung 1: the SSD as a recurrence, one time step at a time (O(l) steps, each O(h·p·n)).

For every head (b and h are batch dimensions)::

    state_t = exp(dt_t · A) · state_{t-1}  +  dt_t · x_t ⊗ B_t        state (p, n), x_t (p,), B_t (n,)
    y_t     = state_t · C_t  +  D · x_t                                y_t (p,), C_t (n,)
    y_t     = y_t · silu(z_t)                                          (if z is given)

This is the definition every faster form is checked against. It is sequential in t, which is why the
dual (quadratic) and chunked forms exist.

Packed sequences (mamba_ssm's ``seq_idx``): several sequences share one row, and the state starts again from
zero wherever ``seq_idx`` changes, so nothing crosses from one sequence into the next::

    state_{t-1} = 0   before the update at t, where seq_idx_t != seq_idx_{t-1}   (seq_idx_{-1} = 0)

The call's ``initial_states`` is therefore the state entering sequence 0 only.
"""

from __future__ import annotations

import torch

from ..runtime.validation import validate_packing
from ._dt import prepare_sequence
from ._heads import groups_to_heads, skip_and_gate
from .decode import decode_update

__all__ = ["ssd_recurrent"]


def ssd_recurrent(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    return_final_states: bool = False,
    seq_idx: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    return_varlen_states: bool = False,
):
    """SSD forward by the sequential scan.

    Args: x (b, l, h, p), dt (b, l, h), A (h,), B and C (b, l, g, n), D (h,) or (h, p), z (b, l, h, p),
    dt_bias (h,), initial_states (b, h, p, n). Returns y (b, l, h, p) in x.dtype, or (y, final_states) with
    final_states (b, h, p, n) in float32 (float64 for float64 x).

    Packed sequences, as mamba_ssm: ``seq_idx`` (b, l) int32, non-decreasing (the state resets where it
    changes); ``cu_seqlens`` (number of sequences + 1,) with ``return_varlen_states`` (b = 1) adds each
    sequence's final state, (number of sequences, h, p, n), as the last result.
    """
    (b, l, h, p, g, n), dtype, dt = prepare_sequence(  # checked; dt (b, l, h) processed, in dtype
        x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
        dt_softplus=dt_softplus, dt_limit=dt_limit,
    )
    A = A.to(dtype)  # (h,)
    xc = x.to(dtype)  # (b, l, h, p)
    Bh = groups_to_heads(B.to(dtype), h)  # (b, l, h, n)
    Ch = groups_to_heads(C.to(dtype), h)  # (b, l, h, n)

    packing = validate_packing(seq_idx, cu_seqlens, return_varlen_states, b, l, x.device)
    if initial_states is None:
        state = torch.zeros(b, h, p, n, dtype=dtype, device=x.device)
    else:
        state = initial_states.to(dtype)  # (b, h, p, n)

    y = torch.empty(b, l, h, p, dtype=dtype, device=x.device)
    previous = torch.zeros(b, dtype=torch.int32, device=x.device)  # the sequence before position 0: 0
    ends = {end - 1 for _, end in packing.bounds[0]} if packing and packing.return_varlen_states else set()
    varlen_states = []
    for t in range(l):
        if packing is not None:  # a new sequence starts from a zero state
            same = packing.seq_idx[:, t] == previous  # (b,)
            state = state * same.to(dtype)[:, None, None, None]
            previous = packing.seq_idx[:, t]
        state = decode_update(state, xc[:, t], dt[:, t], A, Bh[:, t])  # (b, h, p, n)
        y[:, t] = torch.einsum("bhpn,bhn->bhp", state, Ch[:, t])  # y_t = state_t · C_t
        if t in ends:
            varlen_states.append(state[0])

    y = skip_and_gate(y, xc, D=D, z=z).to(x.dtype)
    results = (y, state) if return_final_states else (y,)
    if packing is not None and packing.return_varlen_states:
        results = (*results, torch.stack(varlen_states))  # (number of sequences, h, p, n)
    return results if len(results) > 1 else y
