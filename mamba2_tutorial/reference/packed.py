"""Packed sequences: several sequences of different lengths in one row, with nothing crossing between them.

Training on documents of different lengths without padding packs them end to end into one row and says which
position belongs to which document with ``seq_idx`` (b, l) int32, non-decreasing (mamba_ssm's convention;
Hugging Face's padding-free training passes it too)::

    seq_idx  0 0 0 0 0 1 1 2 2 2 2 2 2 2        three sequences of lengths 5, 2 and 7 in one row of l = 14
    cu_seqlens  (0, 5, 7, 14)                    the same boundaries as offsets (b = 1)

The SSD of a packed row must equal the SSD of each sequence run alone: the state resets to zero where
``seq_idx`` changes, so no state and no decay crosses a boundary, even one inside a chunk. In the dual form
that is a block-diagonal mask on L (``ssd_quadratic(..., seq_idx=...)``), in the recurrence a reset
(``ssd_recurrent(..., seq_idx=...)``). The call's ``initial_states`` enters sequence 0 only, and with
``return_varlen_states`` each sequence's final state comes back, (number of sequences, h, p, n).

:func:`ssd_each_sequence` is the definition made literal: it cuts every row at its boundaries and runs an SSD
on each sequence alone. With a float64 reference form it is the oracle the packed forms are checked against.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..runtime.validation import seq_idx_from_cu_seqlens, validate_packing, validate_ssd_inputs

__all__ = ["ssd_each_sequence", "seq_idx_from_cu_seqlens", "packed_results"]


def packed_results(y, final_states, varlen_states, return_final_states: bool, return_varlen_states: bool):
    """mamba_ssm's return convention: ``y``, then ``final_states`` if asked, then ``varlen_states`` if asked;
    a lone ``y`` is returned bare."""
    results = (y, *((final_states,) if return_final_states else ()),
               *((varlen_states,) if return_varlen_states else ()))
    return results if len(results) > 1 else y


def ssd_each_sequence(
    ssd: Callable,
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    seq_idx: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    return_final_states: bool = False,
    cu_seqlens: torch.Tensor | None = None,
    return_varlen_states: bool = False,
):
    """Run ``ssd`` on every sequence of every row alone and put the outputs back in place.

    ``ssd(x, dt, A, B, C, *, D, z, dt_bias, initial_states, dt_softplus, dt_limit, return_final_states=True)``
    is any SSD form (a reference form, or ``functools.partial(ssd_chunked, chunk_size=Q)``); it sees one
    sequence at a time, shapes (1, l_i, ...). Arguments and results as :func:`ssd_recurrent` with packing:
    x (b, l, h, p), ..., seq_idx (b, l) int32; returns y (b, l, h, p), then final_states (b, h, p, n) (each
    row's last sequence) if asked, then varlen_states (number of sequences, h, p, n) if asked (b = 1, with
    ``cu_seqlens``). Sequence 0 of a row starts from that row's ``initial_states``; every other sequence from
    zero. Differentiable wherever ``ssd`` is."""
    b, l, h, p, g, n = validate_ssd_inputs(x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias,
                                           initial_states=initial_states, dt_limit=dt_limit)
    packing = validate_packing(seq_idx, cu_seqlens, return_varlen_states, b, l, x.device)
    rows, finals, varlen = [], [], []
    for row, bounds in enumerate(packing.bounds):
        pieces = []
        for start, end in bounds:
            part = slice(start, end)
            first = int(packing.seq_idx[row, start]) == 0  # the initial state enters sequence 0 only
            y_i, final_i = ssd(
                x[row:row + 1, part], dt[row:row + 1, part], A, B[row:row + 1, part], C[row:row + 1, part],
                D=D, z=None if z is None else z[row:row + 1, part], dt_bias=dt_bias,
                initial_states=initial_states[row:row + 1] if initial_states is not None and first else None,
                dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=True)
            pieces.append(y_i)
            varlen.append(final_i[0])
        rows.append(torch.cat(pieces, dim=1))
        finals.append(final_i)
    y = torch.cat(rows, dim=0)
    final_states = torch.cat(finals, dim=0)
    varlen_states = torch.stack(varlen) if return_varlen_states else None
    return packed_results(y, final_states, varlen_states, return_final_states, return_varlen_states)
