"""Per-kernel A/B of SSD launch configurations on a GPU, in one short run (device time is scarce).

    python benchmarks/probe.py [--only name,name] [--shapes b8-l4096-h80,b2-l8192-h128-g8] [--workers 12]

For every variant (an :class:`~mamba2_tutorial.kernels.configs.SSDConfig`) and shape: compile in parallel
worker processes first (cuTile's disk cache then serves this process), check ``ssd_forward`` with NaN-poisoned
buffers against the float64 reference (``ssd_chunked`` on the GPU), then time every stage alone and the whole
chain (median of CUDA events, L2 flushed; ``mamba2_tutorial.timing.time_cuda``). Prints one table, writes
``probe.json`` to ``--out`` (default $OUT). A sweep, not a test: results go to docs/perf-notes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from mamba2_tutorial.kernels.configs import DEFAULT, FAST_16BIT_CB, FAST_BF16_Q128, LONG_BF16, SSDConfig

GATE = 1e-2  # bf16 relative L2 error against float64

# attempt 15's building blocks: the fused state stage with one 64x128 state tile; C Bᵀ by its own kernel,
# stored in bfloat16; both with the chunk-per-block scan
_FUSED = dict(fused=True, state_tiles=(64, 128))
_CB16 = dict(scan_cb=True, scan_cb_bf16=True)
_CHUNK16 = dict(**_FUSED, **_CB16, scan_chunk=True)
# attempt 19: the fused stage's whole 256-row chunk per mma step (the default since)
_TK256 = _CHUNK16 | dict(state_tiles=(64, 128, 256))

VARIANTS: dict[str, SSDConfig] = {
    "base": DEFAULT,
    "scan heads HB1": SSDConfig(scan_2d=True, scan_heads=1),
    "scan shared HB2": SSDConfig(scan_shared=True, scan_heads=2),
    "scan shared HB4": SSDConfig(scan_shared=True, scan_heads=4),
    "scan shared HB2 128x64x64": SSDConfig(scan_shared=True, scan_heads=2, scan_tiles=(128, 64, 64)),
    "scan factored": SSDConfig(scan_factored=True),
    "fused 64x128": SSDConfig(fused=True, state_tiles=(64, 128)),
    "fused 64x64": SSDConfig(fused=True, state_tiles=(64, 64)),
    "fused 64x32": SSDConfig(fused=True, state_tiles=(64, 32)),
    # occupancy and warp count (hints = (occupancy, num_ctas, num_worker_warps)): the sm_90 binaries of the
    # shared kernel at HB 2 take 232 KB of shared memory and 256 threads, so one block per SM by default
    "scan shared HB2 occ2": SSDConfig(scan_shared=True, scan_heads=2, scan_hints=(2, None)),
    "scan shared HB2 nww8": SSDConfig(scan_shared=True, scan_heads=2, scan_hints=(None, None, 8)),
    "scan shared HB4 occ2": SSDConfig(scan_shared=True, scan_heads=4, scan_hints=(2, None)),
    "scan shared HB4 nww8": SSDConfig(scan_shared=True, scan_heads=4, scan_hints=(None, None, 8)),
    "scan shared HB2 128x64x64 nww8": SSDConfig(scan_shared=True, scan_heads=2, scan_tiles=(128, 64, 64),
                                                scan_hints=(None, None, 8)),
    "scan shared HB1 occ2": SSDConfig(scan_shared=True, scan_heads=1, scan_hints=(2, None)),
    "scan shared HB1 occ3": SSDConfig(scan_shared=True, scan_heads=1, scan_hints=(3, None)),
    "scan shared HB2 occ2 nww8": SSDConfig(scan_shared=True, scan_heads=2, scan_hints=(2, None, 8)),
    "fused 64x128 occ2": SSDConfig(fused=True, state_tiles=(64, 128), state_hints=(2, None)),
    "fused 64x128 nww8": SSDConfig(fused=True, state_tiles=(64, 128), state_hints=(None, None, 8)),
    # stop 10 (2026-12-03): more occupancy, the best scan with the fused state stage, hints elsewhere
    "scan shared HB1 occ4": SSDConfig(scan_shared=True, scan_heads=1, scan_hints=(4, None)),
    "scan shared HB1 occ3 nww4": SSDConfig(scan_shared=True, scan_heads=1, scan_hints=(3, None, 4)),
    "scan shared HB1 occ4 nww4": SSDConfig(scan_shared=True, scan_heads=1, scan_hints=(4, None, 4)),
    "scan shared HB2 occ3": SSDConfig(scan_shared=True, scan_heads=2, scan_hints=(3, None)),
    "scan shared HB1 128x64x64 occ2": SSDConfig(scan_shared=True, scan_heads=1, scan_tiles=(128, 64, 64),
                                                scan_hints=(2, None)),
    "scan heads HB1 occ3": SSDConfig(scan_2d=True, scan_heads=1, scan_hints=(3, None)),
    "base occ2": SSDConfig(scan_hints=(2, None)),
    "state occ2": SSDConfig(state_hints=(2, None)),
    "fused 64x64 occ2": SSDConfig(fused=True, state_tiles=(64, 64), state_hints=(2, None)),
    "fused 64x128 + shared HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 128), scan_shared=True,
                                                scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 + shared HB1 occ4": SSDConfig(fused=True, state_tiles=(64, 128), scan_shared=True,
                                                scan_heads=1, scan_hints=(4, None)),
    # next: smaller fused state tiles for b·h below the SM count (b1-l32768-h80); run with --workers 0 so
    # that they compile in the main process (in worker processes they never finished on the H200)
    "fused 64x64 + shared HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 64), scan_shared=True,
                                               scan_heads=1, scan_hints=(3, None)),
    "fused 64x32 + shared HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 32), scan_shared=True,
                                               scan_heads=1, scan_hints=(3, None)),
    # 2026-12-03 afternoon: C Bᵀ once per (chunk, group) (kernels/chunk_scan_cb.py), then the scan reads it
    "fused 64x128 + cb HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                            scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 + cb HB1 occ3 factored": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                     scan_heads=1, scan_hints=(3, None), scan_factored=True),
    "fused 64x128 + cb HB1 occ4 factored": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                     scan_heads=1, scan_hints=(4, None), scan_factored=True),
    "fused 64x128 + cb HB2 occ2": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                            scan_heads=2, scan_hints=(2, None)),
    "fused 64x128 + cb HB2 occ2 factored": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                     scan_heads=2, scan_hints=(2, None), scan_factored=True),
    "fused 64x128 + cb 128x64x64 occ2 factored": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                           scan_heads=1, scan_tiles=(128, 64, 64),
                                                           scan_hints=(2, None), scan_factored=True),
    "fused 64x128 occ2 + cb HB1 occ3 factored": SSDConfig(fused=True, state_tiles=(64, 128),
                                                          state_hints=(2, None), scan_cb=True, scan_heads=1,
                                                          scan_hints=(3, None), scan_factored=True),
    # one block per (head, chunk) walking all its row tiles (chunk_scan_cb_chunk_kernel)
    "fused 64x128 + cb chunk HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                  scan_chunk=True,
                                                  scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 + cb chunk HB1 occ2": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True,
                                                  scan_chunk=True,
                                                  scan_heads=1, scan_hints=(2, None)),
    "state occ2 + cb HB1 occ3 factored": SSDConfig(state_hints=(2, None), scan_cb=True, scan_heads=1,
                                                   scan_hints=(3, None), scan_factored=True),
    # 2026-12-03 evening (attempt 15): C Bᵀ stored in bfloat16 (half the scan's largest reads), and fused
    # state tiles smaller than 64x128 again now that every tile stores dt_out and dA_cumsum
    "fused 64x128 + cb16 HB1 occ3": SSDConfig(**_FUSED, **_CB16, scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 + cb16 chunk HB1 occ3": SSDConfig(**_CHUNK16, scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 + cb16 chunk HB1 occ2": SSDConfig(**_CHUNK16, scan_heads=1, scan_hints=(2, None)),
    "fused 64x128 + cb16 HB2 occ2": SSDConfig(**_FUSED, **_CB16, scan_heads=2, scan_hints=(2, None)),
    "fused 64x128 + cb16 HB2 occ3": SSDConfig(**_FUSED, **_CB16, scan_heads=2, scan_hints=(3, None)),
    "fused 64x128 + cb16 128x64x64 occ2":
        SSDConfig(**_FUSED, **_CB16, scan_heads=1, scan_tiles=(128, 64, 64), scan_hints=(2, None)),
    "fused 64x128 + cb16 HB1 occ4": SSDConfig(**_FUSED, **_CB16, scan_heads=1, scan_hints=(4, None)),
    "state occ2 + cb16 HB1 occ3":
        SSDConfig(state_hints=(2, None), **_CB16, scan_heads=1, scan_hints=(3, None)),
    "fused 32x128 + cb16 HB1 occ3":
        SSDConfig(fused=True, state_tiles=(32, 128), **_CB16, scan_heads=1, scan_hints=(3, None)),
    "fused 16x128 + cb16 HB1 occ3":
        SSDConfig(fused=True, state_tiles=(16, 128), **_CB16, scan_heads=1, scan_hints=(3, None)),
    # attempt 15, second batch: the chunk-per-block scan with a bfloat16 C Bᵀ (0.494 ms at b8) around its
    # best point, on every benchmark shape; the unfused state stage's hints for b1-l32768-h80
    "fused 64x128 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, scan_heads=1, scan_hints=(4, None)),
    "fused 64x128 + cb16 chunk HB1 occ3 lat3":
        SSDConfig(**_CHUNK16, scan_heads=1, scan_hints=(3, None), scan_latency=3),
    "fused 64x128 + cb16 chunk 128x64x64 occ2":
        SSDConfig(**_CHUNK16, scan_heads=1, scan_tiles=(128, 64, 64), scan_hints=(2, None)),
    "fused 64x128 + cb chunk HB1 occ4":
        SSDConfig(**_FUSED, scan_cb=True, scan_chunk=True, scan_heads=1, scan_hints=(4, None)),
    "fused 64x128 occ2 + shared HB1 occ3":
        SSDConfig(**_FUSED, state_hints=(2, None), scan_shared=True, scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 occ2 + cb16 chunk HB1 occ3":
        SSDConfig(**_CHUNK16, state_hints=(2, None), scan_heads=1, scan_hints=(3, None)),
    "fused 64x128 occ2 + cb16 chunk HB1 occ4":
        SSDConfig(**_CHUNK16, state_hints=(2, None), scan_heads=1, scan_hints=(4, None)),
    "state occ2 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(2, None), **_CB16, scan_chunk=True, scan_heads=1, scan_hints=(3, None)),
    "state occ3 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(3, None), **_CB16, scan_chunk=True, scan_heads=1, scan_hints=(3, None)),
    "state occ4 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(4, None), **_CB16, scan_chunk=True, scan_heads=1, scan_hints=(3, None)),
    "state occ2 pass occ2 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(2, None), passing_hints=(2, None), **_CB16, scan_chunk=True, scan_heads=1,
                  scan_hints=(3, None)),
    "state occ2 pass occ4 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(2, None), passing_hints=(4, None), **_CB16, scan_chunk=True, scan_heads=1,
                  scan_hints=(3, None)),
    # attempt 15, third batch: two heads per chunk block share C and C Bᵀ (half their reads), fused hints
    "fused 64x128 + cb16 chunk HB2 occ2": SSDConfig(**_CHUNK16, scan_heads=2, scan_hints=(2, None)),
    "fused 64x128 + cb16 chunk HB2 occ3": SSDConfig(**_CHUNK16, scan_heads=2, scan_hints=(3, None)),
    "fused 64x128 + cb16 chunk HB2 occ2 nww8": SSDConfig(**_CHUNK16, scan_heads=2, scan_hints=(2, None, 8)),
    "fused 64x128 lat3 + cb16 chunk HB1 occ4":
        SSDConfig(**_CHUNK16, state_latency=3, scan_heads=1, scan_hints=(4, None)),
    "fused 64x128 nww8 + cb16 chunk HB1 occ4":
        SSDConfig(**_CHUNK16, state_hints=(None, None, 8), scan_heads=1, scan_hints=(4, None)),
    "fused 64x128 occ1 + cb16 chunk HB1 occ4":
        SSDConfig(**_CHUNK16, state_hints=(1, None), scan_heads=1, scan_hints=(4, None)),
    # 2026-12-03 night (attempt 16): the fused state stage by segments of the sequence (kernels/segments.py)
    # for few (batch, head) pairs, against the unfused pair. The scan adds the carry with a
    # second inter-chunk mma; at occupancy 4 that kernel does not fit (255 registers, 204 KB of shared memory
    # in the sm_90 cubin), at occupancy 3 it does (80 registers, 70 KB)
    "long: state occ2 + cb16 chunk HB1 occ4":
        SSDConfig(state_hints=(2, None), **_CB16, scan_chunk=True, scan_heads=1, scan_hints=(4, None)),
    "long: state occ2 + cb16 chunk HB1 occ3":
        SSDConfig(state_hints=(2, None), **_CB16, scan_chunk=True, scan_heads=1, scan_hints=(3, None)),
    **{f"seg{k}{' occ2' if occ else ''} + cb16 chunk HB1 occ{so}":
       SSDConfig(**_CHUNK16, segments=k, state_hints=(occ or None, None), scan_heads=1, scan_hints=(so, None))
       for k, occ, so in ((4, 0, 3), (8, 0, 3), (16, 0, 3), (8, 2, 3), (8, 0, 2), (8, 0, 4))},
    # attempt 18: two (four) heads per fused block share each B tile; 8 worker warps keep HB 2 free of spills
    # in the sm_90 cubin (168 registers, 216 KB shared memory; 4 warps: a 1376-byte stack)
    "fused HB2 nww8 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=2, state_hints=(None, None, 8),
                                                      scan_heads=1, scan_hints=(4, None)),
    "fused HB2 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=2, scan_heads=1,
                                                 scan_hints=(4, None)),
    "fused HB4 nww8 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=4, state_hints=(None, None, 8),
                                                      scan_heads=1, scan_hints=(4, None)),
    "fused occ2 HB2 nww8 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=2,
                                                           state_hints=(2, None, 8), scan_heads=1,
                                                           scan_hints=(4, None)),
    "fused occ2 HB2 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=2, state_hints=(2, None),
                                                      scan_heads=1, scan_hints=(4, None)),
    "fused occ3 HB2 + cb16 chunk HB1 occ4": SSDConfig(**_CHUNK16, state_heads=2, state_hints=(3, None),
                                                      scan_heads=1, scan_hints=(4, None)),
    # attempt 19: the fused stage's chunk in one mma step (TK = Q = 256): no inner loop inside the chunk loop,
    # so the compiler may prefetch the next chunk's x and B while this one's mma runs
    "fused TK256 + cb16 chunk HB1 occ4": SSDConfig(**_TK256,
                                                   scan_heads=1, scan_hints=(4, None)),
    # attempt 20 (2026-12-04): the factored decay (attempt 7) in the whole-chunk scan, per shape family (b8:
    # Q 256; g8: Q 128 unrolled; b1: by segments). The state stage with dt_out and dA_cumsum by their own
    # kernel, dt one chunk ahead and a folded decay in the scan were measured here and removed (commit
    # 19cb188 has them)
    **{f"fused TK256 + cb16 chunk {d} occ{so}": SSDConfig(**_TK256, scan_heads=1,
                                                        scan_factored=d == "factored", scan_hints=(so, None))
       for d in ("exact", "factored") for so in (3, 4)},
    # ... a loop over 2 or 4 head blocks per scan block (scan_head_loop), and the factored decay in bf16 (2)
    **{f"fused TK256 + cb16 chunk factored{f16} occ4 hl{hl}": SSDConfig(**_TK256, scan_heads=1,
                                                                    scan_factored=2 if f16 else 1,
                                                                    scan_head_loop=hl, scan_hints=(4, None))
       for f16 in ("", "16") for hl in (1, 2, 4)},
    **{f"fused occ2 + cb16 chunk unroll occ3 hl{hl}": SSDConfig(**_CHUNK16, state_hints=(2, None),
                                                                scan_unroll=True, scan_heads=1,
                                                                scan_head_loop=hl, scan_hints=(3, None))
       for hl in (2, 4)},
    **{f"seg8 TK256 + cb16 chunk occ3 hl{hl}": SSDConfig(**_TK256, segments=8, scan_heads=1,
                                                         scan_head_loop=hl, scan_hints=(3, None))
       for hl in (2, 4)},
    **{f"fused occ2 + cb16 chunk unroll {d} occ3":
       SSDConfig(**_CHUNK16, state_hints=(2, None), scan_unroll=True, scan_heads=1,
                 scan_factored=d == "factored", scan_hints=(3, None)) for d in ("exact", "factored")},
    **{f"seg8 TK256 + cb16 chunk {d} occ3":
       SSDConfig(**_TK256, segments=8, scan_heads=1, scan_factored=d == "factored", scan_hints=(3, None))
       for d in ("exact", "factored")},
    "fused TK64 + cb16 chunk HB1 occ4": SSDConfig(**(_CHUNK16 | dict(state_tiles=(64, 128, 64))),
                                                  scan_heads=1, scan_hints=(4, None)),
    "fused HB2 nww8 TK256 + cb16 chunk HB1 occ4": SSDConfig(**_TK256,
                                                            state_heads=2, state_hints=(None, None, 8),
                                                            scan_heads=1, scan_hints=(4, None)),
    # ... and the whole-chunk scan unrolled for full chunks (sm_90 cubin: occupancy 2 128 registers, 111 KB
    # shared memory; 3: 158 registers, 36 KB; 4: 128 registers and a 104-byte stack)
    **{f"fused TK256 + cb16 chunk unroll occ{so}": SSDConfig(**_TK256,
                                                             scan_unroll=True, scan_heads=1,
                                                             scan_hints=(so, None)) for so in (2, 3, 4)},
    **{f"fused occ2 + cb16 chunk unroll occ{so}": SSDConfig(**_CHUNK16, state_hints=(2, None),
                                                            scan_unroll=True, scan_heads=1,
                                                            scan_hints=(so, None)) for so in (2, 3, 4)},
    **{f"seg8 TK256 + cb16 chunk{' unroll' if u else ''} occ{so}":
       SSDConfig(**_TK256, segments=8, scan_unroll=u, scan_heads=1,
                 scan_hints=(so, None)) for u, so in ((False, 3), (True, 2), (True, 3))},
    # (unroll-rows, the row tiles unrolled with their key loops kept, was measured here on 2026-12-04 and
    # removed: slower at every shape, docs/perf-notes.md attempt 19)
    "fused TK256 nww8 + cb16 chunk HB1 occ4": SSDConfig(**_TK256,
                                                        state_hints=(None, None, 8), scan_heads=1,
                                                        scan_hints=(4, None)),
    "fused occ3 + cb16 chunk unroll occ3": SSDConfig(**_CHUNK16, state_hints=(3, None), scan_unroll=True,
                                                     scan_heads=1, scan_hints=(3, None)),
    **{f"seg{k} TK256 + cb16 chunk occ3": SSDConfig(**_TK256, segments=k,
                                                    scan_heads=1, scan_hints=(3, None)) for k in (4, 16)},
    "small: fused TK256 + shared HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 128, 256),
                                                     scan_shared=True, scan_heads=1, scan_hints=(3, None)),
    # (state_tiles (64, 128) meant 128 rows per step before attempt 19; (64, 128, 128) keeps that)
    "small: fused + shared HB1 occ3": SSDConfig(fused=True, state_tiles=(64, 128, 128), scan_shared=True,
                                               scan_heads=1, scan_hints=(3, None)),
    # attempt 23 (2026-12-04 evening): the key-log2 form, P = C Bᵀ ∘ exp2(a_m - kd_k) with kd = dA_cs·log2(e)
    # - log2(dt) from a small kernel (or from the state stage: "state-kd"); sm_90 cubin at occupancy 4: key
    # steps of 230 and 318 instructions (off-diagonal, diagonal) against 353 and 467 for the shipped factored
    # decay; 200 and 281 at occupancy 3. The shipped configs first, for reference in the same run (in the
    # first probe of attempt 23, "ship b8" was the factored decay at occupancy 4; since, it is "kl2 occ3")
    "ship b8": FAST_16BIT_CB,
    "ship g8": FAST_BF16_Q128,
    "ship b1": LONG_BF16,
    **{f"kl2 occ{so}{' hl2' if hl > 1 else ''}": SSDConfig(
        **(vars(FAST_16BIT_CB) | dict(scan_factored=3, scan_hints=(so, None), scan_head_loop=hl)))
       for so, hl in ((4, 1), (3, 1), (4, 2), (3, 2))},
    "kl2 state-kd occ4": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_factored=3, state_key_log2=True))),
    "kl2 g8 unroll occ3": SSDConfig(**(vars(FAST_BF16_Q128) | dict(scan_factored=3))),
    "kl2 g8 loops occ4": SSDConfig(**(vars(FAST_BF16_Q128)
                                      | dict(scan_factored=3, scan_unroll=False, scan_hints=(4, None)))),
    "kl2 b1 seg8 occ3": SSDConfig(**(vars(LONG_BF16) | dict(scan_factored=3))),
    "kl2 b1 seg8 state-kd occ3": SSDConfig(**(vars(LONG_BF16) | dict(scan_factored=3, state_key_log2=True))),
    # ... two heads per scan block sharing C and C Bᵀ (a fifth fewer L2 reads per head), which the key-log2
    # form's fewer registers may let fit (sm_90 cubin at occupancy 2: 128 registers, 112 KB, no stack)
    **{f"kl2 HB2 occ{so}": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_factored=3, scan_heads=2,
                                                                   scan_hints=(so, None)))) for so in (2, 3)},
    # ... latency hints on the scan's key-loop loads and on the fused stage's x and B loads, now that the scan
    # issues fewer instructions (docs/perf-notes.md, next steps)
    **{f"kl2 occ{so} lat{lat}": SSDConfig(**(vars(FAST_16BIT_CB)
                                             | dict(scan_hints=(so, None), scan_latency=lat)))
       for so, lat in ((3, 2), (3, 4), (3, 8), (4, 4))},
    **{f"kl2 state lat{lat}": SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_latency=lat))) for lat in (2, 6)},
    # attempts 21 and 22, coded on 2026-12-04 and not measured before: a loop over 2 head blocks with the
    # factored decay (the key-log2 form's hl2 variants are above). The other, the factored decay's row factor
    # hoisted out of the key loop (scan_factored=3 then; its sm_90 cubin lost the producer warp: 128
    # registers, 28 barriers), took the scan from 0.429 to 0.678 ms; commit 9bad0fa has it
    "f1 hl2 occ4": SSDConfig(fused=True, state_tiles=(64, 128), scan_cb=True, scan_cb_bf16=True,
                             scan_chunk=True, scan_heads=1, scan_hints=(4, None), scan_factored=True,
                             scan_head_loop=2),
    # attempt 24 (2026-12-04 night): the state stages' FORM (chunk_state.chunk_local_state): dt behind a
    # layout anchor (2: chunk_state.computed_once; sm_90 chunk loop 1365 -> 861 instructions, 920 with kd
    # stored) and/or the mma accumulating into the decayed state (4); "kd": the stage stores kd itself (no
    # key_log2_kernel launch)
    **{f"s24 {name} f{form}{' kd' if kd else ''}": SSDConfig(**(vars(cfg) | dict(
        scan_factored=3, state_key_log2=kd, state_form=form)))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128))
       for form, kd in ((0, False), (2, False), (2, True), (4, False), (4, True), (6, True))},
    # ... at occupancy 2 (sm_90 cubins at chunk size 256: 128 registers, no stack, 113 KB of shared memory
    # with 256 rows per mma step, 106 KB with 128; form 0 with 128 rows spills 8.6 KB per thread), with 256,
    # 128 or 64 rows per step and latency hints on the x and B loads
    **{f"s24 {name} occ2 f{form}{' kd' if kd else ''}{f' tk{tk}' if tk else ''}{f' lat{lat}' if lat else ''}":
       SSDConfig(**(vars(cfg) | dict(scan_factored=3, state_key_log2=kd, state_form=form, state_latency=lat,
                                     state_hints=(2, None), state_tiles=(64, 128, tk) if tk else (64, 128))))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128))
       for form, kd, tk, lat in ((0, False, 0, 0), (2, True, 0, 0), (6, True, 0, 0), (6, True, 128, 0),
                                 (2, False, 0, 0), (6, True, 64, 0), (6, True, 128, 2), (6, True, 128, 4),
                                 (2, True, 128, 0))},
    # ... not measured yet (next step 3 of docs/perf-notes.md): two 64 x 64 state tiles per (batch, head),
    # 1280 blocks at b8 (sm_90 cubins with form 7: occupancy 3, 128 rows per step: 80 registers, a 32-byte
    # stack, 71 KB of shared memory; occupancy 4, 64 rows: 64 registers, 16-byte stack, 57 KB)
    **{f"s24 {name} t64x64 occ{occ} tk{tk}": SSDConfig(**(vars(cfg) | dict(
        state_tiles=(64, 64, tk), state_hints=(occ, None))))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16))
       for occ, tk in ((3, 128), (4, 64), (2, 128))},
    # attempt 25 (2026-12-04 late): the key-log2 scan with kd from the stage at occupancy 4 and 2
    **{f"s25 b8 scan occ{so}": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_hints=(so, None))))
       for so in (2, 4)},
    # ... row groups: the whole-chunk scan key-major inside groups of RG row tiles, each x tile loaded once
    # per group (6 x tile loads per 256-row chunk with RG 2, 4 with RG 4, against 10). sm_90 cubins with
    # the benchmark's inputs (no D, no z): RG 2 at occupancy 2 128 registers and a 16-byte stack, with 8
    # worker warps 80 and none; RG 4 at occupancy 1 with 8 worker warps 168 and none, at 2 80 and 8 bytes;
    # RG 2 at occupancy 3 168 and 88 bytes
    **{f"s25 {name} rg{rg} occ{occ}{f' nww{w}' if w else ''}": SSDConfig(**(vars(cfg) | dict(
        scan_row_group=rg, scan_unroll=False, scan_factored=3,
        scan_hints=(occ, None, w) if w else (occ, None))))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128))
       for rg, occ, w in ((2, 2, 0), (2, 2, 8), (4, 1, 8), (4, 2, 8), (2, 3, 0))
       if not (name == "g8" and rg == 4)},
    # ... C Bᵀ launched first, on a side stream (SSDConfig.scan_cb_early): its blocks may fill the state
    # stage's last wave (640 blocks for 264 slots at b8)
    **{f"s25 {name} cb early": SSDConfig(**(vars(cfg) | dict(scan_cb_early=True)))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128))},
    # ... the next chunk's raw dt loaded one chunk ahead (state_form | 8, STATE_DT_AHEAD): attempt 20 measured
    # it slower at occupancy 1 with dt replicated per element; with dt computed once it costs no register
    # (sm_90 cubins: 128 registers, no stack, as without it)
    # ... or loaded as a box of 16 neighbouring heads (| 16, STATE_DT_BOX): a TMA load that the producer warp
    # issues with x and B (sm_90 cubin at b8: 5 UTMALDG, the two LDG.U16 gathers gone, 128 registers, no
    # stack; with | 8 as well an 8-byte stack)
    **{f"s25 {name} f{cfg.state_form | bits}": SSDConfig(**(vars(cfg)
                                                            | dict(state_form=cfg.state_form | bits)))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128))
       for bits in (8, 16, 24)},
    # ... the batch in parts on their own streams (SSDConfig.batch_streams), staggered or not, with C Bᵀ early
    **{f"s25 b8 batch{k}{' stagger' if st else ''}{' cb early' if early else ''}": SSDConfig(
        **(vars(FAST_16BIT_CB) | dict(batch_streams=k, batch_stagger=st, scan_cb_early=early)))
       for k, st, early in ((2, False, False), (2, True, False), (4, False, False), (4, True, False),
                            (2, True, True))},
    # attempt 26 (2026-12-04 night): the fused stage's last wave launched apart (SSDConfig.state_tail):
    # at b8 the first 64 heads (512 blocks, two waves of 264 slots at occupancy 2) as shipped, the last 16
    # heads with smaller state tiles at a higher occupancy (two 64 x 64 tiles: 256 blocks; four 64 x 32
    # tiles: 512), or as shipped ("same": the cost of the second launch alone)
    # ... and the segmented stage at b1 (640 blocks too: 80 heads x 8 segments), the same way
    **{f"s26 {name} tail {label}": SSDConfig(**(vars(cfg) | dict(state_tail=tail)))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16))
       for label, tail in (("t64x64 occ3 tk128", ((64, 64, 128), (3, None))),
                           ("t64x64 occ4 tk64", ((64, 64, 64), (4, None))),
                           ("t64x32 occ4 tk64", ((64, 32, 64), (4, None))),
                           ("same", ((64, 128, 128), (2, None))))},
    # ... and the C Bᵀ kernel's hints (its sm_90 cubin at b8 takes 255 registers without one)
    **{f"s26 {name} cb occ{occ}": SSDConfig(**(vars(cfg) | dict(scan_cb_hints=(occ, None))))
       for name, cfg in (("b8", FAST_16BIT_CB), ("b1", LONG_BF16), ("g8", FAST_BF16_Q128)) for occ in (2, 4)},
    # attempt 27 (2026-12-05): the last wave's chains cut in two segments instead (state_tail_segments): at
    # b8 the last 16 heads' 128 chains as 256 half-length blocks with the shipped tiles and hints (one wave
    # of 264 slots), then segment_fixup_kernel (64 registers, no stack) adds segment 0's carry to the
    # second halves' entering states; alone, and with C Bᵀ on a side stream
    **{f"s27 b8 split2{label}": SSDConfig(**(vars(FAST_16BIT_CB) | dict(
        state_tail=(FAST_16BIT_CB.state_tiles, FAST_16BIT_CB.state_hints), state_tail_segments=2) | extra))
       for label, extra in (("", {}), (" cb early", dict(scan_cb_early=True)))},
    # ... and with attempt 26's smaller tiles too: 128 chains x 2 segments x two 64 x 64 tiles = 512 blocks
    # for 528 slots at occupancy 4, each about a third of a full block (half the chain, 0.6-0.7 of the
    # work per chunk): one round of 0.33 against split2's 0.5
    "s27 b8 split2 t64x64 occ4 tk64": SSDConfig(**(vars(FAST_16BIT_CB) | dict(
        state_tail=((64, 64, 64), (4, None)), state_tail_segments=2))),
    # ... and at b1 the segmented stage's entering states fixed up in place for every head
    # (segment_fixup): the scan then adds no carry (the carry scan took 0.489 ms at b1 against 0.407 for the
    # same 10240 blocks at b8), against a fix-up pass over 7/8 of the entering states (about 0.3 GB)
    "s27 b1 fixup": SSDConfig(**(vars(LONG_BF16) | dict(segment_fixup=True))),
    # ... and 16 segments of 8 chunks instead of 8 of 16: attempt 16 measured 16 slower at occupancy 1 (132
    # slots: 9.7 waves, 0.381 against 0.355 ms); at the shipped occupancy 2 (264 slots) 8 segments are 640
    # blocks, 2.4 waves (the last 42% full), 16 are 1280 half-length blocks, 4.85 waves: 2.5 full-block
    # waves against 3, if the shorter blocks run as fast per chunk
    **{f"s27 b1 seg16{label}": SSDConfig(**(vars(LONG_BF16) | dict(segments=16, segment_fixup=fix)))
       for label, fix in (("", False), (" fixup", True))},
    # clusters of 2 blocks (num_ctas 2, night probe 3) were tried here: the chunk scan failed with a
    # misaligned address, the fused stage returned wrong results; SSDConfig now rejects num_ctas > 1
}
SHAPES = ("b8-l4096-h80", "b2-l8192-h128-g8")

#: SSDConfig fields by the launches they act on. Levers of different groups change different launches, so
#: their gains may add up: ``--combine`` measures every combination of the faster single levers, one per group
GROUPS = {
    "state": ("fused", "state_tiles", "state_hints", "passing_hints", "state_latency", "segments",
              "state_heads", "state_key_log2", "state_form", "state_tail", "state_tail_segments",
              "segment_fixup"),
    "scan": ("scan_tiles", "scan_heads", "scan_hints", "scan_latency", "scan_factored", "scan_2d",
             "scan_shared", "scan_cb", "scan_chunk", "scan_cb_bf16", "scan_unroll", "scan_head_loop",
             "scan_row_group", "scan_cb_hints"),
    "streams": ("scan_cb_early", "batch_streams", "batch_stagger"),
}


def lever(base: SSDConfig, cfg: SSDConfig) -> tuple[str, dict] | None:
    """(group, the fields ``cfg`` changes from ``base``) when all its changes lie in one group of GROUPS, else
    None (no change, or a combination already)."""
    diff = {k: v for k, v in vars(cfg).items() if v != getattr(base, k)}
    groups = {g for g, fields in GROUPS.items() for k in diff if k in fields}
    unknown = set(diff) - {k for fields in GROUPS.values() for k in fields}
    if unknown:
        raise ValueError(f"SSDConfig fields {sorted(unknown)} are in no lever group of benchmarks/probe.py")
    return (groups.pop(), diff) if len(groups) == 1 else None


def combinations(base_name: str, chain_ms: dict[str, float], top: int = 2,
                 margin: float = 0.005) -> dict[str, SSDConfig]:
    """Configs combining the single levers that beat ``base_name`` (chain ms, ``chain_ms[name]``) by more
    than ``margin`` (a fraction): the ``top`` fastest of each group, every choice of at most one per group
    over two groups or more. Names: the levers' names joined by " + "; combinations SSDConfig rejects are
    left out."""
    base = VARIANTS[base_name]
    best: dict[str, list[tuple[float, str, dict]]] = {}
    for name, ms in chain_ms.items():
        if name == base_name or ms >= chain_ms[base_name] * (1 - margin):
            continue
        found = lever(base, VARIANTS[name])
        if found:
            best.setdefault(found[0], []).append((ms, name, found[1]))
    choices = [sorted(v)[:top] for _, v in sorted(best.items())]
    combos: dict[str, SSDConfig] = {}

    def walk(i, picked):
        if i == len(choices):
            if len(picked) >= 2:
                fields = vars(base) | {k: v for _, _, d in picked for k, v in d.items()}
                try:
                    combos[" + ".join(name for _, name, _ in picked)] = SSDConfig(**fields)
                except ValueError:
                    pass
            return
        walk(i + 1, picked)
        for c in choices[i]:
            walk(i + 1, picked + [c])

    walk(0, [])
    return combos


def _inputs(name, seed=0, device="cuda"):
    from mamba2_tutorial.inputs import SHAPES as PRESETS
    from mamba2_tutorial.inputs import make_inputs

    shape = PRESETS[name]
    return shape, make_inputs(shape, seed=seed, dtype=torch.bfloat16, device=device, D=False)


def _wall_ms(fn) -> float:
    """--dry-run's stand-in timer: the wall-clock time of one call (the CPU executor's: no measurement)."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def _warm(task):
    """Worker process: one launch of each kernel of a variant per shape fills cuTile's disk cache."""
    from mamba2_tutorial.ssd import ssd_forward

    vname, shapes = task
    t0 = time.perf_counter()
    try:
        for sname in shapes:
            shape, inp = _inputs(sname)
            ssd_forward(**inp, chunk_size=shape.chunk_size, backend="gpu", _config=VARIANTS[vname])
        torch.cuda.synchronize()
        return vname, time.perf_counter() - t0, None
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        return vname, time.perf_counter() - t0, f"{type(exc).__name__}: {str(exc)[:400]}"


def best_per_shape(results: dict, base_name: str, margin: float = 0.005) -> dict[str, str]:
    """{shape: the variant to ship}: the fastest that passed its check (chain ms), if it beats
    ``base_name`` (the shipped config) by more than ``margin``, else ``base_name``; only shapes where the
    base was measured."""
    best = {}
    for sname in {s for per in results.values() for s in per}:
        timed = {v: per[sname]["ms"]["chain"] for v, per in results.items()
                 if sname in per and per[sname]["ok"]}
        if base_name not in timed:
            continue
        name = min(timed, key=timed.get)
        best[sname] = name if timed[name] < timed[base_name] * (1 - margin) else base_name
    return best


def write_best(results: dict, base_name: str, combined: dict, path: str,
               quiet: bool = False) -> dict[str, str]:
    """``best_per_shape`` written as {shape: SSDConfig fields} (``bench --configs`` reads it); printed
    unless ``quiet``."""
    from mamba2_tutorial.kernels.configs import config_source, config_to_json

    best = best_per_shape(results, base_name)
    configs = {s: config_to_json(combined.get(v) or VARIANTS[v]) for s, v in sorted(best.items())}
    with open(path, "w") as f:
        json.dump(configs, f, indent=1)
    for s, v in sorted(best.items()) if not quiet else ():
        print(f"best at {s}: {v} ({results[v][s]['ms']['chain']:.3f} ms against "
              f"{results[base_name][s]['ms']['chain']:.3f} for {base_name}) -> {path}\n    "
              + config_source(combined.get(v) or VARIANTS[v]))
    return best


def _measure(vname, cfg, sname, inp, y_ref, f_ref, timer, backend, results, failed):
    """Check one variant on one shape against the float64 reference, then time its stages and its chain
    (``timer(fn) -> ms``); into ``results[vname][sname]``, or ``failed[vname]``."""
    from mamba2_tutorial.checks import relative_error
    from mamba2_tutorial.inputs import SHAPES as PRESETS
    from mamba2_tutorial.ssd import ssd_forward, ssd_stages

    Q = PRESETS[sname].chunk_size
    try:
        y, fin = ssd_forward(**inp, chunk_size=Q, return_final_states=True, backend=backend, _config=cfg,
                             _poison=True)
        err = max(relative_error(y, y_ref), relative_error(fin, f_ref))
        stages = ssd_stages(**inp, chunk_size=Q, backend=backend, config=cfg)
        ms = {k: timer(f) for k, f in stages.items() if k != "meta"}
    except Exception as exc:  # noqa: BLE001 - reported, not fatal
        failed[vname] = f"{type(exc).__name__}: {str(exc)[:400]}"
        print(f"FAIL {vname} {sname}: {failed[vname]}", flush=True)
        return
    ok = err < GATE
    results.setdefault(vname, {})[sname] = {"err": err, "ok": ok, "ms": ms}
    parts = " ".join(f"{k}={v:.3f}" for k, v in ms.items())
    print(f"{sname:18s} {vname:30s} err {err:.1e} {'ok ' if ok else 'BAD'} {parts}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--rep-ms", type=float, default=60.0)
    ap.add_argument("--compile-s", type=float, default=90.0, help="give up on variants not compiled by then")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--combine", default="", metavar="BASE",
                    help="then measure every combination of the levers faster than this variant, the two "
                         "fastest of each group (GROUPS), in the same run")
    ap.add_argument("--dry-run", action="store_true",
                    help="on the CPU executor, one wall-clock call per stage: the script's whole path on "
                         "small presets without a GPU (tests/test_probe.py); no number it prints is a "
                         "measurement")
    args = ap.parse_args(argv)
    device, backend = ("cpu", "cpu") if args.dry_run else ("cuda", "gpu")
    if args.dry_run:
        args.workers = 0
        timer = _wall_ms
    else:
        from mamba2_tutorial.timing import time_cuda

        def timer(fn):
            return time_cuda(fn, warmup_ms=10, rep_ms=args.rep_ms).median_ms
    if args.combine and args.combine not in VARIANTS:
        ap.error(f"unknown --combine base: {args.combine}")
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    unknown = only - set(VARIANTS)
    if unknown:
        ap.error(f"unknown variants: {sorted(unknown)}")
    names = [n for n in VARIANTS if not only or n in only]
    shapes = args.shapes.split(",")
    t_start = time.perf_counter()

    failed: dict[str, str] = {}
    if args.workers > 0:
        import multiprocessing as mp

        pool = mp.get_context("spawn").Pool(min(args.workers, len(names)))
        pending = set(names)
        it = pool.imap_unordered(_warm, [(n, shapes) for n in names])
        try:
            while pending:
                left = args.compile_s - (time.perf_counter() - t_start)
                vname, secs, err = it.next(timeout=max(left, 0.1))
                pending.discard(vname)
                print(f"compiled {vname:30s} {secs:5.1f} s" + (f"  FAILED {err}" if err else ""), flush=True)
                if err:
                    failed[vname] = err
        except mp.TimeoutError:
            # seen on the H200 (2026-12-02): some fused variants compiled for minutes; skip, don't hang
            for vname in pending:
                failed[vname] = f"not compiled within --compile-s {args.compile_s:.0f} s"
        pool.terminate()
    print(f"compile phase {time.perf_counter() - t_start:.0f} s", flush=True)

    from mamba2_tutorial.reference import ssd_chunked

    results: dict = {}
    combined: dict[str, SSDConfig] = {}
    os.makedirs(args.out, exist_ok=True)
    device_name = "CPU dry run: not a measurement" if args.dry_run else torch.cuda.get_device_name()

    def save():  # after every variant: a run cut off by the device call's time limit keeps what it measured
        with open(os.path.join(args.out, "probe.json"), "w") as f:
            json.dump({"device": device_name,
                       "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "results": results, "failed": failed,
                       "variants": {n: repr(VARIANTS[n]) for n in names}
                       | {n: repr(c) for n, c in combined.items()}}, f, indent=1)
        if args.combine:  # the config to ship per shape, for `python -m mamba2_tutorial bench --configs`
            write_best(results, args.combine, combined, os.path.join(args.out, "best.json"), quiet=True)

    for sname in shapes:
        shape, inp = _inputs(sname, seed=1, device=device)
        Q = shape.chunk_size
        inp64 = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inp.items()}
        y_ref, f_ref = ssd_chunked(**inp64, chunk_size=Q, return_final_states=True)
        del inp64
        run = (sname, inp, y_ref, f_ref, timer, backend, results, failed)
        for vname in names:
            if vname not in failed:
                _measure(vname, VARIANTS[vname], *run)
                save()
        if args.combine and sname in results.get(args.combine, {}):
            chain = {v: per[sname]["ms"]["chain"] for v, per in results.items()
                     if sname in per and per[sname]["ok"] and v in VARIANTS}
            combos = combinations(args.combine, chain)
            print(f"{len(combos)} combinations of the faster levers", flush=True)
            for cname, cfg in combos.items():
                combined[cname] = cfg
                _measure(cname, cfg, *run)
                save()
        del inp, y_ref, f_ref, run
        if not args.dry_run:
            torch.cuda.empty_cache()

    save()
    if args.combine:
        write_best(results, args.combine, combined, os.path.join(args.out, "best.json"))
    print("\n== chain ms per shape (median, cold L2) ==")
    for vname, per in results.items():
        print(f"{vname:30s} " + " ".join(f"{s}:{r['ms']['chain']:.3f}{'' if r['ok'] else '(BAD)'}"
                                         for s, r in per.items()))
    for vname, why in failed.items():
        print(f"{vname:30s} FAILED {why[:200]}")
    print(f"probe total {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
