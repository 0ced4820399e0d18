"""The tuning levers of ``ssd_forward`` (``mamba2_tutorial.kernels.configs.SSDConfig``) never change results.

Each config variant (chunk_state and state_passing fused into one kernel, chunk_scan's factored decay, other
tiles and heads per block, latency hints) runs ``ssd_forward`` with ``_poison=True`` (every intermediate and
output NaN-filled first) and is compared with the float64 reference ``ssd_chunked``: relative L2 error < 1e-4
for float32, < 1e-2 for bfloat16. The CPU tests use the tile executor on small ragged shapes with distinct
sizes; the ``gpu`` tests repeat them on the GPU (the lead's H200 run) at moderate sizes.
"""

from __future__ import annotations

import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.checks import relative_error
from mamba2_tutorial.inputs import SSDShape, make_inputs
from mamba2_tutorial.kernels.chunk_scan import chunk_scan_tiles
from mamba2_tutorial.kernels.configs import (
    DEFAULT,
    FAST_16BIT,
    FAST_16BIT_CB,
    FAST_16BIT_Q128,
    FAST_BF16_Q128,
    FAST_FP16_CB,
    LONG_BF16,
    LONG_FP16,
    SSDConfig,
    ssd_config,
)
from mamba2_tutorial.ssd import ssd_forward, ssd_stages

TOL = {torch.float32: 1e-4, torch.float16: 3e-3, torch.bfloat16: 1e-2}

VARIANTS = {
    "fused": SSDConfig(fused=True),
    "fused-small-tiles-lat": SSDConfig(fused=True, state_tiles=(16, 32), state_latency=3),
    "factored": SSDConfig(scan_factored=True),
    "factored-tm-ne-tk-hb2": SSDConfig(scan_factored=True, scan_tiles=(32, 16, 32), scan_heads=2),
    "fused+factored+sp-tiles": SSDConfig(fused=True, scan_factored=True, scan_latency=4),
    "unfused-sp-tiles": SSDConfig(state_tiles=(16, 16)),
    "heads-2d": SSDConfig(scan_2d=True),
    "heads-2d-hb1-tm-ne-tk-lat": SSDConfig(scan_2d=True, scan_heads=1, scan_tiles=(32, 16, 32),
                                           scan_latency=3),
    "heads-2d+fused": SSDConfig(scan_2d=True, fused=True, scan_factored=True),
    "shared-hb2": SSDConfig(scan_shared=True, scan_heads=2),
    "shared-hb4-tm-ne-tk+fused": SSDConfig(scan_shared=True, scan_heads=4, scan_tiles=(32, 16, 32),
                                           fused=True, scan_factored=True),
    "fast-16bit": FAST_16BIT,  # what ssd_forward runs for bf16/fp16 inputs (small problems)
    "fast-16bit-cb": FAST_16BIT_CB,  # ... large problems at chunk size 256
    "fast-16bit-q128": FAST_16BIT_Q128,  # ... chunk size 128
    "long-fp16": LONG_FP16,  # ... few (batch, head) pairs, long sequences, fp16
    "long-bf16": LONG_BF16,  # ... the same in bf16: the segmented state stage
    "fast-bf16-q128": FAST_BF16_Q128,  # ... bf16 at chunk size 128
    "fast-fp16-cb": FAST_FP16_CB,  # ... fp16 at chunk size 256
    "fused-multi-tile": SSDConfig(fused=True, state_tiles=(32, 64)),  # several state tiles per (b, h)
    "cb-hb2-tm-ne-tk-factored": SSDConfig(scan_cb=True, scan_heads=2, scan_tiles=(32, 16, 32),
                                          scan_factored=True),
    "cb-hb4-lat+fused": SSDConfig(scan_cb=True, scan_heads=4, scan_latency=3, fused=True),
    "cb-chunk-hb2-factored": SSDConfig(scan_cb=True, scan_chunk=True, scan_heads=2, scan_factored=True),
    "cb-chunk-tm-ne-tk": SSDConfig(scan_cb=True, scan_chunk=True, scan_tiles=(32, 16, 32)),
    "cb-bf16-hb2-factored": SSDConfig(scan_cb=True, scan_cb_bf16=True, scan_heads=2, scan_factored=True),
    "cb-bf16-chunk-tm-ne-tk+fused": SSDConfig(scan_cb=True, scan_cb_bf16=True, scan_chunk=True,
                                              scan_tiles=(32, 16, 32), fused=True),
    # the segmented state stage: 5 chunks in segments of 2, 2, 1 (3 segments) and 3, 2 (2 segments)
    # two and four heads per fused block (one state tile per head), sharing each B tile
    "fused-heads-2": SSDConfig(fused=True, state_tiles=(64, 128), state_heads=2),
    "fused-heads-2-cb-chunk": SSDConfig(fused=True, state_tiles=(64, 128), state_heads=2, scan_cb=True,
                                        scan_chunk=True, scan_cb_bf16=True),
    # state_tiles' third entry (TK, chunk rows per mma step): 2 steps per 64-row chunk, alone and by segments
    "fused-tk-32": SSDConfig(fused=True, state_tiles=(64, 128, 32)),
    "segments-3-tk16": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=3,
                                 state_tiles=(64, 128, 16)),
    "segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=3),
    # the whole-chunk scan unrolled for full chunks (the ragged last chunk keeps the loops)
    "cb-chunk-unroll": SSDConfig(scan_cb=True, scan_chunk=True, scan_unroll=True, scan_cb_bf16=True),
    "cb-chunk-unroll-hb2-tm-ne-tk+segments-2": SSDConfig(fused=True, scan_cb=True, scan_chunk=True,
                                                         scan_unroll=True, scan_heads=2,
                                                         scan_tiles=(32, 16, 32), segments=2),
    # a loop over the head blocks of a chunk in each scan block; the factored decay in x's dtype (attempt 20)
    "cb-chunk-head-loop-2+factored16": SSDConfig(scan_cb=True, scan_chunk=True, scan_head_loop=2,
                                                 scan_factored=2, scan_cb_bf16=True),
    # the key-log2 form (attempt 23): kd = dA_cs·log2(e) - log2(dt) from key_log2_kernel (or, state_key_log2,
    # from the fused stage), every key tile takes P = C Bᵀ ∘ exp2(a_m - kd_k); with TM != TK and HB 2,
    # unrolled, by segments, in a head loop, unfused
    "key-log2": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3, scan_cb_bf16=True),
    "key-log2-hb2-tm-ne-tk-unroll+segments-2": SSDConfig(fused=True, scan_cb=True, scan_chunk=True,
                                                        scan_factored=3, scan_unroll=True, scan_heads=2,
                                                        scan_tiles=(32, 16, 32), segments=2),
    "key-log2-head-loop-2+multi-tile": SSDConfig(fused=True, state_tiles=(32, 64), scan_cb=True,
                                                 scan_chunk=True, scan_factored=3, scan_head_loop=2,
                                                 state_key_log2=True),
    "key-log2-unfused": SSDConfig(scan_cb=True, scan_chunk=True, scan_factored=3),
    "key-log2-state+segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3,
                                           segments=3, state_key_log2=True),
    # the state stages' FORM (attempt 24): dt behind a layout anchor (2), the mma accumulating into the
    # decayed state (4), with kd stored by the stage; fused with several state tiles, and by segments
    "state-form-2-kd": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3, state_form=2,
                                 state_key_log2=True),
    "state-form-4+multi-tile": SSDConfig(fused=True, state_tiles=(32, 64, 32), state_form=4),
    "state-form-6-kd+segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3,
                                            segments=3, state_form=6, state_key_log2=True),
    # the next chunk's dt loaded one chunk ahead (STATE_DT_AHEAD, attempt 25), fused and by segments
    "state-form-14-kd": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3, state_form=14,
                                  state_key_log2=True, state_tiles=(64, 128, 32)),
    "state-form-8+segments-3+multi-tile": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=3,
                                                    state_form=8, state_tiles=(32, 64)),
    # ... and dt as a box of 16 neighbouring heads (STATE_DT_BOX; here h = 4: the box runs past the heads)
    "state-form-22-kd": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3, state_form=22,
                                  state_key_log2=True),
    "state-form-30+segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=3,
                                          state_form=30),
    # row groups (attempt 25): the whole-chunk scan key-major inside groups of 2 or 4 row tiles (each x tile
    # loaded once per group); 32 x 32 tiles give 2 row tiles per 64-row chunk, 16 x 16 give 4
    "row-group-2+segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3,
                                        scan_heads=1, scan_tiles=(32, 32, 32), scan_row_group=2, segments=3,
                                        state_form=6, state_key_log2=True, scan_cb_bf16=True),
    "row-group-4-kd-kernel": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3,
                                       scan_heads=1, scan_tiles=(16, 16, 32), scan_row_group=4),
    # C Bᵀ launched before the state stage (attempt 25; on the GPU on a side stream)
    "cb-early+segments-2": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=3, segments=2,
                                     state_key_log2=True, scan_cb_early=True, scan_cb_bf16=True),
    "cb-early-unfused": SSDConfig(scan_cb=True, scan_cb_early=True),
    "cb-chunk-head-loop-2-hb2-unroll+segments-3": SSDConfig(fused=True, scan_cb=True, scan_chunk=True,
                                                            scan_head_loop=2, scan_heads=2, scan_unroll=True,
                                                            segments=3),
    "segments-2-hb2-tm-ne-tk": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=2, scan_heads=2,
                                         scan_tiles=(32, 16, 32), scan_hints=(3, None)),
    # the segmented stage's entering states fixed up in place (attempt 27): the scan adds no carry
    "segments-3-fixup": SSDConfig(**(vars(LONG_BF16) | dict(segments=3, segment_fixup=True))),
    "segments-per-chunk-multi-tile": SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=64,
                                               state_tiles=(16, 32), scan_cb_bf16=True),
}


def _f64(inputs):
    return {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def check_inputs(shape, dtype, seed, device, dt_limit=None, negative_dt=False) -> dict:
    """The keyword arguments of a checked call: every optional input (D, z, dt_bias, initial states)."""
    inputs = make_inputs(shape, seed=seed, dtype=dtype, device=device, z=True, dt_bias=not negative_dt,
                         initial_states=True)
    if negative_dt:  # dt in [-0.2, 0.3): dA is not monotone inside a chunk, the factored decay would be wrong
        gen = torch.Generator().manual_seed(seed)
        inputs["dt"] = (torch.rand(inputs["dt"].shape, generator=gen) * 0.5 - 0.2).to(device)
    if dt_limit is not None:
        inputs["dt_limit"] = dt_limit
    return inputs


def _check(shape, dtype, cfg, seed, device, backend, dt_limit=None, negative_dt=False):
    inputs = check_inputs(shape, dtype, seed, device, dt_limit, negative_dt)
    y, final = ssd_forward(**inputs, chunk_size=shape.chunk_size, return_final_states=True, backend=backend,
                           _poison=True, _config=cfg)
    y_ref, final_ref = ref.ssd_chunked(**_f64(inputs), chunk_size=shape.chunk_size, return_final_states=True)
    e_y, e_f = relative_error(y, y_ref), relative_error(final, final_ref)
    assert e_y < TOL[dtype] and e_f < TOL[dtype], (e_y, e_f)
    return y, final


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_config_variant_matches_reference_cpu(name, dtype):
    # b 2, l 300 (ragged: 4 full chunks of 64 and 44 rows), h 4, p 48, g 2, n 80
    shape = SSDShape(2, 300, 4, 48, 2, 80, 64, "ragged")
    for seed in (0, 1):
        _check(shape, dtype, VARIANTS[name], seed, "cpu", "cpu")


def test_fused_two_steps_per_chunk_cpu():
    # Q 256 with 128 rows per mma step (state_tiles' TK; 2 steps per chunk); the last chunk (88 rows) 1 step
    shape = SSDShape(1, 600, 2, 32, 1, 48, 256, "ragged")
    _check(shape, torch.bfloat16, SSDConfig(fused=True, state_tiles=(64, 128, 128)), 5, "cpu", "cpu")


def test_fused_one_step_per_chunk_cpu():
    # TK = Q = 256 (the 16-bit default; here set by state_tiles): one mma step per chunk, the ragged last too
    shape = SSDShape(1, 600, 2, 32, 1, 48, 256, "ragged")
    _check(shape, torch.bfloat16, GPU_VARIANTS["fused-tk-256"], 6, "cpu", "cpu")


def test_fused_gives_the_unfused_results_cpu():
    shape = SSDShape(1, 200, 6, 32, 3, 24, 32, "ragged")
    inputs = make_inputs(shape, seed=4, dtype=torch.float32, initial_states=True, dt_bias=True)
    a = ssd_forward(**inputs, chunk_size=32, return_final_states=True, backend="cpu", _config=DEFAULT)
    b = ssd_forward(**inputs, chunk_size=32, return_final_states=True, backend="cpu",
                    _config=SSDConfig(fused=True))
    for u, v in zip(a, b):
        assert relative_error(u, v) < 1e-6


def test_factored_decay_is_not_used_when_dt_can_be_negative_cpu():
    # with dt_limit's lower bound < 0 some dt are negative: ssd_forward must take the exact path, so the
    # result still matches the reference (forcing the factored path on these inputs: rel error ~0.2)
    shape = SSDShape(1, 150, 4, 32, 2, 40, 64, "ragged")
    _check(shape, torch.float32, SSDConfig(scan_factored=True), 3, "cpu", "cpu",
           dt_limit=(-float("inf"), float("inf")), negative_dt=True)
    # the key-log2 form too (log2 of a negative dt is NaN): the state stage stores dt, the scan is exact
    _check(shape, torch.float32, VARIANTS["key-log2"], 3, "cpu", "cpu",
           dt_limit=(-float("inf"), float("inf")), negative_dt=True)
    # ... and the configs whose state stage stores kd (attempt 24): it stores dt then, its forms stay exact
    for name in ("fast-16bit-cb", "state-form-6-kd+segments-3", "row-group-2+segments-3"):
        _check(shape, torch.float32, VARIANTS[name], 3, "cpu", "cpu",
               dt_limit=(-float("inf"), float("inf")), negative_dt=True)


@pytest.mark.parametrize("factored", [1, 3], ids=["factored", "key-log2"])
def test_factored_decays_under_strong_decay_cpu(factored):
    # A 200x Mamba-2's range: dt·A reaches -30 per step, so decays across a key tile or a row tile underflow
    # float32 (and are flushed to zero); the factors must never overflow, and what underflows must be what
    # the exact decay would make negligible
    shape = SSDShape(1, 200, 4, 32, 2, 40, 64, "ragged")
    inputs = make_inputs(shape, seed=7, dtype=torch.float32, z=True, initial_states=True)
    inputs["A"] = inputs["A"] * 200
    cfg = SSDConfig(fused=True, scan_cb=True, scan_chunk=True, scan_factored=factored,
                    scan_tiles=(16, 16, 32))
    y = ssd_forward(**inputs, chunk_size=64, backend="cpu", _poison=True, _config=cfg)
    y_ref = ref.ssd_chunked(**_f64(inputs), chunk_size=64)
    assert torch.isfinite(y).all()
    assert relative_error(y, y_ref) < TOL[torch.float32]


def test_ssd_stages_follow_the_config_cpu():
    shape = SSDShape(1, 130, 4, 32, 2, 40, 64, "ragged")
    inp = make_inputs(shape, seed=2, dtype=torch.float32, D=False)
    y = ssd_forward(**inp, chunk_size=64, backend="cpu")
    three = ssd_stages(**inp, chunk_size=64, backend="cpu", config=DEFAULT)
    fused = ssd_stages(**inp, chunk_size=64, backend="cpu", config=SSDConfig(fused=True))
    assert [k for k in three if k not in ("chain", "meta")] == ["chunk_state", "state_passing", "chunk_scan"]
    assert [k for k in fused if k not in ("chain", "meta")] == ["chunk_state_passing", "chunk_scan"]
    for stages in (three, fused):
        assert relative_error(stages["chain"](), y) < 1e-6
        assert relative_error(stages["chunk_scan"](), y) < 1e-6


def test_bad_row_groups_are_rejected_cpu():
    with pytest.raises(ValueError, match="scan_row_group"):
        SSDConfig(scan_row_group=2)  # needs the whole-chunk scan in the key-log2 form
    with pytest.raises(ValueError, match="scan_row_group"):
        SSDConfig(scan_cb=True, scan_chunk=True, scan_factored=3, scan_heads=1, scan_row_group=3)
    with pytest.raises(ValueError, match="scan_row_group"):
        SSDConfig(scan_cb=True, scan_chunk=True, scan_factored=3, scan_heads=2, scan_row_group=2)
    # what only the launch knows: the tiles and the chunk size (a 64-row bf16 chunk has one 64-row tile;
    # 32-row keys under 64-row rows)
    shape = SSDShape(1, 150, 2, 32, 1, 40, 64, "ragged")
    inputs = make_inputs(shape, seed=1, dtype=torch.bfloat16)
    base = dict(scan_cb=True, scan_chunk=True, scan_factored=3, scan_heads=1, scan_row_group=2)
    for tiles in (None, (64, 32, 32)):
        with pytest.raises(ValueError, match="row tiles per chunk"):
            ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=SSDConfig(**base, scan_tiles=tiles))


def test_cb_early_gives_the_same_results_cpu():
    # on the CPU executor scan_cb_early only moves the C Bᵀ launch before the state stage: same bits
    shape = SSDShape(2, 150, 4, 32, 2, 40, 64, "ragged")
    inputs = make_inputs(shape, seed=5, dtype=torch.bfloat16, z=True, initial_states=True)
    for cfg in (VARIANTS["key-log2"], FAST_16BIT_CB):
        early = SSDConfig(**(vars(cfg) | dict(scan_cb_early=True)))
        a = ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=cfg, return_final_states=True)
        b = ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=early, return_final_states=True)
        assert all(torch.equal(u, v) for u, v in zip(a, b))
    with pytest.raises(ValueError, match="scan_cb_early"):
        SSDConfig(scan_cb_early=True)


@pytest.mark.parametrize("base", ["fast-16bit-cb", "long-bf16", "key-log2-unfused"])
def test_batch_parts_give_the_same_results_cpu(base):
    # batch_streams cuts the batch into parts (on the GPU each on its own stream); every kernel treats batch
    # elements independently, so the results are the same bits, also with more parts than batch elements
    shape = SSDShape(3, 150, 4, 32, 2, 40, 64, "ragged")
    inputs = make_inputs(shape, seed=5, dtype=torch.bfloat16, z=True, initial_states=True, dt_bias=True)
    cfg = VARIANTS[base]
    a = ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=cfg, return_final_states=True)
    for k, stagger in ((2, False), (3, True), (5, False)):
        parts = SSDConfig(**(vars(cfg) | dict(batch_streams=k, batch_stagger=stagger)))
        b = ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=parts, return_final_states=True,
                        _poison=True)
        assert all(torch.equal(u, v) for u, v in zip(a, b)), (k, stagger)


def test_bad_batch_streams_are_rejected():
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="batch_streams"):
            SSDConfig(batch_streams=bad)
    with pytest.raises(ValueError, match="batch_stagger"):
        SSDConfig(batch_stagger=True)


def test_bad_tiles_are_rejected():
    with pytest.raises(ValueError, match="TK"):
        chunk_scan_tiles(256, 64, 128, 4, torch.bfloat16, None, (64, 128, 64))
    from mamba2_tutorial.kernels.chunk_state import chunk_state_passing_tiles

    assert chunk_state_passing_tiles(256, 64, 128, torch.bfloat16, (64, 128, 256)) == (256, 64, 128)
    assert chunk_state_passing_tiles(256, 64, 128, torch.bfloat16) == (256, 64, 128)  # the 16-bit default
    assert chunk_state_passing_tiles(512, 64, 128, torch.bfloat16, (64, 128))[0] == 256
    for tk in (48, 8):  # not a power of two, too small
        with pytest.raises(ValueError, match=r"state_tiles\[2\]"):
            chunk_state_passing_tiles(256, 64, 128, torch.bfloat16, (64, 128, tk))
    # past the chunk: capped at it (configs.STATE_OCC2's 128 rows per step at chunk size 64)
    assert chunk_state_passing_tiles(256, 64, 128, torch.bfloat16, (64, 128, 512))[0] == 256
    assert chunk_state_passing_tiles(64, 64, 128, torch.bfloat16, (64, 128, 128))[0] == 64


def test_ssd_config_picks_the_measured_config_per_dtype_and_size():
    bf16, fp16 = torch.bfloat16, torch.float16
    assert ssd_config(8, 4096, 80, 64, 1, 128, 256, bf16) == FAST_16BIT_CB
    assert ssd_config(8, 4096, 80, 64, 1, 128, 256, fp16) == FAST_FP16_CB
    assert ssd_config(1, 32768, 80, 64, 1, 128, 256, bf16) == LONG_BF16  # 80 (b, h) pairs < 132 SMs
    assert ssd_config(1, 32768, 80, 64, 1, 128, 256, fp16) == LONG_FP16
    assert ssd_config(2, 8192, 128, 64, 8, 128, 128, bf16) == FAST_BF16_Q128
    assert ssd_config(2, 8192, 128, 64, 8, 128, 128, fp16) == FAST_16BIT_Q128
    for dtype in (bf16, fp16):
        assert ssd_config(4, 2048, 24, 64, 1, 128, 256, dtype) == FAST_16BIT  # small: two launches
        assert ssd_config(1, 256, 8, 64, 1, 128, 256, dtype) == FAST_16BIT
        assert ssd_config(1, 513, 8, 64, 1, 128, 128, dtype) == FAST_16BIT_Q128
        long_ = ssd_config(1, 32768, 80, 64, 1, 128, 256, dtype)
        assert long_.scan_chunk and long_.scan_cb_bf16 == (dtype == bf16)
        assert long_.fused == (dtype == bf16) and long_.segments == (8 if dtype == bf16 else 1)
        long_q128 = ssd_config(1, 32768, 80, 64, 1, 128, 128, dtype)
        assert long_q128.fused == long_q128.scan_chunk == (dtype == bf16) and long_q128.state_hints[0] == 2
        # enough blocks already, or too few chunks to cut: no segments
        assert ssd_config(8, 32768, 80, 64, 1, 128, 256, dtype).segments == 1
        assert ssd_config(1, 4096, 80, 64, 1, 128, 256, dtype).segments == 1
        # several state tiles per (batch, head): unfused (the fused kernel, a block per tile, ran 2-4x slower)
        for p, n in ((64, 256), (128, 128), (96, 64)):
            for shape in ((8, 4096, 80, p, 1, n, 256), (2, 8192, 128, p, 8, n, 128),
                          (1, 513, 4, p, 1, n, 128)):
                assert not ssd_config(*shape, dtype).fused, shape
    # the bf16 C Bᵀ only for bf16 inputs (fp16 keeps its 3 extra mantissa bits)
    for shape in ((8, 4096, 80, 64, 1, 128, 256), (1, 32768, 80, 64, 1, 128, 256),
                  (8, 4096, 80, 64, 1, 256, 256)):
        assert not ssd_config(*shape, fp16).scan_cb_bf16 and ssd_config(*shape, bf16).scan_cb_bf16
    assert ssd_config(8, 4096, 80, 64, 1, 128, 256, torch.float32) == DEFAULT
    assert FAST_16BIT.fused and FAST_16BIT.scan_shared and FAST_16BIT != DEFAULT
    assert FAST_16BIT_CB.fused and FAST_16BIT_CB.scan_chunk and not LONG_FP16.fused
    assert LONG_BF16.segments == 8 and LONG_BF16.scan_hints[0] == 3  # the carry scan fits occupancy 3, not 4
    # attempt 24: the bf16 chunk scan's state stage stores kd; at chunk size 256 it runs two blocks per SM
    # with 128 rows per mma step and form 6 (fused and segmented), at 128 form 2; fp16 keeps the old stage
    from mamba2_tutorial.kernels.chunk_state import STATE_ACC, STATE_DT_ONCE

    for cfg in (FAST_16BIT_CB, LONG_BF16, ssd_config(8, 4096, 80, 64, 1, 128, 512, bf16)):
        assert cfg.state_key_log2 and cfg.scan_factored == 3 and cfg.state_hints[0] == 2
        assert cfg.state_tiles == (64, 128, 128) and cfg.state_form == STATE_DT_ONCE | STATE_ACC
    assert FAST_BF16_Q128.state_key_log2 and FAST_BF16_Q128.state_form == STATE_DT_ONCE
    assert FAST_BF16_Q128.scan_factored == 3 and FAST_BF16_Q128.state_hints[0] == 2
    long_q64 = ssd_config(1, 32768, 80, 64, 1, 128, 64, bf16)  # segmented below chunk size 256: not measured
    for cfg in (FAST_FP16_CB, LONG_FP16, FAST_16BIT_Q128, FAST_16BIT, long_q64):
        assert not cfg.state_key_log2 and cfg.state_form == 0, cfg


def test_segments_for_fills_the_gpu_without_tiny_segments():
    from mamba2_tutorial.kernels.configs import SMS, WAVES, segments_for

    assert segments_for(1, 80, 128) == 8 and segments_for(1, 24, 128) == 32
    assert segments_for(8, 80, 16) == 1 and segments_for(1, 80, 7) == 1
    for b, h, nchunks in ((1, 80, 128), (1, 24, 1024), (2, 48, 64), (1, 8, 40), (1, 1, 4096)):
        k = segments_for(b, h, nchunks)
        assert k & (k - 1) == 0 and nchunks // k >= 4, (b, h, nchunks, k)
        assert b * h * k >= WAVES * SMS or nchunks // (2 * k) < 4, (b, h, nchunks, k)
    assert FAST_BF16_Q128.state_hints[0] == 2 and FAST_BF16_Q128.scan_chunk
    # the unrolled scan only at chunk size <= 128, where it was measured faster (attempt 19)
    assert FAST_BF16_Q128.scan_unroll and FAST_BF16_Q128.scan_hints[0] == 3
    assert not FAST_16BIT_CB.scan_unroll and not LONG_BF16.scan_unroll
    assert not ssd_config(8, 4096, 80, 64, 1, 128, 256, torch.bfloat16).scan_unroll
    with pytest.raises(ValueError, match="scan_unroll"):
        SSDConfig(scan_unroll=True)  # needs the whole-chunk scan


# kept to a few cases (each compiles its own kernels on the GPU, ~5 s apiece): together they run the fused
# kernel, the factored decay, the 2-D per-head chunk_scan, FAST_16BIT on float32 inputs, and the configs
# ssd_config picks for large bf16 problems on a small ragged shape with every option (the other GPU tests'
# small shapes get FAST_16BIT); the CPU tests cover the rest
GPU_CASES = [("fused+factored+sp-tiles", torch.bfloat16, 256), ("heads-2d", torch.bfloat16, 128),
             ("fast-16bit", torch.float32, 128),
             # the configs ssd_forward picks for large problems, on a ragged shape with every option
             ("fast-16bit-cb", torch.bfloat16, 256), ("long-fp16", torch.float16, 256),
             ("long-bf16", torch.bfloat16, 256), ("long-bf16", torch.bfloat16, 64),
             ("fast-16bit-q128", torch.bfloat16, 128), ("fast-bf16-q128", torch.bfloat16, 128),
             ("fast-fp16-cb", torch.float16, 256),
             # several fused state tiles per (batch, head): these launches hung on the H200 while a store
             # of dt_out and dA_cumsum was under `if pid_pn == 0` (docs/perf-notes.md, attempt 15)
             ("fused-multi-tile", torch.bfloat16, 256),
             # the segmented state stage (kernels/segments.py)
             ("segments-3", torch.bfloat16, 128), ("segments-2-hb2-tm-ne-tk", torch.bfloat16, 256),
             ("segments-3", torch.float32, 64), ("segments-per-chunk-multi-tile", torch.bfloat16, 128),
             ("fused-heads-2", torch.bfloat16, 256), ("fused-tk-256", torch.bfloat16, 256),
             ("cb-chunk-unroll", torch.bfloat16, 256), ("cb-chunk-unroll-hb2-tm-ne-tk+segments-2",
                                                         torch.bfloat16, 128),
             # the key-log2 form (attempt 23): kd by its own kernel, and by the (segmented) state stage
             ("key-log2", torch.bfloat16, 256),
             ("key-log2-hb2-tm-ne-tk-unroll+segments-2", torch.bfloat16, 128),
             ("key-log2-state+segments-3", torch.bfloat16, 256),
             # the state stages' FORM (attempt 24)
             ("state-form-2-kd", torch.bfloat16, 256), ("state-form-6-kd+segments-3", torch.bfloat16, 128),
             ("state-form-4+multi-tile", torch.bfloat16, 256),
             # row groups (attempt 25): at chunk size 256 the default 64 x 64 tiles, 4 row tiles per chunk
             ("row-group-2-occ2", torch.bfloat16, 256), ("row-group-4-nww8", torch.bfloat16, 256),
             ("row-group-2+segments-3", torch.bfloat16, 128),
             # dt one chunk ahead (attempt 25)
             ("state-form-14-kd", torch.bfloat16, 256),
             ("state-form-8+segments-3+multi-tile", torch.bfloat16, 128),
             ("state-form-22-kd", torch.bfloat16, 256), ("state-form-30+segments-3", torch.float32, 128),
             # C Bᵀ on a side stream (attempt 25)
             ("cb-early-b8", torch.bfloat16, 256), ("cb-early+segments-2", torch.bfloat16, 128),
             # the batch in parts on their own streams (attempt 25)
             ("batch-2-b8", torch.bfloat16, 256), ("batch-2-stagger-cb-early", torch.bfloat16, 256)]


# GPU-only variants: chunk-size-specific settings the CPU tests (chunk size 64) cannot take
GPU_VARIANTS = {
    "fused-tk-256": SSDConfig(fused=True, state_tiles=(64, 128, 256)),  # one mma step per chunk
    # the row-group scans of benchmarks/probe.py (sm_90 cubins: RG 2 at occupancy 2, 128 registers and a
    # 16-byte stack; RG 4 with 8 worker warps at occupancy 1, 168 registers, no stack)
    "row-group-2-occ2": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_row_group=2, scan_hints=(2, None)))),
    "row-group-4-nww8": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_row_group=4,
                                                                 scan_hints=(1, None, 8)))),
    "cb-early-b8": SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_cb_early=True))),
    "batch-2-b8": SSDConfig(**(vars(FAST_16BIT_CB) | dict(batch_streams=2))),
    "batch-2-stagger-cb-early": SSDConfig(**(vars(FAST_16BIT_CB) | dict(batch_streams=2, batch_stagger=True,
                                                                         scan_cb_early=True))),
}


def _same_bits(shape, cfg, base):
    """``cfg`` passes the reference check (every option, NaN-poisoned buffers) and gives ``base``'s results
    bit for bit, for two seeds; returns the last seed's inputs."""
    for seed in (0, 1):
        y, final = _check(shape, torch.bfloat16, cfg, seed, "cpu", "cpu")
        inputs = check_inputs(shape, torch.bfloat16, seed, "cpu")
        y1, final1 = ssd_forward(**inputs, chunk_size=shape.chunk_size, return_final_states=True,
                                 backend="cpu", _config=base)
        assert torch.equal(y, y1) and torch.equal(final, final1)
    return inputs


def _launches(inputs, cfg):
    """Every launch ``ssd_forward`` makes with this config (recorded, nothing runs)."""
    from mamba2_tutorial.cubin_cache import recording_launches

    with recording_launches() as seen:
        ssd_forward(**inputs, chunk_size=64, backend="cpu", _config=cfg)
    return seen


def _stage_launches(name, inputs, cfg, stages=False):
    """(occupancy, heads of the x view, grid) of each launch of kernel ``name`` that ``ssd_forward`` (or, with
    ``stages``, the benchmark's state stage timed alone: ``ssd_stages(...)["chunk_state_passing"]``) makes."""
    if stages:
        from mamba2_tutorial.cubin_cache import recording_launches

        with recording_launches() as seen:
            xs = {k: inputs[k] for k in ("x", "dt", "A", "B", "C")}
            ssd_stages(**xs, chunk_size=64, backend="cpu", config=cfg)["chunk_state_passing"]()
    else:
        seen = _launches(inputs, cfg)
    return [(launch.occupancy, launch.shapes[0][2], launch.grid) for launch in seen if launch.name == name]


def test_state_tail_splits_the_last_wave_and_changes_no_bit_cpu():
    # SSDConfig.state_tail: the heads of the fused stage's last, partial wave launched apart with smaller
    # tiles; b 2, h 12, g 3 (4 heads per group), slots 5: 24 blocks, 20 fill whole waves -> the split at head
    # 10, rounded down to 8 (16 bytes of bf16 dt, and whole groups)
    shape = SSDShape(2, 300, 12, 48, 3, 80, 64, "ragged")
    tail = SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_tail=((32, 64), (3, None), 5))))
    inputs = _same_bits(shape, tail, FAST_16BIT_CB)
    # heads 0-7 as configured (one 64 x 128 tile per head), heads 8-11 with 32 x 64 tiles (2 x 2 per head)
    expected = [(2, 8, (1, 2, 8)), (3, 4, (4, 2, 4))]
    assert _stage_launches("chunk_state_passing_kernel", inputs, tail) == expected
    # the benchmark's per-stage timing launches the stage the same way
    assert _stage_launches("chunk_state_passing_kernel", inputs, tail, stages=True)[-2:] == expected


def test_state_tail_with_segments_changes_no_bit_cpu():
    # the segmented stage (LONG_BF16's, 3 segments here) with its last wave's heads apart: b 2, h 12, g 3,
    # 3 segments of 2 chunks (300 rows, chunk size 64 -> 5 chunks); 72 blocks, slots 20: 60 in whole waves,
    # 10 heads -> 8 (16 bytes of bf16 dt, whole groups)
    shape = SSDShape(2, 300, 12, 48, 3, 80, 64, "ragged")
    base = SSDConfig(**(vars(LONG_BF16) | dict(segments=3, state_tiles=(64, 128), state_form=0,
                                                state_key_log2=False)))
    tail = SSDConfig(**(vars(base) | dict(state_tail=((32, 64), (3, None), 20))))
    inputs = _same_bits(shape, tail, base)
    launched = _stage_launches("chunk_state_segments_kernel", inputs, tail)
    occupancy = LONG_BF16.state_hints[0]
    assert launched == [(occupancy, 8, (1, 2 * 3, 8)), (3, 4, (4, 2 * 3, 4))]


def test_state_tail_segments_fix_the_last_wave_up_cpu():
    # SSDConfig.state_tail_segments (attempt 27): the last wave's heads (8-11 here, as above) walk their
    # chains in 2 segments side by side (5 chunks: 3 + 2), then segment_fixup_kernel adds segment 0's carry
    # to the entering states of segment 1 in place. Not bit for bit (the segment-local state is rounded to
    # bf16 before the carry is added): the reference check, then the other heads and every dt_out and
    # dA_cumsum bit for bit
    from mamba2_tutorial.ssd import _fused_with_tail

    shape = SSDShape(2, 300, 12, 48, 3, 80, 64, "ragged")
    whole = SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_tail=((64, 128), (2, None), 5))))
    split = SSDConfig(**(vars(whole) | dict(state_tail_segments=2)))
    for seed in (0, 1):
        _check(shape, torch.bfloat16, split, seed, "cpu", "cpu")
    inputs = check_inputs(shape, torch.bfloat16, 1, "cpu")
    for init in (None, inputs["initial_states"]):
        args = (inputs["x"], inputs["dt"], inputs["A"], inputs["B"], 64, inputs["dt_bias"], True,
                (0.0, float("inf")), init, "cpu", True)
        dt_out, dA_cs, states, final = _fused_with_tail(*args, split, True)
        dt_1, dA_1, states_1, final_1 = _fused_with_tail(*args, whole, True)
        assert torch.equal(dt_out, dt_1) and torch.equal(dA_cs, dA_1)
        assert torch.equal(states[:, :, :8], states_1[:, :, :8]) and torch.equal(final[:, :8], final_1[:, :8])
        # without initial states segment 0's local states are the true ones: untouched by the fix-up
        assert torch.equal(states[:, :3], states_1[:, :3]) == (init is None)
        assert 0 < relative_error(states, states_1) < 2e-3 and relative_error(final, final_1) < 1e-6
    # heads 0-7 fused as configured; heads 8-11 by segments (grid: 1 state tile, b · 2 segments, 4 heads),
    # then the fix-up: 2 x 2 state tiles of 32 x 64, b · (5 chunks + the final state), 4 heads (initial
    # states: segment 0's chunks are fixed too)
    assert _stage_launches("chunk_state_passing_kernel", inputs, split) == [(2, 8, (1, 2, 8))]
    assert _stage_launches("chunk_state_segments_kernel", inputs, split) == [(2, 4, (1, 2 * 2, 4))]
    assert [grid for _, _, grid in _stage_launches("segment_fixup_kernel", inputs, split)] == [(4, 2 * 6, 4)]
    # with attempt 26's smaller tiles for the tail as well (2 x 2 tiles of 32 x 64 per head, by segments)
    tiles = SSDConfig(**(vars(split) | dict(state_tail=((32, 64, 32), (4, None), 5))))
    _check(shape, torch.bfloat16, tiles, 0, "cpu", "cpu")
    assert _stage_launches("chunk_state_segments_kernel", inputs, tiles) == [(4, 4, (4, 2 * 2, 4))]


def test_segment_fixup_gives_the_true_entering_states_cpu():
    # the segmented stage with the fix-up in place of state passing over the segments: its entering states
    # and final states are the reference's, float32, with and without initial states; 8 chunks in segments
    # of 3, 3, 2 (a ragged last chunk)
    from mamba2_tutorial.kernels.segments import launch_chunk_state_segments

    shape = SSDShape(2, 7 * 32 + 9, 3, 16, 1, 24, 32, "ragged")
    inp = make_inputs(shape, seed=4, dtype=torch.float32, dt_bias=True, initial_states=True)
    d = _f64(inp)
    dt_ref, dA_ref = ref.chunk_cumsum(d["dt"], d["A"], 32, dt_bias=d["dt_bias"], dt_softplus=True)
    states = ref.chunk_state(d["x"], d["B"], dt_ref, dA_ref)
    for init in (None, inp["initial_states"]):
        init_ref, final_ref = ref.state_passing(states, dA_ref, None if init is None else d["initial_states"])
        _, _, entering, final, carry = launch_chunk_state_segments(
            inp["x"], inp["dt"], inp["A"], inp["B"], 32, inp["dt_bias"], True, (0.0, float("inf")), init,
            "cpu", 3, poison=True, fixup=True)
        assert carry is None
        assert relative_error(entering, init_ref) < 1e-5 and relative_error(final, final_ref) < 1e-5
    with pytest.raises(ValueError, match="outs needs fixup"):
        launch_chunk_state_segments(inp["x"], inp["dt"], inp["A"], inp["B"], 32, None, False, (0.0, 1.0),
                                    None, "cpu", 3, outs=(None,) * 4)


def test_state_tail_segments_are_checked():
    tail = ((64, 64), (3, None))
    for bad in (0, 1.5, "2"):
        with pytest.raises(ValueError, match="state_tail_segments must be an int"):
            SSDConfig(fused=True, state_tail=tail, state_tail_segments=bad)
    with pytest.raises(ValueError, match="needs state_tail and segments=1"):
        SSDConfig(fused=True, state_tail_segments=2)
    with pytest.raises(ValueError, match="needs state_tail and segments=1"):
        SSDConfig(**(vars(LONG_BF16) | dict(state_tail=tail, state_tail_segments=2)))
    with pytest.raises(ValueError, match="segment_fixup needs the segmented state stage"):
        SSDConfig(**(vars(FAST_16BIT_CB) | dict(segment_fixup=True)))


def test_segment_fixup_leaves_the_scan_no_carry_cpu():
    # segment_fixup: the segmented stage ends with the fix-up instead of state passing over the segments, and
    # the scan is launched without the carry (HAS_CARRY off): the launches ssd_forward makes
    shape = SSDShape(2, 300, 12, 48, 3, 80, 64, "ragged")
    cfg = VARIANTS["segments-3-fixup"]
    inputs = check_inputs(shape, torch.bfloat16, 0, "cpu")
    names = [launch.name for launch in _launches(inputs, cfg)]
    assert names.count("segment_fixup_kernel") == 1 and "state_passing_kernel" not in names
    carry = SSDConfig(**(vars(cfg) | dict(segment_fixup=False)))
    carried = [launch.name for launch in _launches(inputs, carry)]
    assert "state_passing_kernel" in carried and "segment_fixup_kernel" not in carried


def test_scan_cb_hints_reach_the_cb_launch_cpu():
    # SSDConfig.scan_cb_hints: the C Bᵀ kernel's compiler hints, on the scan's C Bᵀ launch and on the early
    # one (scan_cb_early); hints change no result
    shape = SSDShape(2, 300, 4, 48, 2, 80, 64, "ragged")
    for early in (False, True):
        cfg = SSDConfig(**(vars(FAST_16BIT_CB) | dict(scan_cb_hints=(4, None), scan_cb_early=early)))
        inputs = _same_bits(shape, cfg, FAST_16BIT_CB)
        launched = _stage_launches("chunk_cb_kernel", inputs, cfg)
        assert [occupancy for occupancy, _heads, _grid in launched] == [4]
    with pytest.raises(ValueError, match="scan_cb_hints needs the C Bᵀ scans"):
        SSDConfig(scan_cb_hints=(2, None))


def test_tail_heads_finds_the_last_partial_wave():
    from mamba2_tutorial.ssd import tail_heads

    cpu = torch.device("cpu")
    cfg = SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_tail=((64, 64, 128), (3, None)))))
    # b8-l4096-h80 on an H200: 640 blocks, 264 slots (132 SMs x occupancy 2): 528 fill two waves, i.e. 66
    # heads; rounded down to 8 heads (16 bytes of bf16 dt)
    assert tail_heads(8, 80, 1, 1, cfg, cpu, 2) == 64
    assert tail_heads(8, 80, 1, 1, cfg, cpu, 4) == 64  # float32 dt: multiples of 4 heads
    assert tail_heads(8, 80, 8, 1, cfg, cpu, 4) == 60  # 8 groups of 10 heads: multiples of lcm(4, 10) = 20
    assert tail_heads(1, 80, 1, 1, cfg, cpu, 2) is None  # 80 blocks: less than one wave
    assert tail_heads(8, 66, 1, 1, cfg, cpu, 2) is None  # 528 blocks: exactly two waves
    slots = SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_tail=((64, 64), (3, None), 100))))
    assert tail_heads(8, 80, 1, 1, slots, cpu, 2) == 72  # 600 of 640 blocks in whole waves: 75 heads -> 72
    slots = SSDConfig(**(vars(FAST_16BIT_CB) | dict(state_tail=((64, 64), (3, None), 500))))
    assert tail_heads(8, 80, 1, 2, slots, cpu, 2) == 56  # two tiles per head: 1000 of 1280 -> 62 -> 56


def test_state_tail_rejects_what_it_cannot_split():
    for bad in (((64, 64),), ((64, 64), (3, None), 0), [(64, 64), (3, None)]):
        with pytest.raises(ValueError, match="state_tail"):
            SSDConfig(fused=True, state_tail=bad)
    with pytest.raises(ValueError, match="state_tail needs the fused"):
        SSDConfig(fused=False, state_tail=((64, 64), (3, None)))
    with pytest.raises(ValueError, match="state_tail needs the fused"):
        SSDConfig(fused=True, state_heads=2, state_tail=((64, 64), (3, None)))


def gpu_case(name: str, Q: int):
    """Shape and config of a GPU_CASES case: ragged, b 2, l 1000 + Q/2 + 3, h 8, p 64, g 2, n 128 (also what
    ``mamba2_tutorial.cubin_cache`` compiles ahead for them)."""
    shape = SSDShape(2, 1000 + Q // 2 + 3, 8, 64, 2, 128, Q, "ragged")
    return shape, VARIANTS.get(name) or GPU_VARIANTS[name]


TAIL_BASES = ("fast-16bit-cb", "long-bf16", "fast-16bit-cb-split")
#: the CUDA-graph test's shape and the configs it captures (one side stream; two more, with events)
GRAPH_SHAPE = SSDShape(2, 1000 + 131, 8, 64, 1, 128, 256, "ragged")
GRAPH_CONFIGS = ("cb-early-b8", "batch-2-stagger-cb-early")


def state_tail_case(base: str):
    """(shape, tail config, base config) of ``test_state_tail_gpu[base]``: b 2, h 24, 48 blocks per segment
    row; 20 slots: heads 0-15, then 16-23 apart, with two 64 x 64 tiles per head at occupancy 3 (attempt 26),
    fused or by segments; or (``-split``, attempt 27) the tail's chains in 2 segments with the shipped tiles,
    then fixed up."""
    cfg = {"long-bf16": LONG_BF16}.get(base, FAST_16BIT_CB)
    shape = SSDShape(2, 1000 + 131, 24, 64, 1, 128, 256, "ragged")
    if base.endswith("-split"):
        tail = SSDConfig(**(vars(cfg) | dict(state_tail=(cfg.state_tiles, cfg.state_hints, 20),
                                             state_tail_segments=2)))
    else:
        tail = SSDConfig(**(vars(cfg) | dict(state_tail=((64, 64, 128), (3, None), 20))))
    return shape, tail, cfg


def extra_gpu_calls() -> list[tuple[str, SSDShape, SSDConfig, dict]]:
    """The ``ssd_forward`` calls of the GPU tests below that are not ``GPU_CASES``: (test id, shape, config,
    inputs as make_inputs' keyword arguments), for ``mamba2_tutorial.cubin_cache`` to compile ahead."""
    every_option = dict(seed=0, dtype=torch.bfloat16, z=True, dt_bias=True, initial_states=True)
    calls = [(f"test_state_tail_gpu[{base}]", shape, c, every_option)
             for base in TAIL_BASES for shape, *cfgs in [state_tail_case(base)] for c in cfgs]
    graph = dict(seed=3, dtype=torch.bfloat16)
    return calls + [("test_side_streams_in_a_cuda_graph_gpu", GRAPH_SHAPE, c, graph)
                    for c in (FAST_16BIT_CB, *(GPU_VARIANTS[name] for name in GRAPH_CONFIGS))]


@pytest.mark.gpu
@pytest.mark.parametrize("base", TAIL_BASES)
def test_state_tail_gpu(base):
    # the state stage's last wave launched apart (state_tail_case): the same results as one launch
    shape, tail, cfg = state_tail_case(base)
    y, final = _check(shape, torch.bfloat16, tail, 0, "cuda", "gpu")
    inputs = check_inputs(shape, torch.bfloat16, 0, "cuda")
    y1, final1 = ssd_forward(**inputs, chunk_size=256, return_final_states=True, backend="gpu", _config=cfg)
    assert relative_error(final, final1) < 1e-5 and relative_error(y, y1) < 4e-3


@pytest.mark.gpu
def test_side_streams_in_a_cuda_graph_gpu():
    # the side streams of scan_cb_early and batch_streams must join a CUDA-graph capture (fork and join on
    # the capturing stream) and give the same results as the one-stream launches, replay after replay
    from mamba2_tutorial.timing import capture_graph

    inputs = make_inputs(GRAPH_SHAPE, seed=3, dtype=torch.bfloat16, device="cuda")
    one = ssd_forward(**inputs, chunk_size=256, backend="gpu", _config=FAST_16BIT_CB)
    for name in GRAPH_CONFIGS:
        cfg = GPU_VARIANTS[name]
        assert torch.equal(ssd_forward(**inputs, chunk_size=256, backend="gpu", _config=cfg), one), name
        box = {}

        def call(cfg=cfg, box=box):
            box["y"] = ssd_forward(**inputs, chunk_size=256, backend="gpu", _config=cfg)

        replay = capture_graph(call)
        for _ in range(3):
            box["y"].fill_(float("nan"))
            replay()
            torch.cuda.synchronize()
            assert torch.equal(box["y"], one), name


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype,Q", GPU_CASES, ids=[f"{n}-{str(d)[6:]}-q{q}" for n, d, q in GPU_CASES])
def test_config_variant_matches_reference_gpu(name, dtype, Q):
    # every option (D, z, dt_bias, initial states)
    shape, cfg = gpu_case(name, Q)
    _check(shape, dtype, cfg, 0, "cuda", "gpu")


def test_heads_2d_with_per_channel_D_cpu():
    shape = SSDShape(2, 300, 4, 48, 2, 80, 64, "ragged")
    inp = make_inputs(shape, seed=7, dtype=torch.float32, z=True, dt_bias=True, initial_states=True)
    inp["D"] = inp["D"][:, None] * torch.linspace(0.5, 1.5, 48)  # D (h, p)
    y_ref = ref.ssd_chunked(**_f64(inp), chunk_size=64)
    y = ssd_forward(**inp, chunk_size=64, backend="cpu", _poison=True, _config=SSDConfig(scan_2d=True))
    assert relative_error(y, y_ref) < TOL[torch.float32]


def test_fp16_keeps_a_float32_cb_cpu():
    # FAST_FP16_CB (what ssd_config picks for large fp16 problems) stores C Bᵀ in float32: on fp16 inputs it
    # is more accurate than the bf16 C Bᵀ of the bf16 config (2.9e-4 against 4.1e-4 and 4.9e-4 here)
    shape = SSDShape(1, 300, 4, 48, 2, 80, 64, "ragged")
    for seed in (0, 1):
        inputs = make_inputs(shape, seed=seed, dtype=torch.float16, z=True, dt_bias=True, initial_states=True)
        y_ref = ref.ssd_chunked(**_f64(inputs), chunk_size=64)
        errs = [relative_error(ssd_forward(**inputs, chunk_size=64, backend="cpu", _poison=True, _config=c),
                               y_ref) for c in (FAST_FP16_CB, FAST_16BIT_CB)]
        assert errs[0] < 3.5e-4 and errs[0] < 0.8 * errs[1], errs


def test_segment_layout_covers_every_chunk_once():
    from mamba2_tutorial.kernels.segments import segment_layout

    for nchunks in (1, 2, 5, 7, 16, 128, 129):
        for segments in (1, 2, 3, 8, 200):
            cps, nseg = segment_layout(nchunks, segments)
            assert nseg <= min(segments, nchunks), (nchunks, segments)
            assert cps * nseg >= nchunks > cps * (nseg - 1), (nchunks, segments)  # no empty segment
    with pytest.raises(ValueError, match="segments"):
        segment_layout(4, 0)


def test_segmented_stage_rebuilds_the_entering_states_cpu():
    # the segment-local entering states plus the decayed carry are the reference's entering states; every
    # chunk, ragged last chunk, with initial states (they enter through the carry of segment 0)
    from mamba2_tutorial.kernels.segments import launch_chunk_state_segments

    shape = SSDShape(2, 7 * 32 + 9, 3, 16, 1, 24, 32, "ragged")  # 8 chunks in segments of 3, 3, 2
    inp = make_inputs(shape, seed=3, dtype=torch.float32, dt_bias=True, initial_states=True)
    dt_out, dA_cs, local, final, carry = launch_chunk_state_segments(
        inp["x"], inp["dt"], inp["A"], inp["B"], 32, inp["dt_bias"], True, (0.0, float("inf")),
        inp["initial_states"], "cpu", 3, poison=True)
    assert carry.chunks_per_segment == 3 and carry.carry.shape == (2, 3, 3, 16, 24)
    assert carry.carry.dtype == local.dtype == torch.float32
    d = _f64(inp)
    dt_ref, dA_ref = ref.chunk_cumsum(d["dt"], d["A"], 32, dt_bias=d["dt_bias"], dt_softplus=True)
    states = ref.chunk_state(d["x"], d["B"], dt_ref, dA_ref)
    init_ref, final_ref = ref.state_passing(states, dA_ref, d["initial_states"])
    seg = torch.arange(8) // 3
    rebuilt = (local.double() + carry.seg_prefix.double().exp().permute(0, 2, 1)[..., None, None]
               * carry.carry.double()[:, seg])
    assert relative_error(rebuilt, init_ref) < 1e-5
    assert relative_error(final, final_ref) < 1e-5
    assert relative_error(dA_cs, dA_ref) < 1e-6


def test_clusters_are_rejected():
    # num_ctas 2 gave wrong results (fused stage) and a misaligned address (chunk scan) on the H200
    for field in ("state_hints", "passing_hints", "scan_hints"):
        with pytest.raises(ValueError, match=f"{field}: num_ctas = 2"):
            SSDConfig(**{field: (None, 2)})
    assert SSDConfig(scan_hints=(3, 1)).scan_hints == (3, 1)


def test_four_heads_per_fused_block_cpu():
    shape = SSDShape(1, 250, 8, 32, 2, 40, 64, "ragged")  # 4 heads per group
    for seed in (0, 1):
        _check(shape, torch.bfloat16, SSDConfig(fused=True, state_heads=4), seed, "cpu", "cpu")


def test_state_heads_need_one_state_tile_and_whole_groups():
    with pytest.raises(ValueError, match="state_heads"):
        SSDConfig(state_heads=2)  # not fused
    with pytest.raises(ValueError, match="state_heads"):
        SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=2, state_heads=2)
    shape = SSDShape(1, 100, 4, 32, 2, 40, 64, "ragged")  # 2 heads per group
    inp = make_inputs(shape, seed=0)
    with pytest.raises(ValueError, match="heads per group h/g = 2"):
        ssd_forward(**inp, chunk_size=64, backend="cpu", _config=SSDConfig(fused=True, state_heads=4))
    with pytest.raises(ValueError, match="one state tile per head"):
        ssd_forward(**inp, chunk_size=64, backend="cpu",
                    _config=SSDConfig(fused=True, state_tiles=(16, 16), state_heads=2))


def test_segments_need_the_whole_chunk_scan():
    with pytest.raises(ValueError, match="segments"):
        SSDConfig(fused=True, segments=4)
    with pytest.raises(ValueError, match="segments"):
        SSDConfig(scan_cb=True, scan_chunk=True, segments=4)
    with pytest.raises(ValueError, match="segments"):
        SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=0)
    from mamba2_tutorial.kernels.chunk_scan import launch_chunk_scan

    with pytest.raises(ValueError, match="whole-chunk"):
        launch_chunk_scan(*(None,) * 8, "cpu", carry=object())
    with pytest.raises(ValueError, match="whole-chunk"):
        launch_chunk_scan(*(None,) * 8, "cpu", cb=True, carry=object())
    for kw in ({}, {"cb": True}):  # the unrolled scan exists only as the whole-chunk scan
        with pytest.raises(ValueError, match="unrolled scan"):
            launch_chunk_scan(*(None,) * 8, "cpu", unroll=True, **kw)
        for bad in ({"head_loop": 2}, {"factored": 2}, {"factored": 3}):
            with pytest.raises(ValueError, match="need the whole-chunk scan"):
                launch_chunk_scan(*(None,) * 8, "cpu", **bad, **kw)


def test_head_loop_and_bf16_factors_are_checked():
    for bad in (dict(scan_head_loop=2), dict(scan_factored=2, scan_cb=True), dict(scan_factored=3)):
        with pytest.raises(ValueError, match="whole-chunk scan"):
            SSDConfig(**bad)
    for bad in (0, 1.5):
        with pytest.raises(ValueError, match="scan_head_loop must be an int >= 1"):
            SSDConfig(scan_cb=True, scan_chunk=True, scan_head_loop=bad)
    with pytest.raises(ValueError, match="scan_factored must be False, True, 2 or 3"):
        SSDConfig(scan_factored=4)
    with pytest.raises(ValueError, match="whole-chunk scan"):
        SSDConfig(fused=True, scan_factored=3)
    for bad in (dict(), dict(fused=True, state_heads=2), dict(fused=True, scan_factored=1)):
        with pytest.raises(ValueError, match="state_key_log2"):  # kd from the fused stage (one head a block)
            SSDConfig(scan_cb=True, scan_chunk=True, **(dict(scan_factored=3) | bad), state_key_log2=True)
    for bad in (1, 32, 33, 2.0, True):
        with pytest.raises(ValueError, match="state_form must be an int made of the bits 2"):
            SSDConfig(fused=True, state_form=bad)
    for bad in (dict(), dict(fused=True, state_heads=2)):
        with pytest.raises(ValueError, match="state_form needs the fused state stage"):
            SSDConfig(**bad, state_form=2)
    shape = SSDShape(1, 100, 6, 32, 2, 40, 64, "ragged")  # 6 head blocks of one head: no loop of 4
    inp = make_inputs(shape, seed=0)
    with pytest.raises(ValueError, match="scan_head_loop = 4 must divide the head blocks h / HB = 6"):
        ssd_forward(**inp, chunk_size=64, backend="cpu",
                    _config=SSDConfig(scan_cb=True, scan_chunk=True, scan_heads=1, scan_head_loop=4))


def test_ssd_stages_of_the_segmented_stage_cpu():
    shape = SSDShape(1, 330, 4, 32, 2, 40, 64, "ragged")
    inp = make_inputs(shape, seed=2, dtype=torch.bfloat16, D=False)
    cfg = SSDConfig(fused=True, scan_cb=True, scan_chunk=True, segments=2)
    y = ssd_forward(**inp, chunk_size=64, backend="cpu", _config=cfg)
    stages = ssd_stages(**inp, chunk_size=64, backend="cpu", config=cfg)
    assert [k for k in stages if k not in ("chain", "meta")] == ["chunk_state_passing", "chunk_scan"]
    assert stages["meta"]["fused"]
    assert relative_error(stages["chunk_scan"](), y) < 1e-6
