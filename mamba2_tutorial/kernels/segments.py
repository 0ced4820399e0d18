"""Kernels 1 and 2 fused, by segments of the sequence: the state stage for few (batch, head) pairs.

The fused state stage (``chunk_state_passing_kernel``) walks all the chunks of one (batch, head) in one block,
so its grid has b · h blocks. At b 1, h 80 that is 80 blocks for the H200's 132 SMs, each walking 128 chunks
in order: 40% of the GPU idles while the rest runs a long sequential loop. The recurrence is linear, so the
classic parallel-scan trick applies. Cut the chunks into segments of ``cps`` chunks each:

1. ``chunk_state_segments_kernel``: one block per (state tile, batch·segment, head) walks ITS segment's chunks
   from a zero state, exactly as the fused kernel walks all of them. Per chunk c it stores the segment-local
   entering state L_c (what the segment's earlier chunks left in the state) and the log of the decay from the
   segment start to chunk c, ``seg_prefix[b, h, c]`` = sum of dA_cs[Q-1] over those chunks. At the end, the
   segment's local final state ``seg_states[b, s, h]`` and its total decay ``seg_decay[b, h, s]``.
2. ``state_passing_kernel`` (kernel 2, unchanged) over the SEGMENTS instead of the chunks: it carries the
   state across segments (nseg steps instead of nchunks) and gives ``carry[b, s, h]``, the true state entering
   segment s, and the final states.
3. The scan (``chunk_scan_cb_chunk_kernel`` with ``HAS_CARRY``) uses the true state entering chunk c of
   segment s = c // cps without ever forming it:

       C_m @ S_cᵀ = C_m @ L_cᵀ + exp(seg_prefix[c]) · (C_m @ carry[s]ᵀ)

   one more (TM, n) @ (n, TP) mma per row tile on tiles it loads as they are. (Forming S_c in registers
   first, an elementwise (p, n) update, took 128 registers per thread at occupancy 4 and made the scan 60%
   slower on the H200: docs/perf-notes.md, attempt 16.)

So the sequential work per block shrinks from nchunks to cps chunks (plus nseg tiny steps in stage 2), and the
grid grows from b · h to b · h · nseg blocks. The cost: the carry read by the scan (one (p, n) tile per block)
and one more launch. With nseg = 1 (one segment) it is the fused stage, and L_c is the true entering state.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import cuda.tile as ct
import torch

from ._host import LaunchPlan, allocate, cdiv, hinted, launch, placeholder
from .chunk_state import (
    STATE_DT_AHEAD,
    STATE_DT_BOX,
    STATE_KD,
    chunk_local_state,
    chunk_state_passing_tiles,
    load_dt_raw,
)
from .configs import LONG_BF16
from .spec import KernelSpec
from .state_passing import launch_state_passing

__all__ = ["SPECS", "SegmentCarry", "chunk_state_segments_kernel", "launch_chunk_state_segments",
           "segment_layout", "segments_plan"]

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def chunk_state_segments_kernel(x, B, dt, A, dt_bias,                                   # inputs
                                dt_out, dA_cumsum, chunk_init_states,                    # outputs per chunk
                                seg_prefix, seg_states, seg_decay,                       # outputs per segment
                                heads_per_group: int, chunks_per_segment: int, dt_min: float, dt_max: float,
                                Q: ct.Constant[int], TK: ct.Constant[int], TP: ct.Constant[int],
                                TN: ct.Constant[int], HAS_DT_BIAS: ct.Constant[bool],
                                DT_SOFTPLUS: ct.Constant[bool], LAT: ct.Constant[int],
                                FORM: ct.Constant[int]):
    """x (b, l, h, p), B (b, l, g, n), dt (b, l, h), A (h,), dt_bias (h,) -> dt_out, dA_cumsum
    (b, h, nchunks, Q) float32; chunk_init_states (b, nchunks, h, p, n), the state entering each chunk FROM
    ITS SEGMENT'S START (x's dtype in ssd_forward); seg_prefix (b, h, nchunks) float32, the log of the decay
    from the segment's start to the chunk; seg_states (b, nseg, h, p, n) float32, each segment's local final
    state; seg_decay (b, h, nseg, 1) float32, the log of its total decay.

    Grid (state tiles, b · nseg, h): block (i, b·nseg + s, h) walks chunks s·cps .. min((s+1)·cps, nchunks).
    FORM: see ``chunk_local_state`` (STATE_KD, only when dt >= 0: dt_out receives the key-log2 form kd).
    """
    pid_pn = ct.bid(0)
    pid_bs = ct.bid(1)
    h = ct.bid(2)
    nseg = seg_states.shape[1]
    b = pid_bs // nseg
    s = pid_bs % nseg
    n_tiles = ct.cdiv(chunk_init_states.shape[4], TN)
    i_p = pid_pn // n_tiles
    i_n = pid_pn % n_tiles
    g = h // heads_per_group
    seqlen = x.shape[1]
    nchunks = dA_cumsum.shape[2]
    lat = LAT if LAT > 0 else None
    A_h = ct.load(A, (h,), shape=()).astype(ct.float32)
    dt_bias_h = ct.load(dt_bias, (h,), shape=()).astype(ct.float32) if HAS_DT_BIAS else 0.0

    S = ct.zeros((TP, TN), dtype=ct.float32)          # the segment starts from zero: stage 2 adds the carry
    log_decay = ct.zeros((1,), dtype=ct.float32)      # sum of dA_cs[Q-1] over the segment's chunks so far
    c0 = s * chunks_per_segment
    c_end = min(c0 + chunks_per_segment, nchunks)
    if FORM & STATE_DT_AHEAD:
        dt_next = load_dt_raw(dt, b, min(c0, nchunks - 1), h, Q, FORM & STATE_DT_BOX)
    for c in range(c0, c_end):
        ct.store(chunk_init_states, (b, c, h, i_p, i_n),
                 S.astype(chunk_init_states.dtype).reshape((1, 1, 1, TP, TN)))
        ct.store(seg_prefix, (b, h, c), log_decay.reshape((1, 1, 1)))
        if FORM & STATE_DT_AHEAD:  # this chunk's dt was loaded one chunk ago; start the next one's gather
            dt_raw = dt_next
            dt_next = load_dt_raw(dt, b, min(c + 1, c_end - 1), h, Q, FORM & STATE_DT_BOX)
            dA_cs_last, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p,
                                              i_n, seqlen, dt_min, dt_max, Q, TK, TP, TN, HAS_DT_BIAS,
                                              DT_SOFTPLUS, lat, S, FORM, dt_raw)
        else:
            dA_cs_last, S = chunk_local_state(x, B, dt, dt_out, dA_cumsum, A_h, dt_bias_h, b, c, h, g, i_p,
                                              i_n, seqlen, dt_min, dt_max, Q, TK, TP, TN, HAS_DT_BIAS,
                                              DT_SOFTPLUS, lat, S, FORM)
        log_decay = log_decay + dA_cs_last

    ct.store(seg_states, (b, s, h, i_p, i_n), S.reshape((1, 1, 1, TP, TN)))
    ct.store(seg_decay, (b, h, s, 0), log_decay.reshape((1, 1, 1, 1)))


# ----------------------------------------------------------------------------------------------------
# Host side
# ----------------------------------------------------------------------------------------------------
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
def segments_plan(b: int, l: int, h: int, p: int, n: int, Q: int, dtype: torch.dtype, segments: int,
                  tiles: tuple | None = None) -> LaunchPlan:
    """Grid and tiles of :data:`chunk_state_segments_kernel`: one block per (state tile, batch·segment, head);
    the tiles are the fused kernel's. ``tiles["cps"]`` and ``tiles["nseg"]``: the segment layout."""
    TK, TP, TN = chunk_state_passing_tiles(Q, p, n, dtype, tiles)
    cps, nseg = segment_layout(cdiv(l, Q), segments)
    return LaunchPlan((cdiv(p, TP) * cdiv(n, TN), b * nseg, h),
                      {"Q": Q, "TK": TK, "TP": TP, "TN": TN, "cps": cps, "nseg": nseg})


def launch_chunk_state_segments(x, dt, A, B, chunk_size, dt_bias, dt_softplus, dt_limit, initial_states,
                                backend, segments, poison=False, out_dtype=None, tiles=None,
                                hints=(None, None), latency=0, key_log2=False, form=0, tail=None,
                                fixup=False, outs=None):
    """Both launches of the segmented state stage (no argument checks): the segments kernel, then
    state_passing over the segments. Returns ``(dt_out, dA_cumsum, chunk_init_states, final_states, carry)``
    with chunk_init_states segment-local (x's dtype unless ``out_dtype``) and ``carry`` a
    :class:`SegmentCarry` for the scan, its states in chunk_init_states' dtype (the scan's mma takes both as
    they are); final_states float32. ``tail = (h0, tiles, hints)`` launches the segments kernel for heads
    h0.. apart, on views, with those tiles and hints (``SSDConfig.state_tail``; h0 a whole number of groups
    when there are several).

    ``fixup``: ``segment_fixup.segment_fixup_kernel`` instead of state_passing makes chunk_init_states the
    true entering states in place (and writes final_states); ``carry`` is then None and the scan adds
    nothing.
    ``outs = (dt_out, dA_cumsum, chunk_init_states, final_states)``: write into these (views of a larger
    call's outputs, ``SSDConfig.state_tail_segments``) instead of new buffers; needs ``fixup``."""
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    Q = chunk_size
    nchunks = cdiv(l, Q)
    device = x.device
    plan = segments_plan(b, l, h, p, n, Q, x.dtype, segments, tiles)
    t = plan.tiles
    nseg = t["nseg"]
    if outs is not None and not fixup:
        raise ValueError("launch_chunk_state_segments: outs needs fixup=True (a carry for the scan would "
                         "cover only these heads)")
    if outs is None:
        outs = (allocate((b, h, nchunks, Q), torch.float32, device, poison),
                allocate((b, h, nchunks, Q), torch.float32, device, poison),
                allocate((b, nchunks, h, p, n), out_dtype or x.dtype, device, poison), None)
    dt_out, dA_cumsum, chunk_init_states, final_states = outs
    seg_prefix = allocate((b, h, nchunks), torch.float32, device, poison)
    seg_states = allocate((b, nseg, h, p, n), torch.float32, device, poison)
    seg_decay = allocate((b, h, nseg, 1), torch.float32, device, poison)
    has_bias = dt_bias is not None
    args = (x, B, dt, A, dt_bias if has_bias else placeholder(device, torch.float32, 1),
            dt_out, dA_cumsum, chunk_init_states, seg_prefix, seg_states, seg_decay,
            h // g, t["cps"], float(dt_limit[0]), float(dt_limit[1]),
            Q, t["TK"], t["TP"], t["TN"], has_bias, bool(dt_softplus), latency,
            (STATE_KD if key_log2 else 0) | form)
    if tail is None:
        launch(chunk_state_segments_kernel, plan.grid, args, backend, hints)
    else:  # heads [0, h0) as configured, [h0, h) with the tail's tiles and hints, on views of every array
        head_dim = {0: 2, 2: 2, 3: 0, 5: 1, 6: 1, 7: 2, 8: 1, 9: 2, 10: 1}  # argument -> its head axis
        if has_bias:
            head_dim[4] = 0
        for lo, hi, part_tiles, part_hints in ((0, tail[0], tiles, hints), (tail[0], h, *tail[1:])):
            part_plan = segments_plan(b, l, hi - lo, p, n, Q, x.dtype, segments, part_tiles)
            pt = part_plan.tiles
            part = [a.narrow(head_dim[i], lo, hi - lo) if i in head_dim else a for i, a in enumerate(args)]
            if g > 1:  # B's groups of these heads
                part[1] = B.narrow(2, lo // (h // g), (hi - lo) // (h // g))
            part[16:19] = [pt["TK"], pt["TP"], pt["TN"]]
            launch(chunk_state_segments_kernel, part_plan.grid, tuple(part), backend, part_hints)
    if fixup:  # the entering states made true in place, the final states written
        from .segment_fixup import launch_segment_fixup

        if final_states is None:
            final_states = allocate((b, h, p, n), torch.float32, device, poison)
        launch_segment_fixup(seg_prefix, seg_states, seg_decay, initial_states, chunk_init_states,
                             final_states, t["cps"], backend)
        return dt_out, dA_cumsum, chunk_init_states, final_states, None
    # kernel 2 over the segments: seg_decay's last (only) entry per segment is its total decay (Q = 1)
    carry, final_states = launch_state_passing(seg_states, seg_decay, initial_states, backend, poison,
                                               out_dtype=chunk_init_states.dtype)
    return dt_out, dA_cumsum, chunk_init_states, final_states, SegmentCarry(carry, seg_prefix, t["cps"])


def _example_args(dtype, Q, b=2, l=700, h=4, p=48, g=2, n=80, segments=3, tiles=None, form=0):
    def make():
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(b, l, h, p, generator=gen).to(dtype)
        B = torch.randn(b, l, g, n, generator=gen).to(dtype)
        dt = torch.rand(b, l, h, generator=gen)
        A = -torch.rand(h, generator=gen)
        nchunks = cdiv(l, Q)
        plan = segments_plan(b, l, h, p, n, Q, dtype, segments, tiles)
        t = plan.tiles
        nseg = t["nseg"]
        args = (x, B, dt, A, torch.rand(h, generator=gen),
                torch.empty(b, h, nchunks, Q), torch.empty(b, h, nchunks, Q),
                torch.empty(b, nchunks, h, p, n, dtype=dtype), torch.empty(b, h, nchunks),
                torch.empty(b, nseg, h, p, n), torch.empty(b, h, nseg, 1),
                h // g, t["cps"], 0.0, float("inf"), Q, t["TK"], t["TP"], t["TN"], True, True, 0, form)
        return plan.grid, args

    return make


SPECS: list[KernelSpec] = [
    KernelSpec("ssd.chunk_state_segments_bf16_q256", chunk_state_segments_kernel,
               _example_args(torch.bfloat16, 256, l=1400, p=64, n=128)),
    KernelSpec("ssd.chunk_state_segments_f32_q64", chunk_state_segments_kernel,
               _example_args(torch.float32, 64)),
    # what ssd_forward launches for few (batch, head) pairs and long bf16 sequences (configs.LONG_BF16)
    KernelSpec("ssd.long_bf16.chunk_state_segments",
               hinted(chunk_state_segments_kernel, *LONG_BF16.state_hints),
               _example_args(torch.bfloat16, 256, l=2100, p=64, n=128, segments=LONG_BF16.segments,
                             tiles=LONG_BF16.state_tiles,
                             form=(STATE_KD if LONG_BF16.state_key_log2 else 0) | LONG_BF16.state_form)),
]
