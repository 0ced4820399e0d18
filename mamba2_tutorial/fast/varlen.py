"""Each packed sequence's final state (``return_varlen_states``) from what the state stage already stored.

A sequence i ending at position t (in chunk c, at offset j = t - c·Q) has the final state

    S_i = [last(c-1) = i] · exp(a_j) · S_c  +  sum_k exp(a_j - a_k) · dt_k · x_k ⊗ B_k

with a = dA_cumsum of chunk c, S_c the state entering chunk c (the sequence's own state only where it
entered the chunk: ``fast/resets.py``'s last(c-1), 0 for chunk 0, whose entering state is the initial
state of sequence 0), and k over the positions of sequence i in chunk c up to t. It is the state the chunk
would pass on had it ended at t, with the resets. The true dt (not kd) and the true entering states must be
at hand: ``ssd_forward`` resolves its plan as training does for it
(:func:`~mamba2_tutorial.fast.plan.resolve`).

One vectorized torch pass on the host's device: per sequence, the rows of one chunk, so the work and the
memory are those of one chunk's state per sequence, in batches of sequences of bounded size. As mamba_ssm's
``chunk_state_varlen``, it reads the entering states in their stored dtype (x's) and sums in float32.
"""

from __future__ import annotations

import torch

__all__ = ["varlen_states"]

#: float32 elements of the widest intermediate per batch of sequences (a batch's x rows, (s, Q, h, p))
_BATCH_ELEMENTS = 1 << 25


def varlen_states(packing, x, B, dt_out, dA_cumsum, chunk_init_states) -> torch.Tensor:
    """(number of sequences, h, p, n) float32: the final state of every sequence of the one packed row
    (``packing``, a checked :class:`~mamba2_tutorial.runtime.validation.Packing` with b = 1), from x
    (1, l, h, p), B (1, l, g, n), the true dt_out and dA_cumsum (1, h, nchunks, Q) float32, and the true
    chunk_init_states (1, nchunks, h, p, n) of a forward run on that row."""
    _, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = dA_cumsum.shape[3]
    device = x.device
    bounds = packing.bounds[0]
    seq_idx = packing.seq_idx[0]
    starts = torch.tensor([start for start, _ in bounds], device=device)
    last = torch.tensor([end - 1 for _, end in bounds], device=device)
    chunk, offset = last // Q, last % Q
    # the state entering chunk c belongs to the sequence at position c·Q - 1; chunk 0's to sequence 0
    entering = torch.where(chunk > 0, seq_idx[(chunk * Q - 1).clamp(min=0)], 0)
    enters = entering == seq_idx[starts]
    a, dt = dA_cumsum[0].float(), dt_out[0].float()                      # (h, nchunks, Q)
    rows = torch.arange(Q, device=device)
    out = torch.empty(len(bounds), h, p, n, dtype=torch.float32, device=device)
    step = max(1, _BATCH_ELEMENTS // (Q * h * max(p, n)))
    for lo in range(0, len(bounds), step):
        s = slice(lo, lo + step)
        c, j = chunk[s], offset[s]
        a_c = a[:, c]                                                    # (h, s, Q)
        a_t = a_c.gather(2, j.view(1, -1, 1).expand(h, -1, 1))          # (h, s, 1): a at each sequence end
        pos = c[:, None] * Q + rows                                      # (s, Q)
        own = (pos >= starts[s, None]) & (pos <= last[s, None])          # the sequence's rows in its chunk
        w = torch.exp(torch.clamp(a_t - a_c, max=0.0)) * dt[:, c] * own  # (h, s, Q)
        at = pos.clamp(max=l - 1)
        xw = x[0, at].float() * w.permute(1, 2, 0)[..., None]             # (s, Q, h, p)
        local = torch.einsum("sqgjp,sqgn->sgjpn", xw.view(-1, Q, g, h // g, p), B[0, at].float())
        decay = torch.where(enters[s, None], torch.exp(a_t[..., 0]).T, 0.0)   # (s, h)
        out[s] = local.reshape(-1, h, p, n) + decay[..., None, None] * chunk_init_states[0, c].float()
    return out
