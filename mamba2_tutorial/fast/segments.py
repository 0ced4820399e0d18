"""The fused state stage by segments of the sequence: for few (batch, head) pairs and long sequences.

The fused stage (``fast/state_fused.py``) walks all the chunks of one (batch, head) in one block, so its grid
has b · h blocks. At b1-h80 that is 80 blocks for an H200's 132 SMs, each walking 128 chunks in order: 40% of
the GPU idles while the rest runs a long sequential loop. The recurrence is linear, so the classic
parallel-scan trick applies. Cut the chunks into segments of ``cps`` chunks each:

1. ``chunk_state_segments_kernel``: one block per (state tile, batch·segment, head) walks ITS segment's chunks
   from a zero state, exactly as the fused kernel walks all of them. Per chunk c it stores the segment-local
   entering state L_c and the log of the decay from the segment start to chunk c, ``seg_prefix[b, h, c]``.
   At the end, the segment's local final state ``seg_states[b, s, h]`` and its total log decay
   ``seg_decay[b, h, s]``.
2. ``state_passing_kernel`` (the taught kernel 2, unchanged) over the SEGMENTS instead of the chunks: it
   carries the state across segments and gives ``carry[b, s, h]``, the true state entering segment s.
3. The chunk scan (``fast/scan_chunk.py`` with ``HAS_CARRY``) uses the true state entering chunk c of segment
   s = c // cps without ever forming it:

       C_m @ S_cᵀ = C_m @ L_cᵀ + exp(seg_prefix[c]) · (C_m @ carry[s]ᵀ)

   one more (TM, n) @ (n, TP) mma per row tile, on tiles it loads as they are. Training keeps the true
   states for the backward: there the scan forms S_c = L_c + exp(seg_prefix[c]) · carry[s] once per block,
   stores it over L_c and multiplies by it (``STORE_STATES``).

The sequential work per block shrinks from nchunks to cps chunks, and the grid grows from b · h to
b · h · nseg blocks, for the carry's reads and one more launch.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import cuda.tile as ct
import torch

from ..kernels._host import LaunchPlan, allocate, cdiv
from ..kernels.state_passing import launch_state_passing
from ..runtime.launch import launch
from .config import Segmented
from .plan import StateCall
from .resets import seq_idx_arg
from .state_fused import chunk_local_state, chunk_state_passing_tiles, head_scalars, state_args, state_outputs

__all__ = ["SegmentCarry", "chunk_state_segments_kernel", "launch_chunk_state_segments", "segment_layout",
           "segments_plan"]


@ct.kernel
def chunk_state_segments_kernel(x, B, dt, A, dt_bias, seq_idx,                          # inputs
                                dt_out, dA_cumsum, chunk_init_states,                    # outputs per chunk
                                seg_prefix, seg_states, seg_decay,                       # outputs per segment
                                heads_per_group: int, chunks_per_segment: int, dt_min: float, dt_max: float,
                                Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                                TN: ct.Constant[int], HAS_DT_BIAS: ct.Constant[bool],
                                DT_SOFTPLUS: ct.Constant[bool], HAS_SEQ_IDX: ct.Constant[bool],
                                FORM: ct.Constant[int]):
    """x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,), seq_idx (b, l) int32 (with
    ``HAS_SEQ_IDX``, packed rows: where the carry resets, its log decay is ``NO_CARRY``, so the carry from
    before never reaches the chunks after; ``fast/resets.py``) -> dt_out (or kd), dA_cumsum
    (b, h, nchunks, Q) float32; chunk_init_states (b, nchunks, h, p, n), the state entering each chunk FROM
    ITS SEGMENT'S START; seg_prefix (b, h, nchunks) float32; seg_states (b, nseg, h, p, n) float32;
    seg_decay (b, h, nseg, 1) float32. Grid (state tiles, b · nseg, h): block (i, b·nseg + s, h) walks chunks
    s·cps .. min((s+1)·cps, nchunks)."""
    pid_pn = ct.bid(0)
    pid_bs = ct.bid(1)
    h = ct.bid(2)
    nseg = seg_states.shape[1]
    b, s = pid_bs // nseg, pid_bs % nseg                        # batch, segment
    n_tiles = ct.cdiv(chunk_init_states.shape[4], TN)
    i_p, i_n = pid_pn // n_tiles, pid_pn % n_tiles              # the (TP, TN) state tile
    A_h, dt_bias_h = head_scalars(A, dt_bias, h, HAS_DT_BIAS)

    S = ct.zeros((TP, TN), dtype=ct.float32)          # the segment starts from zero: stage 2 adds the carry
    log_decay = ct.zeros((1,), dtype=ct.float32)      # sum of the chunks' log decays over the segment so far
    c0 = s * chunks_per_segment
    c_end = min(c0 + chunks_per_segment, dA_cumsum.shape[2])
    for c in range(c0, c_end):
        ct.store(chunk_init_states, (b, c, h, i_p, i_n),
                 S.astype(chunk_init_states.dtype).reshape((1, 1, 1, TP, TN)))
        ct.store(seg_prefix, (b, h, c), log_decay.reshape((1, 1, 1)))
        chunk_decay, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h,
                                           h // heads_per_group, i_p, i_n, x.shape[1], dt_min, dt_max, Q, TK,
                                           TP, TN, HAS_DT_BIAS, DT_SOFTPLUS, S, FORM, seq_idx, HAS_SEQ_IDX)
        log_decay = log_decay + chunk_decay

    ct.store(seg_states, (b, s, h, i_p, i_n), S.reshape((1, 1, 1, TP, TN)))
    ct.store(seg_decay, (b, h, s, 0), log_decay.reshape((1, 1, 1, 1)))


class SegmentCarry(NamedTuple):
    """What the scan needs to rebuild the true entering states S_c = L_c + exp(seg_prefix[c]) · carry[s]."""

    carry: torch.Tensor        #: (b, nseg, h, p, n): the state entering each segment
    seg_prefix: torch.Tensor   #: (b, h, nchunks) float32: log of the decay from the segment start to chunk c
    chunks_per_segment: int    #: cps: chunk c is in segment c // cps


def segment_layout(nchunks: int, segments: int) -> tuple[int, int]:
    """(chunks per segment, segments) for cutting ``nchunks`` chunks into at most ``segments`` segments of
    equal length (the last may be shorter); never an empty segment."""
    if segments < 1:
        raise ValueError(f"segments must be >= 1, got {segments}")
    cps = cdiv(nchunks, min(segments, nchunks))
    return cps, cdiv(nchunks, cps)


@functools.lru_cache(maxsize=256)
def segments_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype,
                  stage: Segmented) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_segments_kernel` for the ``stage`` (its ``segments`` filled in):
    one block per (state tile, batch·segment, head); the tiles are the fused kernel's. ``tiles["cps"]`` and
    ``tiles["nseg"]``: the segment layout."""
    if stage.segments is None:
        raise ValueError("segments_plan needs a Segmented stage with its segments filled in "
                         "(fast.tuning.with_segments, as fast.plan.resolve does), got segments=None")
    TK, TP, TN = chunk_state_passing_tiles(Q, p, n, dtype, stage)
    cps, nseg = segment_layout(cdiv(l, Q), stage.segments)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b * nseg, h),
                      {"Q": Q, "TK": TK, "TP": TP, "TN": TN, "cps": cps, "nseg": nseg})


def launch_chunk_state_segments(call: StateCall, stage: Segmented):
    """Both launches of the segmented state stage (no argument checks): the segments kernel with the
    ``stage``'s tiles, segments, occupancy, form and store_kd (as :func:`~mamba2_tutorial.fast.plan.resolve`
    left them), then state_passing over the segments. Returns ``(dt_out (or kd), dA_cumsum,
    chunk_init_states, final_states, carry)``: chunk_init_states segment-local in x's dtype, ``carry`` a
    :class:`SegmentCarry` for the scan (its states in x's dtype), final_states float32."""
    x, poison = call.x, call.poison
    b, l, h, p = x.shape
    n = call.B.shape[3]
    device = x.device
    plan = segments_plan(b, l, h, p, n, call.chunk_size, x.dtype, stage)
    t = plan.tiles
    nseg = t["nseg"]
    dt_out, dA_cumsum, chunk_init_states = state_outputs(call)
    seg_prefix = allocate((b, h, dt_out.shape[2]), torch.float32, device, poison)
    seg_states = allocate((b, nseg, h, p, n), torch.float32, device, poison)
    seg_decay = allocate((b, h, nseg, 1), torch.float32, device, poison)
    inputs, scalars, flags, FORM = state_args(call, stage)
    hpg, dt_min, dt_max = scalars
    seq_idx, has_seq_idx = seq_idx_arg(call)
    args = (*inputs, seq_idx, dt_out, dA_cumsum, chunk_init_states, seg_prefix, seg_states, seg_decay,
            hpg, t["cps"], dt_min, dt_max, t["Q"], t["TK"], t["TP"], t["TN"], *flags, has_seq_idx, FORM)
    launch(chunk_state_segments_kernel, plan.grid, args, call.backend, stage.occupancy)
    # kernel 2 over the segments: seg_decay's only entry per segment is its total decay (a "chunk" of 1)
    carry, final_states = launch_state_passing(seg_states, seg_decay, call.initial_states, call.backend,
                                               poison, out_dtype=chunk_init_states.dtype)
    return dt_out, dA_cumsum, chunk_init_states, final_states, SegmentCarry(carry, seg_prefix, t["cps"])
