"""Pieces the fast scans share (plain functions: cuTile inlines them into the kernels that call them)."""

from __future__ import annotations

import cuda.tile as ct

from ..kernels.chunk_state import LOG2E

__all__ = ["entering_state_T", "inter_chunk_heads", "rows_only"]

ZERO = ct.PaddingMode.ZERO


def entering_state_T(x, chunk_init_states, b, c, h, i_p, TP, NS):
    """S_cᵀ (NS, TP) of head h in x's dtype: tile i_p of the state entering chunk c."""
    S_c = ct.load(chunk_init_states, (b, c, h, i_p, 0), shape=(1, 1, 1, TP, NS), padding_mode=ZERO)
    return ct.transpose(S_c.reshape((TP, NS)).astype(x.dtype))


def inter_chunk_heads(C_m, x, dA_cumsum, chunk_init_states, b, c, hb, i_m, i_p, TM, TP, NS, HB, S_cTs=None,
                      carries=None):
    """The inter-chunk part for the HB heads of a block, one 2-D accumulator each:
    acc_j = (C_m @ S_cᵀ) · exp(dA_cs_m). Returns (accs, a_ms), tuples over the heads, with
    a_m = dA_cs_m · log2(e) for the intra-chunk decay. ``S_cTs`` (a tuple of the heads' S_cᵀ) when the caller
    loaded them already; otherwise each head's is loaded here. ``carries`` (the segmented state stage, a
    tuple over the heads of (K_sᵀ, exp(d_c))): S_c = L_c + exp(d_c) · K_s, so the product is
    C_m @ L_cᵀ + exp(d_c) · (C_m @ K_sᵀ), two mmas on loaded tiles."""
    accs = ()
    a_ms = ()
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        a_m = ct.load(dA_cumsum, (b, h, c, i_m), shape=(1, 1, 1, TM)).reshape((TM,)) * LOG2E
        S_cT = entering_state_T(x, chunk_init_states, b, c, h, i_p, TP, NS) if S_cTs is None else S_cTs[j]
        acc = ct.zeros((TM, TP), dtype=ct.float32)
        if carries is not None:
            K_sT, decay = carries[j]
            acc = ct.mma(C_m, K_sT, acc) * decay
        acc = ct.mma(C_m, S_cT, acc)
        accs = accs + (acc * ct.exp2(a_m, flush_to_zero=True)[:, None],)
        a_ms = a_ms + (a_m,)
    return accs, a_ms


def rows_only(accs, rows, HB):
    """The HB heads' (TM, TP) accumulators with the rows outside ``rows`` ((TM, 1) bool) set to zero."""
    kept = ()
    for j in ct.static_iter(range(HB)):
        kept = kept + (ct.where(rows, accs[j], 0.0),)
    return kept
