"""Per-shape launch configurations of the SSD kernels: tiles, heads per block, compiler hints, fusion.

``ssd_config(b, l, h, p, g, n, Q, dtype)`` returns the :class:`SSDConfig` that ``ssd_forward`` launches with.
The choices come from measured sweeps on an NVIDIA H200 (``python -m mamba2_tutorial.tune``; results and dates
in ``docs/perf-notes.md``). A config changes only speed, never results: every field is a tile size, a hint, or
the choice between two kernels that compute the same intermediates (the GPU sweep checks each variant against
the float64 reference before timing it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["DEFAULT", "FAST_16BIT", "FAST_16BIT_CB", "FAST_16BIT_Q128", "LONG_16BIT", "SSDConfig",
           "ssd_config"]

Hints = tuple  # (occupancy, num_ctas[, num_worker_warps]); None = the compiler's choice


@dataclass(frozen=True)
class SSDConfig:
    """How ``ssd_forward`` runs one problem size.

    fused         kernels 1 and 2 as one (``chunk_state_passing_kernel``): the float32 chunk states never
                  reach global memory; else ``chunk_state_kernel`` then ``state_passing_kernel``
    state_tiles   (TP, TN) state tile of the fused kernel or of state_passing (None: the default)
    state_hints   (occupancy, num_ctas[, num_worker_warps]) of the fused kernel or of chunk_state
    passing_hints (occupancy, num_ctas) of state_passing (unfused only)
    scan_tiles    (TM, TK, TP) of chunk_scan (None: the default)
    scan_heads    cap on heads per chunk_scan block (None: the default)
    scan_hints    (occupancy, num_ctas[, num_worker_warps]) of chunk_scan
    scan_latency  latency hint (1-10) of chunk_scan's key-loop loads; 0: none
    scan_2d       chunk_scan_heads_kernel: the block's heads one at a time with 2-D mmas (wgmma on sm_90)
                  instead of chunk_scan_kernel's batched 3-D mma (scan_factored is then ignored)
    scan_factored chunk_scan splits the decay of key tiles before the row tile into two factors (used only
                  when dt_limit's bounds are >= 0, so that dt >= 0 and the in-chunk cumsum is monotone)
    scan_shared   chunk_scan_shared_kernel: 2-D mmas (wgmma on sm_90) with C Bᵀ computed once per key tile and
                  shared by the block's heads, one 2-D accumulator per head (overrides scan_2d)
    state_latency latency hint (1-10) of the fused kernel's x and B loads; 0: none
    scan_cb       C Bᵀ once per (chunk, group) by ``chunk_cb_kernel``, then ``chunk_scan_cb_kernel`` reads it
                  (2-D mmas, heads-first grid; overrides scan_shared, scan_2d and scan_factored)
    scan_chunk    with scan_cb: one block per (head, chunk) walks all the chunk's row tiles (an experiment)
    scan_cb_bf16  with scan_cb and 16-bit inputs: C Bᵀ stored in bfloat16 instead of float32 (half the scan's
                  largest reads; the scan rounds C Bᵀ · decay · dt to x's dtype for its mma anyway); ignored
                  for float32 inputs, which keep a float32 C Bᵀ
    """

    fused: bool = False
    state_tiles: tuple | None = None
    state_hints: Hints = (None, None)
    passing_hints: Hints = (None, None)
    scan_tiles: tuple | None = None
    scan_heads: int | None = None
    scan_hints: Hints = (None, None)
    scan_latency: int = 0
    scan_factored: bool = False
    scan_2d: bool = False
    scan_shared: bool = False
    state_latency: int = 0
    scan_cb: bool = False
    scan_chunk: bool = False
    scan_cb_bf16: bool = False


DEFAULT = SSDConfig()

# Measured on an H200 on 2026-12-03 (docs/perf-notes.md, attempt 11): at b8-l4096-h80 the kernel chain
# takes 1.049 ms with this config against 1.581 ms with DEFAULT; at b2-l8192-h128-g8 0.847 against 1.400 ms.
# The fused state stage with a 64x128 state tile (one block per (p tile, batch, head), state in registers),
# then chunk_scan_shared_kernel, one head per block (2-D wgmma, 80 registers, no spills), occupancy 3.
FAST_16BIT = SSDConfig(fused=True, state_tiles=(64, 128),
                       scan_shared=True, scan_heads=1, scan_hints=(3, None))


# Measured on an H200 on 2026-12-03 13:35 UTC (docs/perf-notes.md, attempt 13), the same run for all three:
# at chunk size 256 and a large problem, C Bᵀ once per (chunk, group) (kernels/chunk_scan_cb.py) is 3-5%
# faster than recomputing it per head (b8-l4096-h80: 0.972 against 1.004 ms; b1-l32768-h80: 1.174
# against 1.238)
FAST_16BIT_CB = SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True, scan_heads=1, scan_hints=(3, None))
# at chunk size 128 the fused stage runs 28% faster at occupancy 2 (b2-l8192-h128-g8: 0.313 against 0.434 ms;
# at chunk size 256 occupancy 2 is slower: 0.407 against 0.352 at b8-l4096-h80), and C Bᵀ per head is faster
FAST_16BIT_Q128 = SSDConfig(fused=True, state_tiles=(64, 128), state_hints=(2, None),
                            scan_shared=True, scan_heads=1, scan_hints=(3, None))
# fewer (batch, head) pairs than SMs and a long sequential loop: the fused stage has one block per pair (80
# at b1-l32768-h80, 0.546 ms); chunk_state (a block per chunk) + state_passing take 0.308 + 0.163 ms
LONG_16BIT = SSDConfig(state_hints=(2, None), scan_cb=True, scan_heads=1, scan_hints=(3, None))

#: SMs of the H200 the configs were measured on: a fused grid of fewer blocks leaves SMs idle
SMS = 132
#: b·l·h from which C Bᵀ pays as its own launch (below, the forward is host-bound: a launch costs more)
CB_MIN_WORK = 1 << 20
#: chunks from which the fused stage's sequential loop is long enough to matter
LONG_LOOP = 32


def ssd_config(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype) -> SSDConfig:
    """The measured-best configuration for this size and dtype (the default where none was measured).

    float16 and bfloat16 (measured on the H200 at the benchmark shapes, docs/perf-notes.md attempts 11, 13):

    - fewer (batch, head) pairs than SMs and at least ``LONG_LOOP`` chunks, or a state larger than one
      64 x 128 tile (p > 64 or n > 128): unfused, like :data:`LONG_16BIT`;
    - chunk size <= 128: :data:`FAST_16BIT_Q128`;
    - chunk size >= 256 and b·l·h >= ``CB_MIN_WORK``: :data:`FAST_16BIT_CB`;
    - otherwise (small, launch-bound problems): :data:`FAST_16BIT`, two launches.

    float32 inputs keep :data:`DEFAULT`: the float32 tiles are twice the bytes, and no float32 config has been
    measured yet.
    """
    if dtype not in (torch.float16, torch.bfloat16):
        return DEFAULT
    large = b * l * h >= CB_MIN_WORK
    scan = (dict(scan_cb=True, scan_heads=1, scan_hints=(3, None)) if Q >= 256 and large
            else dict(scan_shared=True, scan_heads=1, scan_hints=(3, None)))
    # the fused kernel only with ONE (64, 128) state tile per (batch, head): on the H200 (2026-12-03) fused
    # launches with several state tiles per (batch, head) never finished (64x64 and 32x128 tiles at
    # b8-l4096-h80; 64x128 at occupancy 2 with n = 256), see docs/perf-notes.md, attempt 13
    one_tile = p <= 64 and n <= 128
    if not one_tile or (b * h < SMS and -(-l // Q) >= LONG_LOOP):
        return SSDConfig(state_hints=(2, None), **scan)
    if Q <= 128:
        return FAST_16BIT_Q128
    return FAST_16BIT_CB if large else FAST_16BIT
