"""Per-shape launch configurations of the SSD kernels: tiles, heads per block, compiler hints, fusion.

``ssd_config(b, l, h, p, g, n, Q, dtype)`` returns the :class:`SSDConfig` that ``ssd_forward`` launches with.
The choices come from measured sweeps on an NVIDIA H200 (``python -m mamba2_tutorial.tune``; results and dates
in ``docs/perf-notes.md``). A config changes only speed, never results: every field is a tile size, a hint, or
the choice between two kernels that compute the same intermediates (the GPU sweep checks each variant against
the float64 reference before timing it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = ["DEFAULT", "FAST_16BIT", "FAST_16BIT_CB", "FAST_16BIT_Q128", "FAST_BF16_Q128", "FAST_FP16_CB",
           "LONG_FP16", "LONG_BF16", "SCAN_CHUNK_BF16", "SCAN_CHUNK_BF16_CARRY", "SCAN_CHUNK_BF16_Q128",
           "SCAN_CHUNK_FP16",
           "SCAN_SHARED", "SSDConfig", "config_from_json", "config_source", "config_to_json", "segments_for",
           "ssd_config"]

Hints = tuple  # (occupancy, num_ctas[, num_worker_warps]); None = the compiler's choice


@dataclass(frozen=True)
class SSDConfig:
    """How ``ssd_forward`` runs one problem size.

    fused         kernels 1 and 2 as one (``chunk_state_passing_kernel``): the float32 chunk states never
                  reach global memory; else ``chunk_state_kernel`` then ``state_passing_kernel``
    state_tiles   (TP, TN) state tile of the fused kernel or of state_passing (None: the default); (TP, TN,
                  TK) also sets the fused kernel's chunk rows per mma step (default min(Q, 256) for 16-bit)
    state_hints   (occupancy, num_ctas[, num_worker_warps]) of the fused kernel or of chunk_state
    passing_hints (occupancy, num_ctas) of state_passing (unfused only)
    scan_tiles    (TM, TK, TP) of chunk_scan (None: the default)
    scan_heads    cap on heads per chunk_scan block (None: the default)
    scan_hints    (occupancy, num_ctas[, num_worker_warps]) of chunk_scan
    scan_latency  latency hint (1-10) of chunk_scan's key-loop loads; 0: none
    scan_2d       chunk_scan_heads_kernel: the block's heads one at a time with 2-D mmas (wgmma on sm_90)
                  instead of chunk_scan_kernel's batched 3-D mma (scan_factored is then ignored)
    scan_factored chunk_scan splits the decay of key tiles before the row tile into two factors (used only
                  when dt_limit's bounds are >= 0, so that dt >= 0 and the in-chunk cumsum is monotone);
                  2 and 3, whole-chunk scan only: 2 multiplies the factors and C Bᵀ in x's dtype (an
                  experiment); 3 is the key-log2 form: kd = dA_cs · log2(e) - log2(dt) replaces dt_out,
                  and every key tile (the diagonal ones too) takes P = C Bᵀ ∘ exp2(a_m - kd_k): no dt
                  multiply, no clamp (attempt 23 of docs/perf-notes.md); kd comes from a small kernel of
                  its own before the scan, or from the fused state stage with state_key_log2
    scan_shared   chunk_scan_shared_kernel: 2-D mmas (wgmma on sm_90) with C Bᵀ computed once per key tile and
                  shared by the block's heads, one 2-D accumulator per head (overrides scan_2d)
    state_latency latency hint (1-10) of the fused kernel's x and B loads; 0: none
    scan_cb       C Bᵀ once per (chunk, group) by ``chunk_cb_kernel``, then ``chunk_scan_cb_kernel`` reads it
                  (2-D mmas, heads-first grid; overrides scan_shared and scan_2d)
    scan_chunk    with scan_cb: one block per (head, chunk) walks all the chunk's row tiles (an experiment)
    scan_cb_bf16  with scan_cb and 16-bit inputs: C Bᵀ stored in bfloat16 instead of float32 (half the scan's
                  largest reads; the scan rounds C Bᵀ · decay · dt to x's dtype for its mma anyway); ignored
                  for float32 inputs, which keep a float32 C Bᵀ
    segments      with fused, scan_cb and scan_chunk: the fused state stage cut into this many segments of the
                  sequence (``kernels.segments``): b·h·segments blocks walk cdiv(nchunks, segments) chunks
                  each, state_passing carries the state across the segments, and the scan adds the carry;
                  1: the plain fused stage (one block walks all the chunks of a (batch, head))
    state_heads   with fused (not segmented): heads of one group per fused block, sharing each B tile
                  (``chunk_state_passing_heads_kernel``; needs a single state tile per head); an experiment
    scan_unroll   with scan_cb and scan_chunk: the whole-chunk scan takes each full chunk as one unrolled body
                  (no loops over row and key tiles); the ragged last chunk keeps the loops
    state_key_log2 with scan_factored=3: the fused (or segmented) state stage stores kd itself (no third
                  launch). Cheap only with state_form's STATE_DT_ONCE: otherwise the compiler evaluates
                  cuTile's exact log2 per element of the x tile and the stage's chunk loop doubles
    scan_head_loop with scan_cb and scan_chunk: each block walks this many head blocks of one chunk in a loop
                  (grid h / (HB · scan_head_loop); it must divide h / HB), so that the loads of the next
                  head block may overlap this one's work; an experiment, not measured yet
    state_form    with fused and state_heads 1: a sum of ``chunk_state.STATE_DT_ONCE`` (2: the stage's dt
                  vector computed once per chunk behind a layout anchor, not re-derived in the layout of the
                  x·w product), ``chunk_state.STATE_ACC`` (4: the chunk's mma accumulates into the
                  decayed state), ``chunk_state.STATE_DT_AHEAD`` (8: the next chunk's raw dt loaded one
                  chunk ahead) and ``chunk_state.STATE_DT_BOX`` (16: dt loaded as a box of 16 neighbouring
                  heads, a TMA load, attempt 25); the same results up to float32 rounding (attempt 24 of
                  docs/perf-notes.md)
    scan_row_group with scan_cb, scan_chunk and scan_factored=3: the whole-chunk scan walks a full chunk's
                  row tiles in groups of this many, key-major inside a group (each x tile loaded once per
                  group: at chunk size 256 6 x tile loads per chunk with 2, 4 with 4, against 10), keeping
                  that many accumulators live; needs one head per block (scan_heads=1), equal row and key
                  tiles, no scan_unroll or scan_head_loop, and must divide the row tiles per chunk;
                  1: row tile by row tile (attempt 25 of docs/perf-notes.md)
    scan_cb_early with scan_cb: C Bᵀ is launched before the state stage instead of just before the scan; on
                  the GPU on a side CUDA stream, so that its blocks can run on the SMs the state stage's
                  last wave leaves idle (attempt 25)
    batch_streams the batch cut into this many parts, each part's launches on its own side CUDA stream, so
                  that one part's scan can fill the SMs another part's state stage leaves idle (attempt 25);
                  1: one stream. On the CPU executor the parts run one after another (same results)
    batch_stagger with batch_streams > 1: each part's state stage waits for the previous part's, so that
                  the scans of the earlier parts overlap the later parts' state stages
    scan_cb_hints with scan_cb: (occupancy, num_ctas[, num_worker_warps]) of ``chunk_cb_kernel`` (the C Bᵀ
                  launch; its sm_90 cubin at b8 takes 255 registers with no hint)
    state_tail    with fused (segmented too; one head per block): (tiles, hints[, slots]) for the heads whose
                  blocks would run in the fused stage's last, partial wave. ``slots`` (default: the GPU's
                  SMs times state_hints' occupancy) is how many blocks run at once; the first heads, as many
                  as fill whole waves, are launched as configured, the rest by a second launch on views of
                  the same tensors with these state tiles and hints: smaller tiles (two 64 x 64 per head,
                  say) give the tail more, shorter blocks, filling the last wave's idle SMs. None: one launch
                  (attempt 26 of docs/perf-notes.md)
    state_tail_segments with state_tail on the plain fused stage (segments 1): the tail heads' chains cut
                  into this many segments of the sequence that run side by side (the segments kernel on
                  their views, with state_tail's tiles and hints), then ``segment_fixup_kernel`` adds each
                  segment's carry to the entering states it stored, in place, so the scan is unchanged.
                  At b8-l4096-h80, 2: the last wave's 128 chains as 256 half-length blocks. 1: the tail's
                  chains whole (attempt 27 of docs/perf-notes.md)
    segment_fixup with segments > 1: ``segment_fixup_kernel`` makes the segmented stage's entering states
                  true in place (no state passing over the segments), so the scan adds no carry and keeps
                  the plain whole-chunk scan's occupancy; False: the scan adds each segment's carry with one
                  more mma per row tile (attempt 27)
    """

    fused: bool = False
    state_tiles: tuple | None = None
    state_hints: Hints = (None, None)
    passing_hints: Hints = (None, None)
    scan_tiles: tuple | None = None
    scan_heads: int | None = None
    scan_hints: Hints = (None, None)
    scan_latency: int = 0
    scan_factored: bool | int = False
    scan_2d: bool = False
    scan_shared: bool = False
    state_latency: int = 0
    scan_cb: bool = False
    scan_chunk: bool = False
    scan_cb_bf16: bool = False
    segments: int = 1
    state_heads: int = 1
    scan_unroll: bool = False
    scan_head_loop: int = 1
    state_key_log2: bool = False
    state_form: int = 0
    scan_row_group: int = 1
    scan_cb_early: bool = False
    batch_streams: int = 1
    batch_stagger: bool = False
    state_tail: tuple | None = None
    scan_cb_hints: Hints = (None, None)
    state_tail_segments: int = 1
    segment_fixup: bool = False

    def __post_init__(self):
        for name in ("state_hints", "passing_hints", "scan_hints", "scan_cb_hints"):
            hints = getattr(self, name)
            if len(hints) > 1 and hints[1] not in (None, 1):
                raise ValueError(
                    f"SSDConfig.{name}: num_ctas = {hints[1]} is not supported: on the H200 (sm_90, "
                    "cuda.tile 1.7.0) clusters of 2 made the fused state stage return wrong results and the "
                    "chunk scan fail with a misaligned address (docs/perf-notes.md, attempt 16); use None")
        if type(self.segments) is not int or self.segments < 1:
            raise ValueError(f"SSDConfig.segments must be an int >= 1, got {self.segments!r}")
        if self.state_heads != 1 and not (self.fused and self.segments == 1):
            raise ValueError(f"SSDConfig.state_heads > 1 needs fused=True without segments; got {self}")
        if self.scan_unroll and not (self.scan_cb and self.scan_chunk):
            raise ValueError("SSDConfig.scan_unroll needs the whole-chunk scan (scan_cb=True, "
                             f"scan_chunk=True); got {self}")
        if self.scan_factored not in (0, 1, 2, 3):
            raise ValueError("SSDConfig.scan_factored must be False, True, 2 or 3, got "
                             f"{self.scan_factored!r}")
        if self.scan_factored >= 2 and not (self.scan_cb and self.scan_chunk):
            raise ValueError(f"SSDConfig.scan_factored={self.scan_factored} needs the whole-chunk "
                             f"scan (scan_cb=True, scan_chunk=True); got {self}")
        if self.state_key_log2 and not (self.scan_factored == 3 and self.fused and self.state_heads == 1):
            raise ValueError("SSDConfig.state_key_log2 (the state stage stores the key-log2 form) needs "
                             "scan_factored=3 and the fused state stage (fused=True, state_heads=1); "
                             f"got {self}")
        if type(self.state_form) is not int or self.state_form & ~30:
            raise ValueError(f"SSDConfig.state_form must be an int made of the bits 2 (STATE_DT_ONCE), 4 "
                             f"(STATE_ACC), 8 (STATE_DT_AHEAD) and 16 (STATE_DT_BOX), got "
                             f"{self.state_form!r}")
        if self.state_form and not (self.fused and self.state_heads == 1):
            raise ValueError("SSDConfig.state_form needs the fused state stage (fused=True, state_heads=1); "
                             f"got {self}")
        if type(self.scan_head_loop) is not int or self.scan_head_loop < 1:
            raise ValueError(f"SSDConfig.scan_head_loop must be an int >= 1, got {self.scan_head_loop!r}")
        if self.scan_head_loop != 1 and not (self.scan_cb and self.scan_chunk):
            raise ValueError("SSDConfig.scan_head_loop needs the whole-chunk scan (scan_cb=True, "
                             f"scan_chunk=True); got {self}")
        if type(self.scan_row_group) is not int or self.scan_row_group not in (1, 2, 4):
            raise ValueError(f"SSDConfig.scan_row_group must be 1, 2 or 4, got {self.scan_row_group!r}")
        if self.scan_row_group > 1 and not (self.scan_cb and self.scan_chunk and self.scan_factored == 3
                                            and self.scan_heads == 1 and not self.scan_unroll
                                            and self.scan_head_loop == 1):
            raise ValueError("SSDConfig.scan_row_group > 1 needs the whole-chunk scan in the key-log2 form "
                             "(scan_cb=True, scan_chunk=True, scan_factored=3) with scan_heads=1 and neither "
                             f"scan_unroll nor scan_head_loop; got {self}")
        if type(self.batch_streams) is not int or self.batch_streams < 1:
            raise ValueError(f"SSDConfig.batch_streams must be an int >= 1, got {self.batch_streams!r}")
        if self.batch_stagger and self.batch_streams < 2:
            raise ValueError(f"SSDConfig.batch_stagger needs batch_streams >= 2; got {self}")
        if any(v is not None for v in self.scan_cb_hints) and not self.scan_cb:
            raise ValueError(f"SSDConfig.scan_cb_hints needs the C Bᵀ scans (scan_cb=True); got {self}")
        if self.scan_cb_early and not self.scan_cb:
            raise ValueError(f"SSDConfig.scan_cb_early needs the C Bᵀ scans (scan_cb=True); got {self}")
        if self.state_tail is not None:
            tail = self.state_tail
            if not (isinstance(tail, tuple) and len(tail) in (2, 3) and isinstance(tail[1], tuple)
                    and (tail[0] is None or isinstance(tail[0], tuple))):
                raise ValueError("SSDConfig.state_tail must be (state_tiles, state_hints) or (state_tiles, "
                                 f"state_hints, slots), got {tail!r}")
            if len(tail) == 3 and (type(tail[2]) is not int or tail[2] < 1):
                raise ValueError(f"SSDConfig.state_tail's slots must be an int >= 1, got {tail[2]!r}")
            if not (self.fused and self.state_heads == 1):
                raise ValueError("SSDConfig.state_tail needs the fused (or segmented) state stage with one "
                                 f"head per block (fused=True, state_heads=1); got {self}")
        if type(self.state_tail_segments) is not int or self.state_tail_segments < 1:
            raise ValueError(f"SSDConfig.state_tail_segments must be an int >= 1, got "
                             f"{self.state_tail_segments!r}")
        if self.state_tail_segments > 1 and (self.state_tail is None or self.segments > 1):
            raise ValueError("SSDConfig.state_tail_segments > 1 cuts the tail of the plain fused stage: it "
                             f"needs state_tail and segments=1; got {self}")
        if self.segment_fixup and self.segments < 2:
            raise ValueError("SSDConfig.segment_fixup needs the segmented state stage (segments > 1); "
                             f"got {self}")
        if self.segments > 1 and not (self.fused and self.scan_cb and self.scan_chunk):
            raise ValueError("SSDConfig.segments > 1 (the segmented state stage) needs fused=True and the "
                             "whole-chunk scan (scan_cb=True, scan_chunk=True), whose blocks add the segment "
                             f"carry; got {self}")


DEFAULT = SSDConfig()

# Measured on an H200 on 2026-12-03 (docs/perf-notes.md, attempt 11): at b8-l4096-h80 the kernel chain
# takes 1.049 ms with this config against 1.581 ms with DEFAULT; at b2-l8192-h128-g8 0.847 against 1.400 ms.
# The fused state stage with a 64x128 state tile (one block per (p tile, batch, head), state in registers),
# then chunk_scan_shared_kernel, one head per block (2-D wgmma, 80 registers, no spills), occupancy 3.
FAST_16BIT = SSDConfig(fused=True, state_tiles=(64, 128),
                       scan_shared=True, scan_heads=1, scan_hints=(3, None))


# Measured on an H200 on 2026-12-03 (docs/perf-notes.md, attempts 13 and 15).
# The scans. Attempt 15 (evening): one block per (head, chunk) walking the chunk's 4 row tiles
# (chunk_scan_cb_chunk_kernel) with C Bᵀ stored in bfloat16 takes 0.481 ms at b8-l4096-h80, against 0.624 for
# chunk_scan_cb_kernel with a float32 C Bᵀ (attempt 13) and 0.541 for the chunk kernel with a float32 C Bᵀ.
# bf16 inputs: the bf16 C Bᵀ at occupancy 4 (relative error 2.9e-3 against 2.4e-3 with the float32 C Bᵀ).
# Attempt 20 (2026-12-04): with the factored decay (exponentials of the key tiles before the rows split into
# a row and a column factor: used when dt >= 0, as with the default dt_limit) 0.424 ms against 0.434 exact;
# every exponential flushing subnormal results to zero (ex2.approx.ftz: one instruction instead of four) took
# the exact scan from 0.482 to 0.434 ms.
# Attempt 23 (2026-12-04 evening): the key-log2 form (scan_factored=3: P = C Bᵀ ∘ exp2(a_m - kd_k), kd from
# its own small kernel) cut the scan's sm_90 key steps by 27-35% of their instructions but the scan only from
# 0.429 to 0.418 ms at occupancy 4 and 0.420 at 3 (end to end 0.715 -> 0.699 and 0.693): the scan is no longer
# bound by what it issues. Occupancy 3 (80 registers, tighter key steps).
SCAN_CHUNK_BF16 = dict(scan_cb=True, scan_cb_bf16=True, scan_chunk=True, scan_heads=1, scan_hints=(3, None),
                       scan_factored=3)
# fp16 inputs keep a float32 C Bᵀ (bf16 has 3 mantissa bits fewer than fp16: 8x fp16's rounding error); that
# kernel runs best at occupancy 3 (0.541 ms; 0.903 at occupancy 4)
SCAN_CHUNK_FP16 = dict(scan_cb=True, scan_chunk=True, scan_heads=1, scan_hints=(3, None))
# small problems, and fp16 at chunk size 128 (where C Bᵀ per head was faster than a float32 C Bᵀ kernel,
# attempt 13): chunk_scan_shared_kernel, one head per block, occupancy 3
SCAN_SHARED = dict(scan_shared=True, scan_heads=1, scan_hints=(3, None))

# chunk size 256, large problems: the fused state stage, then the chunk scan. Until attempt 23: the stage at
# occupancy 1 (the compiler's choice) with a whole chunk per mma step, 0.284 ms at b8-l4096-h80, 0.693 ms end
# to end for bf16.
# Attempt 24 (2026-12-04 night): the fused stage at occupancy 2 with 128 rows per mma step, its dt computed
# once behind a layout anchor and its mma accumulating into the decayed state (state_form 6: 128 registers,
# no stack, 106 KB of shared memory in the sm_90 cubin; before, 128 rows at occupancy 2 spilled 8.6 KB per
# thread), storing kd itself (no key_log2_kernel launch): state stage 0.283 -> 0.252 ms, scan stage 0.415 ->
# 0.402, end to end 0.695 -> 0.649 at b8-l4096-h80
STATE_OCC2 = dict(state_tiles=(64, 128, 128), state_hints=(2, None), state_form=6, state_key_log2=True)
FAST_16BIT_CB = SSDConfig(fused=True, **SCAN_CHUNK_BF16, **STATE_OCC2)
FAST_FP16_CB = SSDConfig(fused=True, state_tiles=(64, 128), **SCAN_CHUNK_FP16)
# chunk size 128: the fused stage runs 28% faster at occupancy 2 (b2-l8192-h128-g8: 0.313 against 0.434 ms;
# at chunk size 256 occupancy 2 is slower: 0.407 against 0.352 at b8-l4096-h80). bf16, large problems: the
# chunk scan (0.611 ms end to end, against 0.662 with the shared scan); fp16 and small problems: the shared
# scan
# Attempt 19 (2026-12-04): at chunk size 128 the whole-chunk scan unrolled (2 row tiles, 3 key steps, no
# loops) at occupancy 3 takes 0.356 ms against 0.371 for the loops at occupancy 4 (b2-l8192-h128-g8); at chunk
# size 256 the unrolled scan is slower (0.60-0.84 against 0.486 ms: 128-158 registers).
# The factored decay in the unrolled body is slower (0.563 against 0.346 ms, attempt 20), the key-log2 form
# with kd from its own kernel no faster (0.338 against 0.336, attempt 23).
# Attempt 24: with the fused stage's dt computed once (state_form 2) and kd stored by it, the key-log2 form
# pays: state stage 0.239 -> 0.225 ms, scan stage 0.336 -> 0.327, end to end 0.575 -> 0.549.
SCAN_CHUNK_BF16_Q128 = SCAN_CHUNK_BF16 | dict(scan_unroll=True, scan_hints=(3, None), scan_factored=3)
FAST_BF16_Q128 = SSDConfig(fused=True, state_tiles=(64, 128), state_hints=(2, None), state_form=2,
                           state_key_log2=True, **SCAN_CHUNK_BF16_Q128)
FAST_16BIT_Q128 = SSDConfig(fused=True, state_tiles=(64, 128), state_hints=(2, None), **SCAN_SHARED)
# fewer (batch, head) pairs than SMs and a long sequential loop: the fused stage has one block per pair (80
# at b1-l32768-h80, 0.546 ms); chunk_state (a block per chunk) + state_passing take 0.306 + 0.162 ms
# (0.952 ms end to end with the bf16 chunk scan). fp16 inputs (not measured as such) keep this pair, with
# the float32 C Bᵀ chunk scan
LONG_FP16 = SSDConfig(state_hints=(2, None), **SCAN_CHUNK_FP16)
# bf16 (attempt 16, 2026-12-03 night): the fused stage by segments (kernels/segments.py), 8 segments at
# b1-l32768-h80 (640 blocks of 16 chunks: 0.355 ms for both launches, against 0.306 + 0.162 unfused), then the
# chunk scan that adds the segment carry with a second inter-chunk mma. That scan fits occupancy 3, not 4
# (80 registers and 70 KB of shared memory at 3; 255 registers at 4): 0.539 ms against 0.482 without the
# carry. End to end 0.891 ms against 0.942 for the unfused pair with the bf16 chunk scan in the same run.
# (the factored decay: 0.519 against 0.513 ms at b1-l32768-h80, attempt 20: exact here; the key-log2 form,
# attempt 23: 0.511 against 0.517, end to end 0.803 against 0.814)
SCAN_CHUNK_BF16_CARRY = SCAN_CHUNK_BF16 | dict(scan_hints=(3, None), scan_factored=3)
# Attempt 24: the segmented stage as the fused one at b8 (STATE_OCC2): 0.298 -> 0.266 ms, end to end 0.803 ->
# 0.756
LONG_BF16 = SSDConfig(fused=True, segments=8, **SCAN_CHUNK_BF16_CARRY, **STATE_OCC2)

#: SMs of the H200 the configs were measured on: a fused grid of fewer blocks leaves SMs idle
SMS = 132
#: b·l·h from which C Bᵀ pays as its own launch (below, the forward is host-bound: a launch costs more)
CB_MIN_WORK = 1 << 20
#: chunks from which the fused stage's sequential loop is long enough to matter
LONG_LOOP = 32
#: blocks per SM the segmented state stage aims at (b·h·segments >= WAVES·SMS): 8 segments at b·h = 80 (4.8
#: waves) measured faster than 4 (2.4 waves: 0.414 ms) and 16 (9.7 waves, segments of 8 chunks: 0.381 ms)
WAVES = 4
#: chunks per segment below which more segments are not worth their carry
MIN_SEGMENT = 4


def segments_for(b: int, h: int, nchunks: int) -> int:
    """Segments of the segmented state stage: the smallest power of two giving at least ``WAVES`` blocks per
    SM (b·h·segments >= WAVES·SMS), with at least ``MIN_SEGMENT`` chunks per segment; 1 if that is none."""
    segments = 1
    while b * h * segments < WAVES * SMS and nchunks // (2 * segments) >= MIN_SEGMENT:
        segments *= 2
    return segments


def ssd_config(b: int, l: int, h: int, p: int, g: int, n: int, Q: int, dtype: torch.dtype) -> SSDConfig:
    """The measured-best configuration for this size and dtype (the default where none was measured).

    float16 and bfloat16 (measured on the H200 at the benchmark shapes, docs/perf-notes.md attempts 11-15):

    - the state stage: fused (one launch, :data:`chunk_state_passing_kernel`) with one 64 x 128 state tile
      per (batch, head), at occupancy 2 for chunk size <= 128; with the bf16 chunk scan at occupancy 2
      always, storing the key-log2 form kd (:data:`STATE_OCC2` at chunk size >= 256, attempt 24). When
      there are fewer (batch, head) pairs than SMs and at least ``LONG_LOOP`` chunks: for bf16 with the
      chunk scan, the same fused stage by segments (:func:`segments_for` of them; the scan then runs at
      occupancy 3, :data:`SCAN_CHUNK_BF16_CARRY`), otherwise unfused (chunk_state at occupancy 2, then
      state_passing). Unfused too when the state is larger than one 64 x 128 tile (p > 64 or n > 128: a
      fused block per state tile ran 2-4x slower);
    - the scan: for b·l·h >= ``CB_MIN_WORK`` the chunk scan (C Bᵀ by its own kernel, then one block per
      (head, chunk)): :data:`SCAN_CHUNK_BF16` for bf16, :data:`SCAN_CHUNK_FP16` for fp16 at chunk size >= 256;
      otherwise :data:`SCAN_SHARED` (small problems are host-bound: one launch fewer).

    So :data:`FAST_16BIT_CB` (bf16, chunk size 256, b8-l4096-h80), :data:`LONG_BF16` (bf16, b1-l32768-h80),
    :data:`FAST_BF16_Q128` (bf16, chunk size 128, b2-l8192-h128-g8), :data:`FAST_16BIT` (small problems).
    float32 inputs keep :data:`DEFAULT`: the float32 tiles are twice the bytes, and no float32 config has been
    measured yet.
    """
    if dtype not in (torch.float16, torch.bfloat16):
        return DEFAULT
    large = b * l * h >= CB_MIN_WORK
    if large and dtype == torch.bfloat16:
        scan = SCAN_CHUNK_BF16
    elif large and Q >= 256:
        scan = SCAN_CHUNK_FP16
    else:
        scan = SCAN_SHARED
    one_tile = p <= 64 and n <= 128
    nchunks = -(-l // Q)
    fused_hints = (2, None) if Q <= 128 else (None, None)
    long_loop = b * h < SMS and nchunks >= LONG_LOOP
    # the bf16 chunk scan's state stage (attempt 24): at chunk size >= 256 STATE_OCC2; at <= 128 occupancy 2
    # with the dt computed once, storing kd (FAST_BF16_Q128)
    state = dict(state_tiles=(64, 128), state_hints=fused_hints)
    if scan is SCAN_CHUNK_BF16:
        state = STATE_OCC2 if Q >= 256 else state | dict(state_form=2, state_key_log2=True)
    if one_tile and long_loop and scan is SCAN_CHUNK_BF16 and segments_for(b, h, nchunks) > 1:
        if Q < 256:  # the segmented stage's new forms were measured at chunk size 256 only
            state = dict(state_tiles=(64, 128), state_hints=fused_hints)
        return SSDConfig(fused=True, segments=segments_for(b, h, nchunks), **SCAN_CHUNK_BF16_CARRY, **state)
    if not one_tile or long_loop:
        return SSDConfig(state_hints=(2, None), **scan)
    if scan is SCAN_CHUNK_BF16 and Q <= 128:
        scan = SCAN_CHUNK_BF16_Q128
    return SSDConfig(fused=True, **scan, **state)


def config_to_json(cfg: SSDConfig) -> dict:
    """Every field of ``cfg`` by name, for a JSON file (tuples are written as lists): what the benchmark
    records for each shape, and what ``python -m mamba2_tutorial bench --configs`` reads back."""
    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(SSDConfig)}


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def config_from_json(fields: Mapping) -> SSDConfig:
    """The :class:`SSDConfig` of :func:`config_to_json`'s dict (lists read back as tuples). A field SSDConfig
    does not have is an error; missing fields take their defaults."""
    if not isinstance(fields, Mapping):
        raise TypeError(f"an SSDConfig must be given as an object of fields, got {type(fields).__name__}")
    known = {f.name for f in dataclasses.fields(SSDConfig)}
    unknown = sorted(set(fields) - known)
    if unknown:
        raise ValueError(f"unknown SSDConfig fields {unknown}; the fields are {sorted(known)}")
    return SSDConfig(**{k: _tuples(v) for k, v in fields.items()})


def config_source(cfg: SSDConfig) -> str:
    """Python source for ``cfg``: the named config of this module it differs from in the fewest fields, with
    those fields replaced, e.g. ``SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_row_group=2)))``; the
    name alone when it is one. For shipping a probe's winner (``best.json``) here by hand."""
    named = {name: value for name, value in globals().items()
             if isinstance(value, SSDConfig) and name.isupper()}

    def changes(base):
        return {k: v for k, v in config_to_json(cfg).items() if getattr(base, k) != v}

    name = min(named, key=lambda n: (len(changes(named[n])), n != "DEFAULT", n))
    diff = changes(named[name])
    if not diff:
        return name
    fields = ", ".join(f"{k}={v!r}" for k, v in diff.items())
    return f"SSDConfig(**(vars({name}) | dict({fields})))"
