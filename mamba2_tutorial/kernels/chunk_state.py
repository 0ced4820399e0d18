"""Kernel 1 of 3: dt preprocessing, the in-chunk cumsum of dt·A, and each chunk's local state.

For one chunk c of one head h (chunk length Q, positions k = 0 .. Q-1 inside the chunk):

    dt_k      = clamp(softplus(dt_raw_k + dt_bias_h), dt_limit)   (bias, softplus optional as in mamba_ssm)
    dA_cs_k   = sum_{j <= k} dt_j · A_h                         (inclusive cumsum, fp32)
    state_c   = sum_k exp(dA_cs_{Q-1} - dA_cs_k) · dt_k · x_k ⊗ B_k      (p × n, fp32)

``state_c`` is what the recurrence h_t = exp(dt_t A) h_t-1 + dt_t x_t ⊗ B_t would hold at the end of the
chunk if it had started the chunk from zero. Kernel 2 (state passing) chains these local states across
chunks; kernel 3 (chunk scan) uses dt and dA_cs again, so this kernel also writes them to global memory.

Tiling. One block per (state tile, batch·chunk, head):

    grid = (cdiv(p, TP) · cdiv(n, TN),  b · nchunks,  h)

Each block loads the chunk's raw dt (Q,) and computes the decay weights of all Q positions, then builds the
(TP, TN) tile of the state as a matrix product over the chunk's positions:

    state[TP, TN] = (x · w)ᵀ[TP, Q] @ B[Q, TN]      with  w_k = exp(dA_cs_last - dA_cs_k) · dt_k

on the tensor cores (``ct.mma`` with a float32 accumulator), walking along the chunk TK rows at a time (the
classic GEMM main loop: the loads of one step overlap the mma of the previous one, and the x and B tiles in
flight stay small). The decay weights are folded into the x operand (TK × TP, smaller than B for the usual
p = 64, n = 128) and rounded to x's dtype, as mamba_ssm does. The dt preprocessing and the cumsum are only Q
scalars per block, so every block recomputes them instead of waiting for another block; only the first state
tile of each (chunk, head) stores them.

Ragged last chunk: loads past the sequence end use ``PaddingMode.ZERO`` and dt is forced to 0 there, so
padded positions add nothing to the state and dA_cs stays constant past the end (mamba_ssm's convention).
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ._host import (
    LaunchPlan,
    allocate,
    cdiv,
    check_chunk_size,
    check_kernel_dtype,
    hinted,
    launch,
    placeholder,
    resolve_backend,
    strided_ok,
    tile_size,
)
from .configs import FAST_16BIT, FAST_16BIT_CB, FAST_16BIT_Q128, FAST_BF16_Q128, LONG_FP16
from .spec import KernelSpec

__all__ = ["DT_BOX", "SPECS", "STATE_ACC", "STATE_DT_AHEAD", "STATE_DT_BOX", "STATE_DT_ONCE", "STATE_KD",
           "chunk_local_state",
           "computed_once", "key_log2", "load_dt_raw",
           "chunk_state_fwd", "chunk_state_kernel", "chunk_state_passing_heads_kernel",
           "chunk_state_passing_kernel",
           "chunk_state_passing_plan", "chunk_state_plan", "chunk_state_tiles", "launch_chunk_state",
           "launch_chunk_state_passing"]

LOG2E = 1.4426950408889634  # exp(u) = exp2(u · log2(e)); exp2 is the GPU's native exponential
SOFTPLUS_THRESHOLD = 20.0  # mamba_ssm: softplus(u) for u <= 20, u itself above (they agree to fp32 there)
ZERO = ct.PaddingMode.ZERO


def log1p(u):
    """log(1 + u) without cancellation for tiny u (cuTile has no log1p).

    w = 1 + u rounds u; log(w) · u / (w - 1) corrects for that rounding (Goldberg's trick). Where w == 1 in
    float32, u is below the rounding unit and log1p(u) = u to float32 accuracy.
    """
    w = 1.0 + u
    return ct.where(w == 1.0, u, ct.log(w) * (u / ct.where(w == 1.0, 1.0, w - 1.0)))


def process_dt(dt_raw, dt_bias_h, dt_min, dt_max, in_sequence,
               HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool]):
    """mamba_ssm's dt preprocessing on a float32 (Q,) tile: bias, softplus, clamp, zero past the end.

    The clamp to dt_limit = (dt_min, dt_max) is always applied, as in mamba_ssm: with the default (0, inf) it
    maps a negative dt to 0.
    """
    dt = dt_raw
    if HAS_DT_BIAS:
        dt = dt + dt_bias_h
    if DT_SOFTPLUS:
        # exp of at most 20: never overflows, also on the lanes the where() discards
        softplus = log1p(ct.exp(ct.minimum(dt, SOFTPLUS_THRESHOLD)))
        dt = ct.where(dt <= SOFTPLUS_THRESHOLD, softplus, dt)
    dt = ct.minimum(ct.maximum(dt, dt_min), dt_max)
    return ct.where(in_sequence, dt, 0.0)


def computed_once(v):
    """v (a (Q,) tile) unchanged, through a cumsum over a new axis of size 1: an identity that tileiras
    treats as a layout anchor (attempt 24 of docs/perf-notes.md).

    A (Q,) vector broadcast against the (Q, TP) x tile (``x_k * w_k[:, None]``) takes the broadcast's layout,
    and the compiler recomputes every elementwise op that leads to it there, back to the load: in the fused
    state stage the dt preprocessing (clamp, mask, the product with A) ran on 64 elements per thread
    instead of one or two, and log2 on kd (``KEY_LOG2``) doubled the chunk loop. Behind a scan the values
    are computed once, in the scan's layout, and only the result is redistributed. A plain function,
    inlined by cuTile."""
    return ct.cumsum(v.reshape((v.shape[0], 1)), axis=1).reshape((v.shape[0],))


def key_log2(dA_cs, dt):
    """The key-log2 form of each position's decay weight, kd = dA_cs · log2(e) - log2(dt) (+inf where dt = 0),
    so that exp(dA_cs_m - dA_cs_k) · dt_k = exp2(dA_cs_m · log2(e) - kd_k): what the chunk scan reads with
    ``FACTORED = KEY_LOG2`` (kernels/chunk_scan_cb.py). Only for dt >= 0. A plain function, inlined by
    cuTile."""
    return dA_cs * LOG2E - ct.log2(dt)


@ct.kernel
def chunk_state_kernel(x, B, dt, A, dt_bias,                 # inputs
                       dt_out, dA_cumsum, states,            # outputs
                       heads_per_group: int, dt_min: float, dt_max: float,
                       Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int], TN: ct.Constant[int],
                       HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool]):
    """x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,)
    -> dt_out, dA_cumsum (b, h, nchunks, Q) fp32, states (b, nchunks, h, p, n) fp32."""
    pid_pn = ct.bid(0)             # which (TP, TN) tile of the p × n state
    pid_bc = ct.bid(1)             # batch · nchunks + chunk
    h = ct.bid(2)                  # head
    nchunks = dA_cumsum.shape[2]
    b = pid_bc // nchunks
    c = pid_bc % nchunks
    n_tiles = ct.cdiv(states.shape[4], TN)
    i_p = pid_pn // n_tiles        # tile row (headdim) and column (state dim)
    i_n = pid_pn % n_tiles
    g = h // heads_per_group       # the group whose B this head reads
    seqlen = x.shape[1]

    # --- dt preprocessing and the cumsum of dt·A over this chunk, (Q,) float32 ---
    # The index of a load is in TILE units: along l, tile c of size Q starts at position c·Q.
    dt_raw = ct.load(dt, (b, c, h), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,)).astype(ct.float32)
    A_h = ct.load(A, (h,), shape=()).astype(ct.float32)
    dt_bias_h = ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0
    t = c * Q + ct.arange(Q, dtype=ct.int32)            # absolute positions of the chunk's rows
    dt_c = process_dt(dt_raw, dt_bias_h, dt_min, dt_max, t < seqlen, HAS_DT_BIAS, DT_SOFTPLUS)
    dA_cs = ct.cumsum(dt_c * A_h, axis=0)                # inclusive: dA_cs_k = sum_{j<=k} dt_j A
    if pid_pn == 0:                                      # one writer per (chunk, head)
        ct.store(dt_out, (b, h, c, 0), dt_c.reshape((1, 1, 1, Q)))
        ct.store(dA_cumsum, (b, h, c, 0), dA_cs.reshape((1, 1, 1, Q)))

    # --- decay from each position to the chunk end: exp(dA_cs_last - dA_cs_k) <= 1 ---
    dA_cs_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))  # (1,) broadcasts against (Q,)
    # the difference is <= 0 whenever A <= 0; the min() guarantees exp never sees a positive argument
    w = ct.exp2(ct.minimum(dA_cs_last - dA_cs, 0.0) * LOG2E, flush_to_zero=True) * dt_c    # (Q,) float32

    # --- state tile = (x · w)ᵀ @ B on the tensor cores, TK chunk rows per step, float32 accumulation ---
    state = ct.zeros((TP, TN), dtype=ct.float32)
    # steps past the sequence end would load tiles entirely out of bounds (undefined in cuTile): skip them
    n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
    for kt in range(n_steps):
        k_tile = c * (Q // TK) + kt                      # row tile index along l, in units of TK
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
        B_k = ct.load(B, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO).reshape((TK, TN))
        w_k = ct.extract(w, (kt,), shape=(TK,))          # this step's TK decay weights
        xw = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)      # mma operands in x's dtype
        state = ct.mma(ct.transpose(xw), B_k.astype(x.dtype), state)
    ct.store(states, (b, c, h, i_p, i_n), state.reshape((1, 1, 1, TP, TN)))


#: bits of the fused and segmented state kernels' FORM (``SSDConfig.state_key_log2`` and ``state_form``):
#: dt_out receives the key-log2 form kd (only when dt >= 0) ...
STATE_KD = 1
#: ... dt passes through :func:`computed_once` (attempt 24 of docs/perf-notes.md) ...
STATE_DT_ONCE = 2
#: ... the chunk's mma accumulates into the decayed state instead of a zeroed tile (no separate local tile),
STATE_ACC = 4
#: ... the walk loads the next chunk's raw dt one chunk ahead (:func:`load_dt_raw`), so that the gather (Q
#: scalars h elements apart: no TMA) overlaps this chunk's work instead of stalling the next one's start
STATE_DT_AHEAD = 8
#: ... dt is loaded as a (Q, DT_BOX) box of DT_BOX neighbouring heads (contiguous along h: a TMA load the
#: producer warp can issue ahead, instead of Q scalar loads h elements apart) and this head's column taken
STATE_DT_BOX = 16
#: heads per dt box (:data:`STATE_DT_BOX`): 16 bf16 = 32 bytes, above TMA's 16-byte minimum row
DT_BOX = 16


def load_dt_raw(dt, b, c, h, Q, BOX=False):
    """Chunk c's raw dt of head h, (Q,) float32, zero past the sequence end: Q scalars h elements apart, or
    (BOX, :data:`STATE_DT_BOX`) the column of head h in a (Q, DT_BOX) box of neighbouring heads. A plain
    function."""
    if BOX:
        box = ct.load(dt, (b, c, h // DT_BOX), shape=(1, Q, DT_BOX), padding_mode=ZERO).reshape((Q, DT_BOX))
        return ct.extract(box, (0, h % DT_BOX), shape=(Q, 1)).reshape((Q,)).astype(ct.float32)
    return ct.load(dt, (b, c, h), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,)).astype(ct.float32)


def chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p, i_n, seqlen, dt_min,
                      dt_max, Q, TK, TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, lat, S, FORM=0, dt_raw=None):
    """One chunk of a walk over chunks (the fused and the segmented state stages): dt preprocessing and the
    in-chunk cumsum (stored to dt_out and dA_cumsum), the chunk's local (TP, TN) state tile exactly as
    chunk_state_kernel builds it, and the state carried over the chunk. Returns (dA_cs_last (1,),
    exp(dA_cs_last) · S + local, float32). A plain function: cuTile inlines it into the kernel's chunk loop;
    ``lat`` is a latency hint for the x and B loads (or None). FORM, a compile-time constant, is a sum of
    :data:`STATE_KD` (only when dt >= 0: ``dt_out`` receives each position's :func:`key_log2` form kd
    instead of dt), :data:`STATE_DT_ONCE` and :data:`STATE_ACC`: the same results up to float32 rounding,
    different code. ``dt_raw``: this chunk's raw dt, loaded by the caller (:data:`STATE_DT_AHEAD`); else
    loaded here."""
    if dt_raw is None:
        dt_raw = load_dt_raw(dt, b, c, h, Q, FORM & STATE_DT_BOX)
    t = c * Q + ct.arange(Q, dtype=ct.int32)
    dt_c = process_dt(dt_raw, dt_bias_h, dt_min, dt_max, t < seqlen, HAS_DT_BIAS, DT_SOFTPLUS)
    if FORM & STATE_DT_ONCE:
        dt_c = computed_once(dt_c)
    dA_cs = ct.cumsum(dt_c * A_h, axis=0)
    # every state tile of (b, h) stores the same dt_out and dA_cumsum: a store under `if pid_pn == 0`
    # here was the suspect of the hang of multi-tile fused launches (docs/perf-notes.md, attempt 15)
    if FORM & STATE_KD:
        ct.store(dt_out, (b, h, c, 0), key_log2(dA_cs, dt_c).reshape((1, 1, 1, Q)))
    else:
        ct.store(dt_out, (b, h, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (b, h, c, 0), dA_cs.reshape((1, 1, 1, Q)))
    dA_cs_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    w = ct.exp2(ct.minimum(dA_cs_last - dA_cs, 0.0) * LOG2E, flush_to_zero=True) * dt_c
    # decay over the whole chunk, as in state_passing_kernel: S_c+1 = exp(dA_cs_last) · S_c + local
    decay = ct.exp2(dA_cs_last * LOG2E, flush_to_zero=True).reshape((1, 1))
    acc = decay * S if FORM & STATE_ACC else ct.zeros((TP, TN), dtype=ct.float32)
    n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
    for kt in range(n_steps):
        k_tile = c * (Q // TK) + kt
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO, latency=lat)
        B_k = ct.load(B, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO, latency=lat)
        x_k, B_k = x_k.reshape((TK, TP)), B_k.reshape((TK, TN))
        w_k = ct.extract(w, (kt,), shape=(TK,))
        xw = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
        acc = ct.mma(ct.transpose(xw), B_k.astype(x.dtype), acc)
    return dA_cs_last, acc if FORM & STATE_ACC else decay * S + acc


@ct.kernel
def chunk_state_passing_kernel(x, B, dt, A, dt_bias, initial_states,                # inputs
                               dt_out, dA_cumsum, chunk_init_states, final_states,  # outputs
                               heads_per_group: int, dt_min: float, dt_max: float,
                               Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                               TN: ct.Constant[int], HAS_DT_BIAS: ct.Constant[bool],
                               DT_SOFTPLUS: ct.Constant[bool], HAS_INITIAL_STATES: ct.Constant[bool],
                               LAT: ct.Constant[int], FORM: ct.Constant[int]):
    """Kernels 1 and 2 in one: x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,),
    initial_states (b, h, p, n) -> dt_out, dA_cumsum (b, h, nchunks, Q) fp32, chunk_init_states
    (b, nchunks, h, p, n) in its own dtype (x's in ssd_forward), final_states (b, h, p, n) fp32.

    One block per (state tile, batch, head) walks the chunks in order: per chunk it stores the state entering
    the chunk, builds the chunk's local state exactly as chunk_state_kernel does, and carries
    S = exp(dA_cs_last) · S + local in a float32 loop-carried tile. The float32 chunk states never go to
    global memory. LAT > 0: latency hint (1-10) on the x and B loads; 0: the compiler's default.
    FORM: see ``chunk_local_state`` (STATE_KD, only when dt >= 0: dt_out receives the key-log2 form kd).
    """
    pid_pn = ct.bid(0)
    b = ct.bid(1)
    h = ct.bid(2)
    n_tiles = ct.cdiv(chunk_init_states.shape[4], TN)
    i_p = pid_pn // n_tiles
    i_n = pid_pn % n_tiles
    g = h // heads_per_group
    seqlen = x.shape[1]
    nchunks = dA_cumsum.shape[2]
    lat = LAT if LAT > 0 else None
    A_h = ct.load(A, (h,), shape=()).astype(ct.float32)
    dt_bias_h = ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0

    if HAS_INITIAL_STATES:
        S = ct.load(initial_states, (b, h, i_p, i_n), shape=(1, 1, TP, TN), padding_mode=ZERO)
        S = S.reshape((TP, TN)).astype(ct.float32)
    else:
        S = ct.zeros((TP, TN), dtype=ct.float32)

    if FORM & STATE_DT_AHEAD:
        dt_next = load_dt_raw(dt, b, 0, h, Q, FORM & STATE_DT_BOX)
    for c in range(nchunks):
        S_out = S.astype(chunk_init_states.dtype)
        ct.store(chunk_init_states, (b, c, h, i_p, i_n), S_out.reshape((1, 1, 1, TP, TN)))
        if FORM & STATE_DT_AHEAD:  # this chunk's dt was loaded one chunk ago; start the next one's gather
            dt_raw = dt_next
            dt_next = load_dt_raw(dt, b, min(c + 1, nchunks - 1), h, Q, FORM & STATE_DT_BOX)
            _, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p, i_n,
                                     seqlen, dt_min, dt_max, Q, TK, TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, lat, S,
                                     FORM, dt_raw)
        else:
            _, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p, i_n,
                                     seqlen, dt_min, dt_max, Q, TK, TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, lat, S,
                                     FORM)

    ct.store(final_states, (b, h, i_p, i_n), S.reshape((1, 1, TP, TN)))


@ct.kernel
def chunk_state_passing_heads_kernel(x, B, dt, A, dt_bias, initial_states,                # inputs
                                     dt_out, dA_cumsum, chunk_init_states, final_states,  # outputs
                                     heads_per_group: int, dt_min: float, dt_max: float,
                                     Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                                     TN: ct.Constant[int], HB: ct.Constant[int],
                                     HAS_DT_BIAS: ct.Constant[bool], DT_SOFTPLUS: ct.Constant[bool],
                                     HAS_INITIAL_STATES: ct.Constant[bool],
                                     LAT: ct.Constant[int], KEY_LOG2: ct.Constant[bool]):
    """chunk_state_passing_kernel's results with HB heads of one group per block (grid (1, b, h / HB); the
    state must be one (TP, TN) = (p, n) tile): each (TK, n) tile of B is loaded once for the HB heads
    instead of once per head. An experiment (``SSDConfig(state_heads=HB)``, attempt 18 of
    docs/perf-notes.md): the fused stage's B reads are larger than its x reads at n = 128, p = 64, and all of
    a group's heads read the same B."""
    b = ct.bid(1)
    hb = ct.bid(2)
    g = (hb * HB) // heads_per_group
    seqlen = x.shape[1]
    nchunks = dA_cumsum.shape[2]
    lat = LAT if LAT > 0 else None
    A_hs = ()
    biases = ()
    Ss = ()
    for j in ct.static_iter(range(HB)):
        h = hb * HB + j
        A_hs = A_hs + (ct.load(A, (h,), shape=()).astype(ct.float32),)
        biases = biases + (ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0,)
        if HAS_INITIAL_STATES:
            S0 = ct.load(initial_states, (b, h, 0, 0), shape=(1, 1, TP, TN), padding_mode=ZERO)
            Ss = Ss + (S0.reshape((TP, TN)).astype(ct.float32),)
        else:
            Ss = Ss + (ct.zeros((TP, TN), dtype=ct.float32),)

    for c in range(nchunks):
        t = c * Q + ct.arange(Q, dtype=ct.int32)
        ws = ()
        lasts = ()
        locs = ()
        for j in ct.static_iter(range(HB)):
            h = hb * HB + j
            ct.store(chunk_init_states, (b, c, h, 0, 0),
                     Ss[j].astype(chunk_init_states.dtype).reshape((1, 1, 1, TP, TN)))
            dt_raw = ct.load(dt, (b, c, h), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,))
            dt_raw = dt_raw.astype(ct.float32)
            dt_c = process_dt(dt_raw, biases[j], dt_min, dt_max, t < seqlen, HAS_DT_BIAS, DT_SOFTPLUS)
            dA_cs = ct.cumsum(dt_c * A_hs[j], axis=0)
            if KEY_LOG2:
                ct.store(dt_out, (b, h, c, 0), key_log2(dA_cs, dt_c).reshape((1, 1, 1, Q)))
            else:
                ct.store(dt_out, (b, h, c, 0), dt_c.reshape((1, 1, 1, Q)))
            ct.store(dA_cumsum, (b, h, c, 0), dA_cs.reshape((1, 1, 1, Q)))
            last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
            ws = ws + (ct.exp2(ct.minimum(last - dA_cs, 0.0) * LOG2E, flush_to_zero=True) * dt_c,)
            lasts = lasts + (last,)
            locs = locs + (ct.zeros((TP, TN), dtype=ct.float32),)
        n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
        for kt in range(n_steps):
            k_tile = c * (Q // TK) + kt
            B_k = ct.load(B, (b, k_tile, g, 0), shape=(1, TK, 1, TN), padding_mode=ZERO, latency=lat)
            B_k = B_k.reshape((TK, TN)).astype(x.dtype)
            new_locs = ()
            for j in ct.static_iter(range(HB)):
                x_k = ct.load(x, (b, k_tile, hb * HB + j, 0), shape=(1, TK, 1, TP), padding_mode=ZERO,
                              latency=lat).reshape((TK, TP))
                w_k = ct.extract(ws[j], (kt,), shape=(TK,))
                xw = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
                new_locs = new_locs + (ct.mma(ct.transpose(xw), B_k, locs[j]),)
            locs = new_locs
        new_Ss = ()
        for j in ct.static_iter(range(HB)):
            decay = ct.exp2(lasts[j] * LOG2E, flush_to_zero=True).reshape((1, 1))
            new_Ss = new_Ss + (decay * Ss[j] + locs[j],)
        Ss = new_Ss

    for j in ct.static_iter(range(HB)):
        ct.store(final_states, (b, hb * HB + j, 0, 0), Ss[j].reshape((1, 1, TP, TN)))


# ----------------------------------------------------------------------------------------------------
# Host side: tile sizes, the wrapper, example launches.
# ----------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=256)
def chunk_state_tiles(chunk_size: int, headdim: int, dstate: int, dtype: torch.dtype) -> tuple[int, int, int]:
    """(TK, TP, TN): chunk rows per mma step and the state tile of one block; powers of two, capped.

    bf16/fp16: up to 64 × 128 state tiles, one block per (chunk, head) for the usual p = 64, n = 128, and 64
    rows per step. float32 mma has no fast tensor-core path and its code grows with the tile, so float32
    uses at most 32 × 32.
    """
    TK = min(chunk_size, 64)
    if dtype == torch.float32:
        return TK, tile_size(headdim, 32), tile_size(dstate, 32)
    return TK, tile_size(headdim, 64), tile_size(dstate, 128)


@functools.lru_cache(maxsize=256)
def chunk_state_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_kernel` for x (b, l, h, p), states (b, cdiv(l, Q), h, p, n)."""
    TK, TP, TN = chunk_state_tiles(Q, p, n, dtype)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b * cdiv(l, Q), h), {"Q": Q, "TK": TK, "TP": TP, "TN": TN})


def launch_chunk_state(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, backend, poison=False,
                       hints=(None, None)):
    """Allocate the outputs and launch :data:`chunk_state_kernel`; no argument checks.
    ``hints`` = (occupancy, num_ctas): GPU compiler hints."""
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = chunk_size
    nchunks = -(-l // Q)
    device = x.device
    dt_out = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    dA_cumsum = allocate((b, h, nchunks, Q), torch.float32, device, poison)
    states = allocate((b, nchunks, h, p, n), torch.float32, device, poison)
    plan = chunk_state_plan(b, l, h, p, n, Q, x.dtype)
    has_bias = dt_bias is not None
    args = (x, B, dt, A, dt_bias if has_bias else placeholder(device, torch.float32, 1),
            dt_out, dA_cumsum, states,
            h // g, float(dt_limit[0]), float(dt_limit[1]),
            Q, plan.tiles["TK"], plan.tiles["TP"], plan.tiles["TN"], has_bias, bool(dt_softplus))
    launch(chunk_state_kernel, plan.grid, args, backend, hints)
    return dt_out, dA_cumsum, states


@functools.lru_cache(maxsize=256)
def chunk_state_passing_tiles(chunk_size: int, headdim: int, dstate: int, dtype: torch.dtype,
                              tiles: tuple | None = None) -> tuple[int, int, int]:
    """(TK, TP, TN) of the fused kernel: the chunk_state tiles unless ``tiles`` = (TP, TN) overrides the state
    tile (smaller state tiles give more blocks to a long sequential loop over few (batch, head) pairs), or
    ``tiles`` = (TP, TN, TK) also the chunk rows per mma step (capped at the chunk size).

    bf16/fp16 take a whole chunk of up to 256 rows per mma step (chunk_state takes 64), so that there is no
    loop inside the loop over chunks: measured 0.344 -> 0.285 ms at b8-l4096-h80 against 128 rows per step
    (attempt 19 of docs/perf-notes.md; presumably tileiras then overlaps the next chunk's loads with this
    chunk's mma). With 64 rows, 4 steps, tileiras kept the decay weights w in an 8 KiB stack frame per thread
    of the sm_90 cubin. At occupancy 2 with ``chunk_local_state``'s FORM 6 (attempt 24), 128 rows per step
    are faster than 256 (``configs.STATE_OCC2``).
    """
    TK, TP, TN = chunk_state_tiles(chunk_size, headdim, dstate, dtype)
    if dtype != torch.float32:
        TK = min(chunk_size, 256)
    if tiles is not None:
        TP, TN = tile_size(headdim, tiles[0]), tile_size(dstate, tiles[1])
        if len(tiles) > 2:  # (TP, TN, TK): chunk rows per mma step too, at most the chunk size
            if tiles[2] < 16 or tiles[2] & (tiles[2] - 1):
                raise ValueError(f"state_tiles[2] (TK, chunk rows per mma step) must be a power of two >= 16 "
                                 f"(capped at the chunk size {chunk_size}); got {tiles[2]}")
            TK = min(tiles[2], chunk_size)
    return TK, TP, TN


@functools.lru_cache(maxsize=256)
def chunk_state_passing_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                             tiles: tuple | None = None) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_passing_kernel`: one block per (state tile, batch, head)."""
    TK, TP, TN = chunk_state_passing_tiles(Q, p, n, dtype, tiles)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b, h), {"Q": Q, "TK": TK, "TP": TP, "TN": TN})


def launch_chunk_state_passing(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states,
                               backend, poison=False, out_dtype=None, tiles=None, hints=(None, None),
                               latency=0, heads=1, key_log2=False, form=0, outs=None):
    """Allocate the outputs, launch :data:`chunk_state_passing_kernel`; no argument checks.

    Returns ``(dt_out, dA_cumsum, chunk_init_states, final_states)``: chunk_init_states in ``out_dtype``
    (default x's dtype), final_states float32; ``outs``, if given, are those four buffers (views of larger
    ones, say) and nothing is allocated. ``heads`` > 1 launches
    :data:`chunk_state_passing_heads_kernel` (``heads`` heads of one group per block; one state tile).
    ``key_log2`` (only when dt >= 0): dt_out holds the key-log2 form kd instead of dt
    (``chunk_local_state``); ``form``: :data:`STATE_DT_ONCE` and/or :data:`STATE_ACC` (not with ``heads``
    > 1)."""
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = chunk_size
    nchunks = -(-l // Q)
    device = x.device
    if outs is None:
        outs = (allocate((b, h, nchunks, Q), torch.float32, device, poison),
                allocate((b, h, nchunks, Q), torch.float32, device, poison),
                allocate((b, nchunks, h, p, n), out_dtype or x.dtype, device, poison),
                allocate((b, h, p, n), torch.float32, device, poison))
    dt_out, dA_cumsum, chunk_init_states, final_states = outs
    plan = chunk_state_passing_plan(b, l, h, p, n, Q, x.dtype, tiles)
    has_bias, has_init = dt_bias is not None, initial_states is not None
    args = (x, B, dt, A, dt_bias if has_bias else placeholder(device, torch.float32, 1),
            initial_states if has_init else placeholder(device, torch.float32, 4),
            dt_out, dA_cumsum, chunk_init_states, final_states,
            h // g, float(dt_limit[0]), float(dt_limit[1]),
            Q, plan.tiles["TK"], plan.tiles["TP"], plan.tiles["TN"], has_bias, bool(dt_softplus), has_init,
            latency, (STATE_KD if key_log2 else 0) | form)
    if heads > 1:
        t = plan.tiles
        if plan.grid[0] != 1 or (h // g) % heads:
            raise ValueError(f"state_heads = {heads} needs one state tile per head (got {t['TP']} x "
                             f"{t['TN']} tiles for p = {p}, n = {n}) and heads per group h/g = {h // g} "
                             "divisible by it")
        args = args[:14] + (t["TK"], t["TP"], t["TN"], heads) + args[17:-1] + (bool(key_log2),)
        launch(chunk_state_passing_heads_kernel, (1, b, h // heads), args, backend, hints)
        return dt_out, dA_cumsum, chunk_init_states, final_states
    launch(chunk_state_passing_kernel, plan.grid, args, backend, hints)
    return dt_out, dA_cumsum, chunk_init_states, final_states


def chunk_state_fwd(x, dt, A, B, chunk_size, *, dt_bias=None, dt_softplus=False,
                    dt_limit=(0.0, float("inf")), backend="auto", _poison=False):
    """Kernel 1 on its own: ``(dt_out, dA_cumsum, states)``.

    x (b, l, h, p), dt (b, l, h), A (h,), B (b, l, g, n) -> dt_out and dA_cumsum (b, h, nchunks, Q) float32,
    states (b, nchunks, h, p, n) float32. The same results as ``reference.chunk_cumsum`` followed by
    ``reference.chunk_state``. ``_poison`` (tests only) fills the outputs with NaN before the launch.
    """
    from mamba2_tutorial.validation import validate_ssd_inputs

    validate_ssd_inputs(x, dt, A, B, B, chunk_size=chunk_size, dt_bias=dt_bias, dt_limit=dt_limit)
    check_kernel_dtype("x", x)
    check_chunk_size(chunk_size)
    x, dt, A, B, dt_bias = (strided_ok(t) for t in (x, dt, A, B, dt_bias))
    where = resolve_backend(backend, x)
    return launch_chunk_state(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, where, _poison)


def _example_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.rand(b, l, h, generator=gen)
        A = -torch.rand(h, generator=gen)
        nchunks = cdiv(l, Q)
        plan = chunk_state_plan(b, l, h, p, n, Q, dtype)
        args = (x, B, dt, A, torch.rand(h, generator=gen),
                torch.empty(b, h, nchunks, Q), torch.empty(b, h, nchunks, Q),
                torch.empty(b, nchunks, h, p, n),
                h // g, 0.0, float("inf"), Q, *(plan.tiles[k] for k in ("TK", "TP", "TN")), True, True)
        return plan.grid, args

    return make


def _example_fused_args(dtype, Q, b=2, l=300, h=4, p=48, g=2, n=80, tiles=None, form=0, options=True):
    """Example launch of the fused kernel; ``options``: dt_bias, softplus and initial states (False: the
    benchmark's inputs)."""
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.rand(b, l, h, generator=gen)
        A = -torch.rand(h, generator=gen)
        nchunks = cdiv(l, Q)
        plan = chunk_state_passing_plan(b, l, h, p, n, Q, dtype, tiles)
        args = (x, B, dt, A, torch.rand(h, generator=gen), torch.randn(b, h, p, n, generator=gen),
                torch.empty(b, h, nchunks, Q), torch.empty(b, h, nchunks, Q),
                torch.empty(b, nchunks, h, p, n, dtype=dtype), torch.empty(b, h, p, n),
                h // g, 0.0, float("inf"), Q, *(plan.tiles[k] for k in ("TK", "TP", "TN")),
                options, options, options, 0, form)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_state_bf16_q256", chunk_state_kernel,
               _example_args(torch.bfloat16, 256, p=64, n=128)),
    KernelSpec("ssd.chunk_state_f16_q64", chunk_state_kernel, _example_args(torch.float16, 64)),
    KernelSpec("ssd.chunk_state_f32_q64", chunk_state_kernel, _example_args(torch.float32, 64)),
    KernelSpec("ssd.chunk_state_passing_bf16_q256", chunk_state_passing_kernel,
               _example_fused_args(torch.bfloat16, 256, p=64, n=128)),
    # what ssd_forward launches for bf16 inputs (configs.FAST_16BIT: 64x128 state tile and its hints)
    KernelSpec("ssd.fast_bf16.chunk_state_passing",
               hinted(chunk_state_passing_kernel, *FAST_16BIT.state_hints),
               _example_fused_args(torch.bfloat16, 256, p=64, n=128, tiles=FAST_16BIT.state_tiles)),
    # ... at chunk size 128 (configs.FAST_16BIT_Q128), and for few (batch, head) pairs in fp16
    # (configs.LONG_FP16; bf16 runs the segmented stage of kernels/segments.py)
    KernelSpec("ssd.fast_bf16_q128.chunk_state_passing",
               hinted(chunk_state_passing_kernel, *FAST_16BIT_Q128.state_hints),
               _example_fused_args(torch.bfloat16, 128, p=64, n=128, tiles=FAST_16BIT_Q128.state_tiles)),
    # ... for large bf16 problems (configs.FAST_16BIT_CB at chunk size 256: occupancy 2, 128 rows per mma
    # step, state_form 6, kd stored by the stage; configs.FAST_BF16_Q128 at 128: state_form 2, kd)
    KernelSpec("ssd.fast_bf16_cb.chunk_state_passing",
               hinted(chunk_state_passing_kernel, *FAST_16BIT_CB.state_hints),
               _example_fused_args(torch.bfloat16, 256, l=700, p=64, n=128, tiles=FAST_16BIT_CB.state_tiles,
                                   form=STATE_KD | FAST_16BIT_CB.state_form)),
    KernelSpec("ssd.fast_bf16_cb_q128.chunk_state_passing",
               hinted(chunk_state_passing_kernel, *FAST_BF16_Q128.state_hints),
               _example_fused_args(torch.bfloat16, 128, p=64, n=128, tiles=FAST_BF16_Q128.state_tiles,
                                   form=STATE_KD | FAST_BF16_Q128.state_form)),
    KernelSpec("ssd.long_fp16.chunk_state", hinted(chunk_state_kernel, *LONG_FP16.state_hints),
               _example_args(torch.bfloat16, 256, p=64, n=128)),
]
