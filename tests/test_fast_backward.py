"""The fast backward kernels against the taught ones, stage by stage, and ``ssd_forward`` training with them.

The fast path's backward (``fast/bwd_states.py``, ``fast/bwd_chunk.py`` with its kernels in
``fast/bwd_dx_heads.py`` and ``fast/bwd_dc_heads.py``) computes what the taught kernels
compute, in other blocks: the state gradient in one launch, C Bᵀ once per group, the heads of a group summed
in the block. Each stage must give the taught stage's results on random ragged problems with groups, for
every way of splitting a group's heads between blocks, with every buffer poisoned with NaN first; and
``ssd_forward``'s gradients (which use them) must match float64 autograd with every state stage it trains
with.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.fast import backward as fast_backward
from mamba2_tutorial.fast.bwd_chunk import heads_per_block, launch_chunk_bwd_heads
from mamba2_tutorial.fast.bwd_states import launch_state_grads_fused
from mamba2_tutorial.fast.config import (
    BackwardConfig,
    ChunkGrads,
    ChunkScan,
    Decay,
    FastConfig,
    Fused,
    Segmented,
)
from mamba2_tutorial.fast.forward import ssd_forward, training_stages
from mamba2_tutorial.fast.tuning import backward_config
from mamba2_tutorial.kernels.backward import GradCall
from mamba2_tutorial.kernels.bwd_chunk import launch_chunk_bwd
from mamba2_tutorial.kernels.bwd_states import launch_state_grads
from mamba2_tutorial.kernels.forward import taught_stages
from mamba2_tutorial.lessons.checks import relative_error, ssd_gradients
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs
from mamba2_tutorial.runtime.autograd import SSDInputs, SSDOptions

DTYPES = (torch.float32, torch.bfloat16)
#: (b, l, h, p, g, n, Q): distinct sizes, ragged last chunks (tiles wholly past the end), groups of 1-4 heads
PROBLEMS = [(2, 150, 8, 32, 2, 48, 64), (1, 211, 6, 24, 3, 40, 32), (3, 97, 3, 40, 1, 56, 64)]


def _intermediates(dims, dtype, seed, device="cpu"):
    """The forward's saved tensors of a random problem, a random dy and d final_states."""
    b, l, h, p, g, n, Q = dims
    inp = make_inputs(SSDShape(b, l, h, p, g, n, Q), seed=seed, dtype=dtype, device=device, D=True,
                      initial_states=True)
    backend = "cpu" if device == "cpu" else "gpu"
    opts = SSDOptions(Q, False, (0.0, float("inf")), backend, taught_stages)
    dt_out, dA_cumsum, init, _, _ = taught_stages(_forward_inputs(inp), opts)
    gen = torch.Generator().manual_seed(500 + seed)
    dy = torch.randn(b, l, h, p, generator=gen).to(device=device, dtype=dtype)
    dfinal = torch.randn(b, h, p, n, generator=gen).to(device)
    return inp, dt_out, dA_cumsum, init, dy, dfinal, backend


def _forward_inputs(inp) -> SSDInputs:
    """The tensors the forward's kernels take (no dt_bias)."""
    return SSDInputs(inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], inp["D"], None, inp["initial_states"])


def _grad_call(inp, dt_out, dA_cumsum, init, dy, dfinal, backend, **fields) -> GradCall:
    """What backward kernels 1-4 take; ``fields`` replace some (D, poison)."""
    call = GradCall(dy, inp["x"], dt_out, dA_cumsum, inp["C"], inp["B"], init, dfinal, inp["D"], backend)
    return call._replace(**fields)


def _close(got, want, bound, what):
    assert not got.isnan().any(), f"{what}: NaN (an element no block wrote?)"
    err = relative_error(got, want)
    assert err <= bound, f"{what}: relative error {err:.2e} > {bound:.0e} against the taught kernels"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("problem", range(len(PROBLEMS)))
def test_state_grads_fused_equals_taught(problem, dtype, device="cpu"):
    inp, dt_out, dA_cumsum, init, dy, dfinal, backend = _intermediates(PROBLEMS[problem], dtype, problem,
                                                                       device)
    for d_final in (dfinal, None):
        want = launch_state_grads(dy, inp["C"], dA_cumsum, init, d_final, backend)
        got = launch_state_grads_fused(_grad_call(inp, dt_out, dA_cumsum, init, dy, d_final, backend,
                                                  poison=True))
        assert got[0].dtype == dy.dtype and got[0].shape == want[0].shape
        # dstates is stored in dy's dtype: its rounding, nothing more
        bound = 1e-6 if dtype == torch.float32 else 8e-3
        for name, g, w in zip(("dstates", "ddA_last", "dinitial_states"), got, want):
            _close(g.float(), w, bound if name == "dstates" else 1e-5, f"{name} {PROBLEMS[problem]} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("problem", range(len(PROBLEMS)))
def test_chunk_bwd_heads_equals_taught(problem, dtype, device="cpu"):
    inp, dt_out, dA_cumsum, init, dy, dfinal, backend = _intermediates(PROBLEMS[problem], dtype, problem,
                                                                       device)
    dstates, _, _ = launch_state_grads(dy, inp["C"], dA_cumsum, init, dfinal, backend)
    args = (inp["x"], dy, dt_out, dA_cumsum, inp["C"], inp["B"], init, dstates, inp["D"], backend)
    call = _grad_call(inp, dt_out, dA_cumsum, init, dy, dfinal, backend, poison=True)
    want = launch_chunk_bwd(*args)
    h, g = inp["x"].shape[2], inp["C"].shape[2]
    splits = [d for d in range(1, h // g + 1) if (h // g) % d == 0]            # every way to split a group
    assert want[6] is None                        # the taught path leaves dD to the host
    xy = dy.double() * inp["x"].double()           # y += D x: dD = sum dy ∘ x
    for hpb in splits:
        got = launch_chunk_bwd_heads(call, dstates, hpb=hpb)
        for name, a, w in zip(("dx", "dB", "dC", "ddt", "da", "da_last"), got, want):
            assert a.shape == w.shape and a.dtype == w.dtype, name
            _close(a.float(), w.float(), 1e-5, f"{name} {PROBLEMS[problem]} {dtype} hpb={hpb}")
        _close(got[6], xy.sum((0, 1, 3)), 1e-5, f"dD (h,) {PROBLEMS[problem]} {dtype} hpb={hpb}")
    D_channel = torch.randn(inp["x"].shape[2:], generator=torch.Generator().manual_seed(problem))
    got = launch_chunk_bwd_heads(call._replace(D=D_channel), dstates)
    want = launch_chunk_bwd(*args[:8], D_channel, backend)
    _close(got[0].float(), want[0].float(), 1e-5, f"dx with D (h, p) {PROBLEMS[problem]} {dtype}")
    _close(got[6], xy.sum((0, 1)), 1e-5, f"dD (h, p) {PROBLEMS[problem]} {dtype}")
    assert launch_chunk_bwd_heads(call._replace(D=None, poison=False), dstates)[6] is None


def test_heads_per_block():
    shipped = BackwardConfig().chunk                    # 16 heads at most, two waves, hint 2

    def hpb(h, g, sms=132, settings=shipped, **kw):
        return heads_per_block(h, g, sms=sms, settings=settings, **kw)

    assert hpb(80, 1) == 16 and hpb(24, 1) == 12 and hpb(128, 8) == 16
    assert hpb(6, 3) == 2 and hpb(7, 1) == 7 and hpb(17, 1) == 1
    assert hpb(12, 1, settings=ChunkGrads(max_heads_per_block=5)) == 4
    # a small grid: fewer heads per block, so that the grid makes two waves of 132 SMs × 2 blocks
    assert hpb(80, 1, blocks_per_head=4 * 8 * 16) == 16         # b8-l4096-h80: 2560 blocks at 16
    assert hpb(24, 1, blocks_per_head=4 * 4 * 8) == 4           # b4-l2048-h24: 256 blocks at 12
    assert hpb(24, 1, blocks_per_head=4 * 4 * 8, sms=16) == 12  # a small GPU: 12 is enough
    assert hpb(24, 1, blocks_per_head=4) == 1                   # never enough: the most blocks
    # the wave is SMs × the occupancy hint: 64 · 24 / d blocks against 2 × 264, or 2 × 132 without a hint
    assert hpb(24, 1, blocks_per_head=64) == 2
    assert hpb(24, 1, blocks_per_head=64, settings=ChunkGrads(occupancy=None)) == 4
    assert hpb(24, 1, blocks_per_head=64, settings=ChunkGrads(min_waves=0)) == 12
    inp, dt_out, dA_cumsum, init, dy, dfinal, backend = _intermediates(PROBLEMS[0], torch.float32, 0)
    call = _grad_call(inp, dt_out, dA_cumsum, init, dy, dfinal, backend, D=None)
    with pytest.raises(ValueError, match=r"hpb \(heads per block\) must divide the group size h / g = 4"):
        launch_chunk_bwd_heads(call, init.float(), hpb=3)


TRAINING_CONFIGS = {
    "fused": FastConfig(state=Fused(store_kd=True), scan=ChunkScan(decay=Decay.KEY_LOG2)),
    "segmented": FastConfig(state=Segmented(segments=2), scan=ChunkScan()),
    "shipped": None,
}


@pytest.mark.parametrize("config", list(TRAINING_CONFIGS))
def test_ssd_forward_trains_with_the_fast_backward(config, monkeypatch):
    """Gradients of every input against float64 autograd, through each kind of state stage, and the fast
    backward kernels are the ones that ran."""
    calls = []
    _fused_state_stage_from(0, monkeypatch)                            # tiny problems: the fused stage too
    work = fast_backward.ChunkBwdHeads
    for owner, name in ((fast_backward, "launch_state_grads_fused"), (work, "launch_dc"),
                        (work, "launch_dx")):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name,
                            lambda *a, _real=real, _name=name, **k: calls.append(_name) or _real(*a, **k))
    b, l, h, p, g, n, Q = PROBLEMS[1]
    inp = make_inputs(SSDShape(b, l, h, p, g, n, Q), seed=9, dtype=torch.float32, D=True, z=True,
                      dt_bias=True, initial_states=True)
    gen = torch.Generator().manual_seed(9)
    dout, dfinal = torch.randn(b, l, h, p, generator=gen), torch.randn(b, h, p, n, generator=gen)
    want = ssd_gradients(ref.ssd_chunked, inp, Q, dout, dfinal, dtype=torch.float64)
    got = ssd_gradients(ssd_forward, inp, Q, dout, dfinal, backend="cpu", config=TRAINING_CONFIGS[config],
                        _poison=True)
    # kernel 4 after the state stage (on a GPU on a second stream, beside it), kernel 3 last
    assert calls == ["launch_state_grads_fused", "launch_dc", "launch_dx"]
    for name, grad in got.items():
        err = relative_error(grad, want[name])
        assert err <= 1e-4, f"{config}: d{name} relative error {err:.2e} against float64 autograd"


def _fused_state_stage_from(blocks_per_sm: int, monkeypatch) -> None:
    """The fast backward with the shipped settings, but the fused state stage from ``blocks_per_sm``."""
    real = fast_backward.backward_config

    def config(*args):
        cfg = real(*args)
        return dataclasses.replace(cfg, state=dataclasses.replace(cfg.state,
                                                                  min_fused_blocks_per_sm=blocks_per_sm))
    monkeypatch.setattr(fast_backward, "backward_config", config)


def test_few_long_sequences_take_the_taught_state_stage(monkeypatch):
    """The fused state stage walks every chunk in one block per (state tile, batch, head): with fewer such
    blocks than SMs the taught kernels 1 and 2 (parallel over the chunks) run instead, and the gradients are
    the same."""
    def fused(*problem, sms=132):
        settings = backward_config(*problem).state
        return fast_backward.uses_fused_state_grads(problem[:6], problem[6], sms=sms, settings=settings)

    assert fused(8, 4096, 80, 64, 128, 256, torch.bfloat16)           # 2 state tiles × 640: 1280 blocks
    assert fused(1, 32768, 80, 64, 128, 256, torch.bfloat16)          # 160 blocks on 132 SMs
    assert not fused(1, 32768, 8, 64, 128, 256, torch.bfloat16)       # 16 blocks
    assert not fused(1, 32768, 80, 64, 128, 256, torch.bfloat16, sms=200)
    b, l, h, p, g, n, Q = PROBLEMS[0]
    inp = make_inputs(SSDShape(b, l, h, p, g, n, Q), seed=11, dtype=torch.float32, D=True,
                      initial_states=True)
    gen = torch.Generator().manual_seed(11)
    dout, dfinal = torch.randn(b, l, h, p, generator=gen), torch.randn(b, h, p, n, generator=gen)
    grads = {}
    for threshold in (0, 10**9):                    # fused, then taught
        _fused_state_stage_from(threshold, monkeypatch)
        grads[threshold] = ssd_gradients(ssd_forward, inp, Q, dout, dfinal, backend="cpu")
    for name, g_fused in grads[0].items():
        assert relative_error(g_fused, grads[10**9][name]) < 1e-5, name


@pytest.mark.parametrize("problem", range(len(PROBLEMS)))
def test_training_stages_keep_true_dt_and_states(problem):
    """Under autograd the fused state stage never stores kd in place of dt (the backward needs dt), and the
    segmented one's segment-local states become the true state entering every chunk (its scan stores them),
    the last segment shorter than the others included: the taught stages' dt, cumsum and states."""
    dims = PROBLEMS[problem]
    inp, dt_out, dA_cumsum, init, _, _, _ = _intermediates(dims, torch.float32, 3 + problem)
    opts = SSDOptions(dims[-1], False, (0.0, float("inf")), "cpu", taught_stages)
    configs = [c for c in TRAINING_CONFIGS.values() if c is not None]
    configs.append(FastConfig(state=Segmented(segments=3), scan=ChunkScan()))
    for config in configs:
        got = training_stages(config)(_forward_inputs(inp), opts)
        for name, a, w in zip(("dt_out", "dA_cumsum", "chunk_init_states"), got, (dt_out, dA_cumsum, init)):
            _close(a.float(), w.float(), 1e-5, f"{config.state!r}: {name}")


# ----------------------------------------------------------------------------------------------------
# on a GPU
# ----------------------------------------------------------------------------------------------------
GPU_PROBLEMS = [(2, 700, 16, 64, 2, 128, 256), (1, 1300, 24, 64, 1, 128, 256), (3, 515, 6, 48, 3, 80, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("problem", range(len(GPU_PROBLEMS)))
def test_fast_backward_equals_taught_on_the_gpu(problem, dtype):
    inp, dt_out, dA_cumsum, init, dy, dfinal, backend = _intermediates(GPU_PROBLEMS[problem], dtype, problem,
                                                                       "cuda")
    call = _grad_call(inp, dt_out, dA_cumsum, init, dy, dfinal, backend, poison=True)
    want = launch_state_grads(dy, inp["C"], dA_cumsum, init, dfinal, backend)
    got = launch_state_grads_fused(call)
    for name, g, w in zip(("dstates", "ddA_last", "dinitial_states"), got, want):
        _close(g.float(), w, 1e-5 if dtype == torch.float32 or name != "dstates" else 8e-3, name)
    dstates = want[0]
    want = launch_chunk_bwd(inp["x"], dy, dt_out, dA_cumsum, inp["C"], inp["B"], init, dstates, inp["D"],
                            backend)
    got = launch_chunk_bwd_heads(call, dstates)
    for name, a, w in zip(("dx", "dB", "dC", "ddt", "da", "da_last"), got, want):
        _close(a.float(), w.float(), 1e-5 if dtype == torch.float32 else 1e-4, name)


@pytest.mark.gpu
@pytest.mark.parametrize("problem", range(len(GPU_PROBLEMS)))
def test_kernel_4_beside_the_state_stage_changes_nothing(problem):
    """Kernels 1-4 with kernel 4 on a second stream give, bit for bit, what they give in order on one stream,
    every time (a missing wait between the streams would show as a difference in some repetition)."""
    inp, dt_out, dA_cumsum, init, dy, dfinal, _ = _intermediates(GPU_PROBLEMS[problem], torch.bfloat16,
                                                                 problem, "cuda")
    call = _grad_call(inp, dt_out, dA_cumsum, init, dy, dfinal, "gpu")
    b, l, h, p = dy.shape
    shipped = backward_config(b, l, h, p, inp["C"].shape[3], dA_cumsum.shape[3], dy.dtype, dy.device)
    assert shipped.overlap
    states, chunk = fast_backward.kernel_stages(call, dataclasses.replace(shipped, overlap=False))
    want = [t for t in (*states, *chunk) if t is not None]
    for _ in range(5):
        states, chunk = fast_backward.kernel_stages(call, shipped)
        got = [t for t in (*states, *chunk) if t is not None]
        for i, (a, w) in enumerate(zip(got, want)):
            assert torch.equal(a, w), f"result {i} of kernels 1-4 differs with kernel 4 on a second stream"


def test_storing_the_states_needs_a_carry():
    """Only a segmented state stage has segment-local states for the scan to turn into the true ones."""
    from mamba2_tutorial.fast.plan import Plan, ScanCall
    from mamba2_tutorial.fast.scan_chunk import launch_scan_chunk

    inp, dt_out, dA_cumsum, init, _, _, _ = _intermediates(PROBLEMS[0], torch.float32, 0)
    plan = Plan(Fused(), ChunkScan(), False, False, True, torch.float32)
    with pytest.raises(ValueError, match="store_states needs the carry of a segmented state stage"):
        launch_scan_chunk(ScanCall(inp["x"], dt_out, dA_cumsum, inp["C"], inp["B"], init, None, None, "cpu"),
                          plan)
