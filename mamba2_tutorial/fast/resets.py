"""Packed sequences inside the fast forward's kernels: where the state resets, in chunk-local terms.

A packed row (``seq_idx`` (b, l) int32, non-decreasing; see :mod:`mamba2_tutorial.reference.packed`) must
give each sequence's SSD as if it ran alone. The chunked algorithm keeps its shape; only a few factors
become zero. With ``last(c)`` the seq_idx at chunk c's last position inside the row, and ``last(-1) = 0``
(so ``initial_states`` enters sequence 0 only), as mamba_ssm's kernels do:

- **the chunk's local state** takes only the positions of the sequence the chunk ends in:
  w_k · [seq_k = last(c)]; the others belong to sequences that ended inside the chunk;
- **the carry** over chunk c is decayed to zero where the chunk ends in another sequence than the one the
  state entering it belongs to: exp(dA_cs_last) · [last(c) = last(c-1)]. A walk that keeps the log of its
  decay (the segmented stage) adds :data:`NO_CARRY` there, which exp turns into 0;
- **the scan**: P[m, k] gets the block-diagonal mask [seq_m = seq_k], and row m's share of the state
  entering the chunk the mask [seq_m = last(c-1)].

The final state is then the last sequence's, as mamba_ssm returns it. The backward takes the same factors,
transposed: the state gradient carried backwards over chunk c is decayed to zero where the carry reset
(:func:`carry_kept`), only the rows of the entering sequence ask anything of the entering state, every
in-chunk pair (m, k) of two sequences is masked, and only the keys of the chunk's last sequence get a share
of the state the chunk adds (:func:`chunk_end_keys`). These are ``@ct.function`` helpers; every kernel takes
them only under its compile-time ``HAS_SEQ_IDX``, so a kernel without it compiles to the code it had before
(``seq_idx`` is then an unused placeholder).
"""

from __future__ import annotations

import cuda.tile as ct
import torch

from ..kernels._host import placeholder

__all__ = ["NO_CARRY", "SEQ_GAP", "carry_kept", "carry_reset", "chunk_end_keys", "chunk_end_seq",
           "entering_rows", "entering_seq", "packed_decay_tile", "seq_gap", "seq_idx_arg", "seq_tile"]

ZERO = ct.PaddingMode.ZERO

#: the log of a decay that is exactly zero: finite, so that sums of it stay far below float32's range
#: without an infinity in the arithmetic; exp2(NO_CARRY · log2(e)) flushes to 0
NO_CARRY = -1.0e30

#: the log2 gap between two sequences of a packed row in a decay's exponent (:func:`seq_gap`): exp2 of
#: anything below -SEQ_GAP + 100 flushes to 0 in float32, so a key of an earlier sequence adds nothing
SEQ_GAP = 256.0


@ct.function
def seq_tile(seq_idx, b, tile, T):
    """seq_idx of row b at the T positions of tile ``tile`` (T,) int32 (0 past the row's end)."""
    return ct.load(seq_idx, (b, tile), shape=(1, T), padding_mode=ZERO).reshape((T,))


@ct.function
def seq_gap(seq_m, seq_k):
    """float32: min(SEQ_GAP · (seq_k - seq_m), 0), broadcast over seq_idx tiles of the rows m and the keys k
    (seq_m[:, None] and seq_k[None, :] for a (TM, TK) tile; a scalar last(c) against a (Q,) tile for a walk's
    weights). Added to the exponent of a decay exp2(v), it keeps v where m and k are in one sequence (adding
    an exact 0) and makes exp2 flush to 0 where k is in an earlier sequence (seq_k < seq_m). Never positive:
    a row past the row's end reads seq_idx 0 (zero padding), and a positive gap there would make exp2
    overflow into inf and 0 · inf into NaN. A block-diagonal ``ct.where`` on P does the same, but its
    (TM, TK) bool tile doubles the scan's registers and spills."""
    return ct.minimum((seq_k.astype(ct.float32) - seq_m.astype(ct.float32)) * SEQ_GAP, 0.0)


def packed_decay_tile(a_m, a_k, m_pos, k_pos, seq_m, seq_k):
    """The causal decay L = exp(a_m - a_k) of a (rows × keys) tile of a packed row, 0 above the diagonal and
    between two sequences (``a_m``, ``a_k`` in log2 units; seq_m (TM,), seq_k (TK,) their seq_idx): the
    backward's decay tile with the block-diagonal mask in the exponent (:func:`seq_gap`), not a second
    ``ct.where``, which spills. A plain function: cuTile inlines it."""
    causal = m_pos[:, None] >= k_pos[None, :]
    v = ct.minimum(a_m[:, None] - a_k[None, :], 0.0) + seq_gap(seq_m[:, None], seq_k[None, :])
    return ct.where(causal, ct.exp2(v, flush_to_zero=True), 0.0)


@ct.function
def chunk_end_seq(seq_idx, b, c, Q):
    """last(c): seq_idx at chunk c's last position inside the row, a scalar."""
    return ct.load(seq_idx, (b, min((c + 1) * Q, seq_idx.shape[1]) - 1), shape=())


@ct.function
def entering_seq(seq_idx, b, c, Q):
    """last(c-1): the sequence the state entering chunk c belongs to; 0 for chunk 0 (the initial state's)."""
    before = ct.load(seq_idx, (b, max(c * Q - 1, 0)), shape=())
    return ct.where(c > 0, before, 0)


@ct.function
def carry_reset(seq_idx, b, c, Q, dA_cs_last):
    """For a walk over chunks: ``(last(c), the log of the carry's decay over chunk c)``, the latter
    dA_cs_last, or :data:`NO_CARRY` where the chunk ends in another sequence than the one its entering state
    belongs to. The local state takes only the positions k with seq_idx[k] = last(c): the walk masks each
    key tile's weights with it (:func:`seq_tile`), never the whole chunk's, which would spill."""
    last = chunk_end_seq(seq_idx, b, c, Q)
    return last, ct.where(last == entering_seq(seq_idx, b, c, Q), dA_cs_last, NO_CARRY)


@ct.function
def entering_rows(seq_m, seq_idx, b, c, Q):
    """(TM, 1) bool: the rows m (seq_m (TM,), their seq_idx) of the sequence the state entering chunk c
    belongs to, the only rows it reaches."""
    return (seq_m == entering_seq(seq_idx, b, c, Q))[:, None]


@ct.function
def carry_kept(seq_idx, b, c, Q):
    """Whether the carry crosses chunk c (a scalar bool): the chunk ends in the sequence its entering state
    belongs to, last(c) = last(c-1). Where not, the carry's decay over the chunk is 0."""
    return chunk_end_seq(seq_idx, b, c, Q) == entering_seq(seq_idx, b, c, Q)


@ct.function
def chunk_end_keys(seq_k, seq_idx, b, c, Q):
    """(T,) bool: the keys k (seq_k (T,), their seq_idx) of chunk c's last sequence, the only keys that add
    to the state the chunk passes on."""
    return seq_k == chunk_end_seq(seq_idx, b, c, Q)


def seq_idx_arg(call) -> tuple:
    """(seq_idx, HAS_SEQ_IDX) for a kernel that takes packed rows, from a StateCall, ScanCall or GradCall:
    the call's seq_idx and True, or an int32 placeholder and False."""
    if call.seq_idx is None:
        return placeholder(call.x.device, torch.int32, 2), False
    return call.seq_idx, True
