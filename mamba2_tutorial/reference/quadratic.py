"""Rung 2: the SSD's dual (quadratic, attention-like) form, y = (L ∘ C Bᵀ) · (dt · x).

Unrolling the recurrence ``state_t = exp(a_t)·state_{t-1} + dt_t·x_t ⊗ B_t`` (with ``a_t = dt_t·A``)
gives, per head,

    y_i = Σ_{j ≤ i} exp(a_{j+1} + ... + a_i) · (C_i · B_j) · dt_j · x_j  +  exp(a_1 + ... + a_i) · s_0 · C_i
        = Σ_j M[i, j] · dt_j · x_j  +  (initial-state term)

    M = L ∘ (C Bᵀ),   L = exp(segsum(a))  (l, l) lower-triangular decay mask,   C Bᵀ (l, l)

One big masked matrix product: parallel over all (i, j) pairs, like attention, but O(l²) time and memory.

Packed sequences (``seq_idx``): L is also block-diagonal, ``L[i, j] = 0`` unless positions i and j
belong to one sequence, the same mask a packed attention uses; the initial state reaches sequence 0 only.
"""

from __future__ import annotations

import torch

from ..runtime.validation import validate_packing
from ._dt import prepare_sequence
from ._heads import groups_to_heads, skip_and_gate
from .segsum import segsum

__all__ = ["ssd_quadratic"]


def ssd_quadratic(
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
):
    """SSD forward by the dual form: one (l × l) masked matrix per (batch, head).

    Same arguments and results as :func:`ssd_recurrent`: x (b, l, h, p), dt (b, l, h), A (h,), B and C
    (b, l, g, n), D (h,) or (h, p), z (b, l, h, p), dt_bias (h,), initial_states (b, h, p, n); returns y
    (b, l, h, p) in x.dtype, or (y, final_states (b, h, p, n) float32/float64). ``seq_idx`` (b, l) int32:
    packed sequences, L block-diagonal.
    """
    (b, l, h, p, g, n), dtype, dt = prepare_sequence(  # checked; dt (b, l, h) processed, in dtype
        x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
        dt_softplus=dt_softplus, dt_limit=dt_limit,
    )
    xc = x.to(dtype)  # (b, l, h, p)
    Bc, Cc = B.to(dtype), C.to(dtype)  # (b, l, g, n)

    a = (dt * A.to(dtype)).transpose(1, 2)  # (b, h, l): log-decay a_t = dt_t · A per step
    L = torch.exp(segsum(a))  # (b, h, l, l): L[i, j] = exp(a_{j+1} + ... + a_i), 0 above the diagonal
    packing = validate_packing(seq_idx, None, False, b, l, x.device)
    if packing is not None:  # block-diagonal: nothing crosses from one sequence into the next
        same = packing.seq_idx[:, :, None] == packing.seq_idx[:, None, :]  # (b, l, l)
        L = L * same[:, None].to(dtype)
        first = (packing.seq_idx == 0).to(dtype)  # (b, l): the positions the initial state reaches
    CB = torch.einsum("bign,bjgn->bgij", Cc, Bc)  # (b, g, l, l): C_i · B_j, one matrix per group
    CB = groups_to_heads(CB, h, dim=1)  # (b, h, l, l): head i uses group i // (h // g)
    M = L * CB  # (b, h, l, l): the SSD matrix (without dt)
    dtx = dt[..., None] * xc  # (b, l, h, p): dt_j · x_j
    y = torch.einsum("bhij,bjhp->bihp", M, dtx)  # y_i = Σ_j M[i, j] · dt_j · x_j

    decay_from_start = torch.exp(a.cumsum(dim=-1))  # (b, h, l): exp(a_1 + ... + a_i), a sum of a ≤ 0 terms
    if initial_states is not None:
        state0 = initial_states.to(dtype)  # (b, h, p, n)
        Ch = groups_to_heads(Cc, h)  # (b, l, h, n)
        read_state0 = torch.einsum("blhn,bhpn->blhp", Ch, state0)  # C_i · state_0
        reach = decay_from_start.transpose(1, 2)  # (b, l, h): exp(a_1 + ... + a_i)
        if packing is not None:
            reach = reach * first[:, :, None]
        y = y + reach[..., None] * read_state0

    y = skip_and_gate(y, xc, D=D, z=z).to(x.dtype)
    if not return_final_states:
        return y

    # final state = Σ_j exp(a_{j+1} + ... + a_l) · dt_j · x_j ⊗ B_j  (+ the decayed initial state)
    decay_to_end = L[:, :, -1, :]  # (b, h, l): the last row of L
    Bh = groups_to_heads(Bc, h)  # (b, l, h, n)
    final = torch.einsum("bhl,blhp,blhn->bhpn", decay_to_end, dtx, Bh)
    if initial_states is not None:
        kept = decay_from_start[:, :, -1]  # (b, h)
        if packing is not None:
            kept = kept * first[:, -1, None]
        final = final + kept[:, :, None, None] * state0
    return y, final
