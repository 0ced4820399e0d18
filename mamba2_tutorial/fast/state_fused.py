"""The fused state stage: kernels 1 and 2 in one launch, the float32 chunk states kept on chip.

The taught path stores every chunk's local state (b, nchunks, h, p, n) in float32 (kernel 1) and reads it back
(kernel 2): at b8-l4096-h80 that is 1.3 GB of traffic. Here one block per (state tile, batch, head) walks the
chunks in order and does both jobs per chunk: it stores the state entering the chunk, builds the chunk's
local state exactly as ``chunk_state_kernel`` does, and carries

    S = exp(dA_cs_last) · S + local                     (a float32 loop-carried (TP, TN) tile)

so only the entering states (in x's dtype) and dt / dA_cumsum reach global memory. The price: a grid of only
b·h blocks (state tiles × batch × heads), each with a sequential loop; ``fast/segments.py`` cuts that loop
when there are too few blocks.

``FORM`` (a :class:`~mamba2_tutorial.fast.config.StateForm`, compile-time) changes the code, not the math:
``KD`` stores the key-log2 form kd instead of dt (for the chunk scan's ``Decay.KEY_LOG2``), ``DT_ONCE`` puts
the dt vector behind a layout anchor, ``ACC`` accumulates the chunk's mma straight into the decayed state.
"""

from __future__ import annotations

import functools

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv, placeholder, tile_size
from ..kernels.chunk_state import LOG2E, chunk_state_tiles, process_dt
from ..kernels.state_passing import initial_state_tile
from ..runtime.launch import launch
from .config import Fused, Segmented, StateForm
from .plan import StateCall
from .resets import carry_reset, seq_gap, seq_idx_arg, seq_tile

__all__ = ["chunk_local_state", "chunk_state_passing_kernel", "chunk_state_passing_plan",
           "chunk_state_passing_tiles", "computed_once", "head_scalars", "key_log2",
           "launch_chunk_state_passing", "state_args", "state_outputs"]

ZERO = ct.PaddingMode.ZERO
KD, DT_ONCE, ACC = int(StateForm.KD), int(StateForm.DT_ONCE), int(StateForm.ACC)


def computed_once(v):
    """v (a (Q,) tile) unchanged, through a cumsum over a new axis of size 1: an identity that the compiler
    treats as a layout anchor. A (Q,) vector broadcast against the (Q, TP) x tile takes the broadcast's
    layout, and the compiler recomputes every elementwise op that leads to it there, back to the load (the
    dt preprocessing on 64 elements per thread instead of one or two). Behind a scan the values are computed
    once, in the scan's layout, and only the result is redistributed. Inlined by cuTile."""
    return ct.cumsum(v.reshape((v.shape[0], 1)), axis=1).reshape((v.shape[0],))


def key_log2(dA_cs, dt):
    """The key-log2 form of each position's decay weight, kd = dA_cs · log2(e) - log2(dt) (+inf where dt = 0),
    so that exp(dA_cs_m - dA_cs_k) · dt_k = exp2(dA_cs_m · log2(e) - kd_k): what the chunk scan reads with
    ``Decay.KEY_LOG2``. Only for dt >= 0. Inlined by cuTile."""
    return dA_cs * LOG2E - ct.log2(dt)


def head_scalars(A, dt_bias, h, HAS_DT_BIAS):
    """Head h's A and dt_bias (0 without a bias), float32 scalars. Inlined by cuTile."""
    A_h = ct.load(A, (h,), shape=()).astype(ct.float32)
    return A_h, ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0


def chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p, i_n, seqlen, dt_min,
                      dt_max, Q, TK, TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, S, FORM=0, seq_idx=None,
                      HAS_SEQ_IDX=False):
    """One chunk of a walk over chunks (the fused and the segmented state stages): dt preprocessing and the
    in-chunk cumsum (stored to dt_out and dA_cumsum), the chunk's local (TP, TN) state tile exactly as
    ``chunk_state_kernel`` builds it, and the state carried over the chunk. Returns (log_decay (1,),
    exp(log_decay) · S + local, float32), log_decay = dA_cs_last, the log of the carry's decay over the
    chunk. ``HAS_SEQ_IDX`` (packed rows, ``fast/resets.py``): the local state takes only the positions of
    the chunk's last sequence, and log_decay is ``NO_CARRY`` where the carry resets. Inlined by cuTile into
    the kernel's chunk loop."""
    dt_raw = ct.load(dt, (b, c, h), shape=(1, Q, 1), padding_mode=ZERO).reshape((Q,)).astype(ct.float32)
    t = c * Q + ct.arange(Q, dtype=ct.int32)
    dt_c = process_dt(dt_raw, dt_bias_h, dt_min, dt_max, t < seqlen, HAS_DT_BIAS, DT_SOFTPLUS)
    if FORM & DT_ONCE:
        dt_c = computed_once(dt_c)
    dA_cs = ct.cumsum(dt_c * A_h, axis=0)
    # every state tile of (b, h) stores the same dt_out and dA_cumsum (idempotent stores, no branch)
    if FORM & KD:
        ct.store(dt_out, (b, h, c, 0), key_log2(dA_cs, dt_c).reshape((1, 1, 1, Q)))
    else:
        ct.store(dt_out, (b, h, c, 0), dt_c.reshape((1, 1, 1, Q)))
    ct.store(dA_cumsum, (b, h, c, 0), dA_cs.reshape((1, 1, 1, Q)))
    dA_cs_last = ct.extract(dA_cs, (Q - 1,), shape=(1,))
    v = ct.minimum(dA_cs_last - dA_cs, 0.0) * LOG2E
    log_decay = dA_cs_last
    if HAS_SEQ_IDX:  # the local state takes only the chunk's last sequence (last): the walk masks the others'
        last, log_decay = carry_reset(seq_idx, b, c, Q, dA_cs_last)  # weights as it uses them, which
        if TK == Q:  # for one step over the whole chunk is a gap in their exponent (a ct.where spills there)
            v = v + seq_gap(last, seq_tile(seq_idx, b, c, Q))
    w = ct.exp2(v, flush_to_zero=True) * dt_c
    # decay over the whole chunk, as in state_passing_kernel: S_c+1 = exp(dA_cs_last) · S_c + local
    decay = ct.exp2(log_decay * LOG2E, flush_to_zero=True).reshape((1, 1))
    acc = decay * S if FORM & ACC else ct.zeros((TP, TN), dtype=ct.float32)
    n_steps = min(Q // TK, ct.cdiv(seqlen - c * Q, TK))
    for kt in range(n_steps):
        k_tile = c * (Q // TK) + kt
        x_k = ct.load(x, (b, k_tile, h, i_p), shape=(1, TK, 1, TP), padding_mode=ZERO).reshape((TK, TP))
        B_k = ct.load(B, (b, k_tile, g, i_n), shape=(1, TK, 1, TN), padding_mode=ZERO).reshape((TK, TN))
        w_k = ct.extract(w, (kt,), shape=(TK,))
        if HAS_SEQ_IDX and TK < Q:  # tile by tile: a mask on the whole chunk's w would spill in this loop
            w_k = ct.where(seq_tile(seq_idx, b, k_tile, TK) == last, w_k, 0.0)
        xw = (x_k.astype(ct.float32) * w_k[:, None]).astype(x.dtype)
        acc = ct.mma(ct.transpose(xw), B_k.astype(x.dtype), acc)
    return log_decay, acc if FORM & ACC else decay * S + acc


@ct.kernel
def chunk_state_passing_kernel(x, B, dt, A, dt_bias, initial_states, seq_idx,       # inputs
                               dt_out, dA_cumsum, chunk_init_states, final_states,  # outputs
                               heads_per_group: int, dt_min: float, dt_max: float,
                               Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                               TN: ct.Constant[int], HAS_DT_BIAS: ct.Constant[bool],
                               DT_SOFTPLUS: ct.Constant[bool], HAS_INITIAL_STATES: ct.Constant[bool],
                               HAS_SEQ_IDX: ct.Constant[bool], FORM: ct.Constant[int]):
    """Kernels 1 and 2 in one: x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,),
    initial_states (b, h, p, n), seq_idx (b, l) int32 -> dt_out (or kd), dA_cumsum (b, h, nchunks, Q) fp32,
    chunk_init_states (b, nchunks, h, p, n) in its own dtype, final_states (b, h, p, n) fp32. Grid (state
    tiles, b, h). ``HAS_SEQ_IDX``: packed rows, the state resets where seq_idx changes (``fast/resets.py``);
    without it seq_idx is an unused placeholder."""
    pid_pn = ct.bid(0)
    b = ct.bid(1)
    h = ct.bid(2)
    n_tiles = ct.cdiv(chunk_init_states.shape[4], TN)
    i_p, i_n = pid_pn // n_tiles, pid_pn % n_tiles              # the (TP, TN) state tile
    g = h // heads_per_group
    A_h, dt_bias_h = head_scalars(A, dt_bias, h, HAS_DT_BIAS)
    S = initial_state_tile(initial_states, b, h, i_p, i_n, TP, TN, HAS_INITIAL_STATES)

    for c in range(dA_cumsum.shape[2]):
        ct.store(chunk_init_states, (b, c, h, i_p, i_n),
                 S.astype(chunk_init_states.dtype).reshape((1, 1, 1, TP, TN)))
        _, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p, i_n,
                                 x.shape[1], dt_min, dt_max, Q, TK, TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, S, FORM,
                                 seq_idx, HAS_SEQ_IDX)

    ct.store(final_states, (b, h, i_p, i_n), S.reshape((1, 1, TP, TN)))


@functools.lru_cache(maxsize=256)
def chunk_state_passing_tiles(chunk_size: int, headdim: int, dstate: int, dtype: torch.dtype,
                              stage: Fused | Segmented) -> tuple[int, int, int]:
    """(TK, TP, TN): the stage's ``state_tile`` (TP, TN) clipped to p and n, and its ``mma_rows`` (TK), the
    chunk rows per mma step. Without ``mma_rows``, 16-bit inputs take a whole chunk of up to 256 rows per
    mma step (no loop inside the loop over chunks), float32 chunk_state's 64."""
    TK = chunk_state_tiles(chunk_size, headdim, dstate, dtype)[0]
    if dtype != torch.float32:
        TK = min(chunk_size, 256)
    if stage.mma_rows is not None:
        TK = min(stage.mma_rows, chunk_size)
    TP, TN = stage.state_tile
    return TK, tile_size(headdim, TP), tile_size(dstate, TN)


@functools.lru_cache(maxsize=256)
def chunk_state_passing_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                             stage: Fused | Segmented) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_passing_kernel` for the ``stage``: one block per (state tile,
    batch, head)."""
    TK, TP, TN = chunk_state_passing_tiles(Q, p, n, dtype, stage)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b, h), {"Q": Q, "TK": TK, "TP": TP, "TN": TN})


def state_args(call: StateCall, stage: Fused | Segmented):
    """The launch arguments the fused and segmented kernels share: their inputs (x, B, dt, A, dt_bias), the
    scalars (heads_per_group, dt_min, dt_max), the flags (HAS_DT_BIAS, DT_SOFTPLUS) and FORM (the stage's
    form, with KD where it stores kd)."""
    x, dt_bias = call.x, call.dt_bias
    has_bias = dt_bias is not None
    inputs = (x, call.B, call.dt, call.A, dt_bias if has_bias else placeholder(x.device, torch.float32, 1))
    scalars = (x.shape[2] // call.B.shape[2], float(call.dt_limit[0]), float(call.dt_limit[1]))
    flags = (has_bias, bool(call.dt_softplus))
    return inputs, scalars, flags, (KD if stage.store_kd else 0) | int(stage.form)


def state_outputs(call: StateCall) -> tuple:
    """The outputs both fused state stages write: dt_out (or kd), dA_cumsum, chunk_init_states (x's dtype)."""
    x, poison = call.x, call.poison
    b, l, h, p = x.shape
    Q = call.chunk_size
    nchunks = cdiv(l, Q)
    return (allocate((b, h, nchunks, Q), torch.float32, x.device, poison),
            allocate((b, h, nchunks, Q), torch.float32, x.device, poison),
            allocate((b, nchunks, h, p, call.B.shape[3]), x.dtype, x.device, poison))


def launch_chunk_state_passing(call: StateCall, stage: Fused):
    """Allocate the outputs, launch :data:`chunk_state_passing_kernel` with the ``stage``'s tiles, occupancy,
    form and store_kd (as :func:`~mamba2_tutorial.fast.plan.resolve` left it); no argument checks. Returns
    ``(dt_out (or kd with store_kd), dA_cumsum, chunk_init_states in x's dtype, final_states float32)``."""
    x = call.x
    b, l, h, p = x.shape
    n = call.B.shape[3]
    dt_out, dA_cumsum, chunk_init_states = state_outputs(call)
    final_states = allocate((b, h, p, n), torch.float32, x.device, call.poison)
    plan = chunk_state_passing_plan(b, l, h, p, n, call.chunk_size, x.dtype, stage)
    t = plan.tiles
    inputs, scalars, flags, FORM = state_args(call, stage)
    initial_states = call.initial_states
    has_init = initial_states is not None
    seq_idx, has_seq_idx = seq_idx_arg(call)
    args = (*inputs, initial_states if has_init else placeholder(x.device, torch.float32, 4), seq_idx,
            dt_out, dA_cumsum, chunk_init_states, final_states, *scalars,
            t["Q"], t["TK"], t["TP"], t["TN"], *flags, has_init, has_seq_idx, FORM)
    launch(chunk_state_passing_kernel, plan.grid, args, call.backend, stage.occupancy)
    return dt_out, dA_cumsum, chunk_init_states, final_states
