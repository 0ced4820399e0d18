"""Rung 3: the chunked SSD — the four steps the cuTile kernels follow.

Split the sequence into nchunks = ceil(l / Q) chunks of Q steps (the last one ragged: padded with dt = 0,
which adds nothing and decays nothing). Then the SSD matrix M splits into blocks:

* diagonal blocks (inside one chunk) are small dual forms, computed directly;
* every off-diagonal block is low rank: it factors through the state at the chunk boundary.

The four steps (mamba_ssm's ``_chunk_cumsum_fwd``, ``_chunk_state_fwd``, ``_state_passing_fwd``,
``_chunk_scan_fwd``):

1. ``chunk_cumsum``:  dt → processed dt and dA_cumsum, the in-chunk running sum of dt·A     (b, h, c, Q)
2. ``chunk_state``:   each chunk's own final state, started from zero                     (b, c, h, p, n)
3. ``state_passing``: the sequential scan over chunks: the state ENTERING each chunk       (b, c, h, p, n)
4. ``chunk_scan``:    y = in-chunk dual form + C · (entering state, decayed)             (b, l, h, p)

Steps 1, 2 and 4 are parallel over chunks; only step 3 is sequential, over l / Q chunks instead of l steps.

Decays inside a chunk are ``exp(dA_cumsum[s] - dA_cumsum[k])`` for k ≤ s: a difference of in-chunk cumsums,
clamped to ≤ 0 exactly as mamba_ssm does (``exp(min(Δ, 0))``), so it can never overflow. The cumsum restarts
at every chunk, so its magnitude (and the cancellation error) is bounded by Q steps, not by l.
"""

from __future__ import annotations

import torch

from ..runtime.validation import check_chunk_size, check_shape, validate_ssd_inputs
from ._dt import compute_dtype, process_dt
from ._heads import groups_to_heads, skip_and_gate

__all__ = ["ssd_chunked", "chunk_cumsum", "chunk_state", "state_passing", "chunk_scan"]


def _check_tensors(**named) -> None:
    for name, value in named.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")


def _nchunks(seqlen: int, chunk_size: int) -> int:
    return -(-seqlen // chunk_size)  # ceil(l / Q)


def _pad_to_chunks(t: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """Zero-pad dim 1 (the sequence) of (b, l, ...) to a multiple of Q and split it: (b, c, Q, ...)."""
    b, l = t.shape[:2]
    c = _nchunks(l, chunk_size)
    pad = c * chunk_size - l
    if pad:
        t = torch.cat([t, t.new_zeros(b, pad, *t.shape[2:])], dim=1)
    return t.reshape(b, c, chunk_size, *t.shape[2:])


def _check_chunked(x: torch.Tensor, dt_out: torch.Tensor, dA_cumsum: torch.Tensor):
    """Shapes shared by steps 2 and 4: x (b, l, h, p), dt_out and dA_cumsum (b, h, c, Q) with c = ceil(l / Q).

    Returns (b, l, h, p, c, Q); raises ValueError naming the argument whose shape is wrong.
    """
    check_shape(x, "x", ("b", "l", "h", "p"), (None,) * 4)
    b, l, h, p = x.shape
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "c", "Q"), (b, h, None, None))
    Q = dA_cumsum.shape[-1]
    c = _nchunks(l, Q)
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "c", "Q"), (b, h, c, Q))
    check_shape(dt_out, "dt_out", ("b", "h", "c", "Q"), (b, h, c, Q))
    return b, l, h, p, c, Q


def _in_chunk_decay(dA_cumsum: torch.Tensor) -> torch.Tensor:
    """exp(dA_cumsum[s] - dA_cumsum[k]) for k ≤ s, else 0: (b, h, c, Q) → (b, h, c, Q, Q) as [..., s, k]."""
    Q = dA_cumsum.shape[-1]
    diff = dA_cumsum[..., :, None] - dA_cumsum[..., None, :]  # (b, h, c, Q, Q)
    causal = torch.ones(Q, Q, dtype=torch.bool, device=dA_cumsum.device).tril()  # k ≤ s
    return torch.exp(diff.clamp(max=0.0)).masked_fill(~causal, 0.0)


def chunk_cumsum(
    dt: torch.Tensor,
    A: torch.Tensor,
    chunk_size: int,
    *,
    dt_bias: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
):
    """Step 1: process dt and take the running sum of dt·A inside each chunk.

    dt (b, l, h), A (h,) → ``(dt_out, dA_cumsum)``, both (b, h, nchunks, Q), float32 (float64 for float64 dt).
    ``dt_out`` is dt after bias, softplus and clamp, and ZERO past the sequence end (the ragged last chunk);
    ``dA_cumsum[..., s] = dt_out[..., 0]·A + ... + dt_out[..., s]·A`` (inclusive; it restarts at every chunk).
    """
    _check_tensors(dt=dt, A=A)
    check_shape(dt, "dt", ("b", "l", "h"), (None, None, None))
    b, l, h = dt.shape
    check_shape(A, "A", ("h",), (h,))
    check_chunk_size(chunk_size)
    dtype = compute_dtype(dt.dtype)
    dt_out = process_dt(dt, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit, dtype=dtype)
    dt_out = _pad_to_chunks(dt_out, chunk_size)  # (b, c, Q, h), zeros AFTER processing past the end
    dt_out = dt_out.permute(0, 3, 1, 2).contiguous()  # (b, h, c, Q)
    dA = dt_out * A.to(dtype)[None, :, None, None]  # (b, h, c, Q): log-decay of each step
    dA_cumsum = dA.cumsum(dim=-1)  # (b, h, c, Q)
    return dt_out, dA_cumsum


def chunk_state(
    x: torch.Tensor, B: torch.Tensor, dt_out: torch.Tensor, dA_cumsum: torch.Tensor
) -> torch.Tensor:
    """Step 2: every chunk's final state as if the chunk started from a zero state.

    x (b, l, h, p), B (b, l, g, n), dt_out and dA_cumsum (b, h, c, Q) → states (b, c, h, p, n) in
    dA_cumsum's dtype (float32; float64 for float64 inputs)::

        states[c] = Σ_k exp(dA_cumsum[c, Q-1] - dA_cumsum[c, k]) · dt[c, k] · x[c, k] ⊗ B[c, k]
    """
    _check_tensors(x=x, B=B, dt_out=dt_out, dA_cumsum=dA_cumsum)
    b, l, h, p, c, Q = _check_chunked(x, dt_out, dA_cumsum)
    check_shape(B, "B", ("b", "l", "g", "n"), (b, l, None, None))
    dtype = dA_cumsum.dtype
    xc = _pad_to_chunks(x.to(dtype), Q)  # (b, c, Q, h, p)
    Bh = _pad_to_chunks(groups_to_heads(B.to(dtype), h), Q)  # (b, c, Q, h, n)
    decay_to_end = torch.exp((dA_cumsum[..., -1:] - dA_cumsum).clamp(max=0.0))  # (b, h, c, Q)
    weight = decay_to_end * dt_out  # (b, h, c, Q): exp(...) · dt_k
    return torch.einsum("bhck,bckhp,bckhn->bchpn", weight, xc, Bh)


def state_passing(states: torch.Tensor, dA_cumsum: torch.Tensor, initial_states: torch.Tensor | None = None):
    """Step 3: carry the state across chunks — the only sequential step (over nchunks, not l).

    states (b, c, h, p, n) from :func:`chunk_state`, dA_cumsum (b, h, c, Q), initial_states (b, h, p, n) →
    ``(chunk_init_states, final_states)``: chunk_init_states (b, c, h, p, n) is the state ENTERING each chunk
    (chunk 0 gets initial_states, or zeros), final_states (b, h, p, n) the state after the last chunk::

        entering[0] = initial;   entering[c+1] = exp(dA_cumsum[c, Q-1]) · entering[c] + states[c]
    """
    _check_tensors(states=states, dA_cumsum=dA_cumsum)
    check_shape(states, "states", ("b", "c", "h", "p", "n"), (None,) * 5)
    b, c, h, p, n = states.shape
    check_shape(dA_cumsum, "dA_cumsum", ("b", "h", "c", "Q"), (b, h, c, None))
    dtype = states.dtype
    chunk_decay = torch.exp(dA_cumsum[..., -1]).to(dtype)  # (b, h, c): decay across each whole chunk
    if initial_states is None:
        state = states.new_zeros(b, h, p, n)
    else:
        check_shape(initial_states, "initial_states", ("b", "h", "p", "n"), (b, h, p, n))
        state = initial_states.to(dtype)
    entering = torch.empty_like(states)  # (b, c, h, p, n)
    for ci in range(c):
        entering[:, ci] = state
        state = chunk_decay[:, :, ci, None, None] * state + states[:, ci]
    return entering, state


def chunk_scan(
    x: torch.Tensor,
    dt_out: torch.Tensor,
    dA_cumsum: torch.Tensor,
    C: torch.Tensor,
    B: torch.Tensor,
    chunk_init_states: torch.Tensor,
    *,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
) -> torch.Tensor:
    """Step 4: the outputs, chunk by chunk (all chunks in parallel).

    x (b, l, h, p), dt_out and dA_cumsum (b, h, c, Q), C and B (b, l, g, n), chunk_init_states
    (b, c, h, p, n), D (h,) or (h, p), z (b, l, h, p) → y (b, l, h, p) in x.dtype. For step s of chunk c::

        y[s] = exp(dA_cumsum[s]) · C[s] · entering[c]                       (off-diagonal blocks: the past)
             + Σ_{k ≤ s} (C[s] · B[k]) · exp(dA_cumsum[s] - dA_cumsum[k]) · dt[k] · x[k]   (diagonal block)
             + D · x[s],  then · silu(z[s])
    """
    _check_tensors(x=x, dt_out=dt_out, dA_cumsum=dA_cumsum, C=C, B=B, chunk_init_states=chunk_init_states)
    b, l, h, p, c, Q = _check_chunked(x, dt_out, dA_cumsum)
    check_shape(C, "C", ("b", "l", "g", "n"), (b, l, None, None))
    n = C.shape[-1]
    check_shape(B, "B", ("b", "l", "g", "n"), tuple(C.shape))
    check_shape(chunk_init_states, "chunk_init_states", ("b", "c", "h", "p", "n"), (b, c, h, p, n))
    dtype = dA_cumsum.dtype
    xc = _pad_to_chunks(x.to(dtype), Q)  # (b, c, Q, h, p)
    Cc = _pad_to_chunks(C.to(dtype), Q)  # (b, c, Q, g, n)
    Bc = _pad_to_chunks(B.to(dtype), Q)  # (b, c, Q, g, n)

    # the past: the entering state decayed to step s, read out by C[s]
    Ch = groups_to_heads(Cc, h)  # (b, c, Q, h, n)
    read_state = torch.einsum("bcshn,bchpn->bcshp", Ch, chunk_init_states.to(dtype))  # C[s] · entering[c]
    decay_in = torch.exp(dA_cumsum).permute(0, 2, 3, 1)  # (b, c, Q, h): decay from chunk start to s
    y_off = decay_in[..., None] * read_state  # (b, c, Q, h, p)

    # the present chunk: a small dual form per chunk
    CB = torch.einsum("bcsgn,bckgn->bcgsk", Cc, Bc)  # (b, c, g, Q, Q): C[s] · B[k]
    CB = groups_to_heads(CB, h, dim=2)  # (b, c, h, Q, Q)
    L = _in_chunk_decay(dA_cumsum)  # (b, h, c, Q, Q)
    dt_k = dt_out.permute(0, 2, 1, 3)[:, :, :, None, :]  # (b, c, h, 1, Q): dt of the source step k
    M = CB * L.permute(0, 2, 1, 3, 4) * dt_k  # (b, c, h, s, k)
    y_diag = torch.einsum("bchsk,bckhp->bcshp", M, xc)

    y = (y_off + y_diag).reshape(b, c * Q, h, p)[:, :l]  # drop the padding past the sequence end
    return skip_and_gate(y, x, D=D, z=z).to(x.dtype)


def ssd_chunked(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    chunk_size: int,
    *,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
    dt_bias: torch.Tensor | None = None,
    initial_states: torch.Tensor | None = None,
    dt_softplus: bool = False,
    dt_limit: tuple[float, float] = (0.0, float("inf")),
    return_final_states: bool = False,
):
    """SSD forward by the four chunked steps (any l: the last chunk may be ragged).

    Same arguments and results as :func:`ssd_recurrent`, plus the chunk size Q (a positive int; any value —
    the reference does not need a power of two). Returns y (b, l, h, p) in x.dtype, or (y, final_states) with
    final_states (b, h, p, n) float32 (float64 for float64 x).
    """
    validate_ssd_inputs(
        x, dt, A, B, C, chunk_size=chunk_size, D=D, z=z, dt_bias=dt_bias,
        initial_states=initial_states, dt_limit=dt_limit,
    )
    dt = dt.to(compute_dtype(x.dtype))  # float64 x → float64 everywhere
    dt_out, dA_cumsum = chunk_cumsum(
        dt, A, chunk_size, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit
    )  # (b, h, c, Q) each
    states = chunk_state(x, B, dt_out, dA_cumsum)  # (b, c, h, p, n)
    chunk_init_states, final_states = state_passing(states, dA_cumsum, initial_states)
    y = chunk_scan(x, dt_out, dA_cumsum, C, B, chunk_init_states, D=D, z=z)  # (b, l, h, p)
    return (y, final_states) if return_final_states else y
