"""The C Bᵀ kernel and the scan that reads it (kernels/chunk_scan_cb.py), on the CPU executor."""

from __future__ import annotations

import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.checks import assert_close, relative_error
from mamba2_tutorial.inputs import SSDShape, make_inputs
from mamba2_tutorial.kernels.chunk_scan_cb import (
    KEY_LOG2_ROWS,
    chunk_scan_cb_plan,
    launch_chunk_cb,
    launch_key_log2,
)
from mamba2_tutorial.kernels.configs import FAST_16BIT_CB, SSDConfig
from mamba2_tutorial.ssd import ssd_forward, ssd_stages


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("TM,TK", [(32, 32), (32, 16)])
def test_chunk_cb_writes_the_causal_tiles_of_C_Bt(dtype, TM, TK):
    # b 2, l 150 (chunks of 64: 2 full, one of 22 rows), g 3, n 40 (padded to 64 inside the kernel)
    b, l, g, n, Q = 2, 150, 3, 40, 64
    gen = torch.Generator().manual_seed(3)
    C = torch.randn(b, l, g, n, generator=gen).to(dtype)
    B = torch.randn(b, l, g, n, generator=gen).to(dtype)
    CB = launch_chunk_cb(C, B, Q, TM, TK, "cpu", poison=True)
    assert CB.shape == (b, 3, g, Q, Q) and CB.dtype == torch.float32
    pad = 3 * Q - l
    Cp = torch.nn.functional.pad(C.double(), (0, 0, 0, 0, 0, pad)).reshape(b, 3, Q, g, n)
    Bp = torch.nn.functional.pad(B.double(), (0, 0, 0, 0, 0, pad)).reshape(b, 3, Q, g, n)
    want = torch.einsum("bcmgn,bckgn->bcgmk", Cp, Bp)
    checked = 0
    for c in range(3):
        rows = min(Q, l - c * Q)
        for i_m in range(Q // TM):
            if i_m * TM >= rows:
                continue  # row tiles past the end: never written, never read
            n_k = min((i_m + 1) * TM // TK, -(-rows // TK))
            m, k = slice(i_m * TM, (i_m + 1) * TM), slice(0, n_k * TK)
            got = CB[:, c, :, m, k]
            assert not torch.isnan(got).any(), f"chunk {c}, row tile {i_m}: unwritten"
            assert_close(got, want[:, c, :, m, k], name=f"CB chunk {c} row tile {i_m}")
            checked += 1
    assert checked == 2 * (Q // TM) + 1  # two full chunks, and one row tile of the 22-row chunk


def test_chunk_cb_in_bfloat16_is_the_float32_result_rounded():
    # cb_dtype=bfloat16 (SSDConfig.scan_cb_bf16): the same float32 products, rounded once to bf16 on store
    b, l, g, n, Q = 2, 150, 3, 40, 64
    gen = torch.Generator().manual_seed(4)
    C = torch.randn(b, l, g, n, generator=gen).to(torch.bfloat16)
    B = torch.randn(b, l, g, n, generator=gen).to(torch.bfloat16)
    CB32 = launch_chunk_cb(C, B, Q, 32, 32, "cpu")
    CB16 = launch_chunk_cb(C, B, Q, 32, 32, "cpu", cb_dtype=torch.bfloat16)
    assert CB16.dtype == torch.bfloat16 and CB16.shape == CB32.shape
    for c in range(2):  # the two full chunks, causal tiles only (row tile i_m has key tiles 0..i_m)
        for i_m in range(Q // 32):
            m, k = slice(i_m * 32, (i_m + 1) * 32), slice(0, (i_m + 1) * 32)
            got, want = CB16[:, c, :, m, k], CB32[:, c, :, m, k]
            assert torch.equal(got, want.to(torch.bfloat16)), f"chunk {c}, row tile {i_m}"
            assert (got.float() - want).abs().max() <= want.abs().max() * 2.0 ** -8


def test_heads_first_grid():
    plan = chunk_scan_cb_plan(8, 4096, 80, 64, 1, 128, 256, torch.bfloat16, 1)
    assert plan.grid == (80, 4, 128)  # heads, row tiles, batch·chunks
    assert chunk_scan_cb_plan(2, 1000, 8, 64, 2, 128, 128, torch.bfloat16, 2).grid == (4, 2, 16)


def test_cb_stage_is_both_launches_and_gives_the_forward_cpu():
    shape = SSDShape(1, 300, 4, 32, 2, 40, 256, "ragged")
    inp = make_inputs(shape, seed=5, dtype=torch.bfloat16, D=False)
    stages = ssd_stages(**inp, chunk_size=256, backend="cpu", config=FAST_16BIT_CB)
    assert [k for k in stages if k not in ("chain", "meta")] == ["chunk_state_passing", "chunk_scan"]
    y = ssd_forward(**inp, chunk_size=256, backend="cpu", _config=FAST_16BIT_CB)
    assert relative_error(stages["chunk_scan"](), y) == 0.0
    assert relative_error(stages["chain"](), y) == 0.0


def test_cb_factored_decay_is_not_used_when_dt_can_be_negative_cpu():
    # dt in [-0.2, 0.3) with dt_limit (-inf, inf): dA is not monotone, the factored split would be wrong
    shape = SSDShape(1, 200, 4, 32, 2, 24, 64, "ragged")
    inp = make_inputs(shape, seed=6, dtype=torch.float32, D=False)
    gen = torch.Generator().manual_seed(6)
    inp["dt"] = torch.rand(inp["dt"].shape, generator=gen) * 0.5 - 0.2
    inp["dt_limit"] = (float("-inf"), float("inf"))
    cfg = SSDConfig(scan_cb=True, scan_heads=2, scan_factored=True)
    y = ssd_forward(**inp, chunk_size=64, backend="cpu", _config=cfg, _poison=True)
    y_ref = ref.ssd_chunked(**{k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inp.items()},
                            chunk_size=64)
    assert relative_error(y, y_ref) < 1e-5


def test_cb_factored_decay_forced_on_negative_dt_is_wrong_cpu():
    # the test above can fail: forcing the factored split on a non-monotone dA gives a visibly wrong answer
    from mamba2_tutorial.kernels.chunk_scan import launch_chunk_scan
    from mamba2_tutorial.kernels.chunk_state import launch_chunk_state_passing

    shape = SSDShape(1, 200, 4, 32, 2, 24, 64, "ragged")
    inp = make_inputs(shape, seed=6, dtype=torch.float32, D=False)
    gen = torch.Generator().manual_seed(6)
    dt = torch.rand(inp["dt"].shape, generator=gen) * 0.5 - 0.2
    lim = (float("-inf"), float("inf"))
    dt_out, dA, init, _ = launch_chunk_state_passing(inp["x"], dt, inp["A"], inp["B"], 64, None, False, lim,
                                                     None, "cpu")
    args = (inp["x"], dt_out, dA, inp["C"], inp["B"], init, None, None, "cpu")
    exact = launch_chunk_scan(*args, cb=True, max_heads_per_block=2)
    forced = launch_chunk_scan(*args, cb=True, max_heads_per_block=2, factored=True)
    assert relative_error(forced, exact) > 1e-2


def test_key_log2_kernel_writes_every_kd():
    # (b, h, nchunks, Q) = (2, 3, 5, 32): 30 rows, not a multiple of the kernel's 16-row blocks; some dt are 0
    # (the padding past a ragged sequence end, or dt_limit's lower bound), whose kd is +inf (exp2(-inf) = 0)
    gen = torch.Generator().manual_seed(11)
    dt = torch.rand(2, 3, 5, 32, generator=gen) * 0.2
    dt[1, 2, 4, 20:] = 0.0
    dA_cumsum = (-dt * torch.rand(3, generator=gen)[None, :, None, None] * 16).cumsum(-1)
    assert (2 * 3 * 5) % KEY_LOG2_ROWS != 0
    kd = launch_key_log2(dt, dA_cumsum, "cpu", poison=True)
    want = dA_cumsum.double() * 1.4426950408889634 - torch.log2(dt.double())
    assert not torch.isnan(kd).any()
    assert torch.equal(torch.isinf(kd), dt == 0) and (kd[dt == 0] > 0).all()
    finite = dt > 0
    assert_close(kd[finite], want[finite], name="kd = dA_cumsum·log2(e) - log2(dt)")
