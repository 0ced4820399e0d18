"""Packed rows inside the fast forward's kernels (``fast/resets.py``): one set of launches for the batch, not
one per sequence, and each sequence's SSD as if it ran alone.

Every config of the shipped tables and the staged steps whose stages take ``seq_idx`` (a fused or segmented
state stage, a whole-chunk or shared scan) runs on the CPU executor, in float32 and bfloat16, on packs with
boundaries inside chunks and on a chunk's edge, a one-token sequence, sequences longer than several chunks,
a row that starts at sequence 0 (it takes the initial state) and one that starts at sequence 1 (it does not),
and a ragged last chunk. Each is checked against the float64 oracle (every sequence alone through the
recurrence) and against ``ssd_forward`` running every sequence alone (``_each_sequence``).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from mamba2_tutorial import fast
from mamba2_tutorial.fast.forward import _each_sequence, ssd_forward
from mamba2_tutorial.fast.stages import packs_in_kernels
from mamba2_tutorial.fast.steps import steps_for
from mamba2_tutorial.fast.tuning import table_names
from mamba2_tutorial.lessons.checks import relative_error
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs
from mamba2_tutorial.reference import ssd_each_sequence, ssd_recurrent
from mamba2_tutorial.runtime.launch import recording
from mamba2_tutorial.runtime.validation import validate_packing


def _with_segments(cfg):
    if isinstance(cfg.state, fast.Segmented) and cfg.state.segments is None:
        return dataclasses.replace(cfg, state=dataclasses.replace(cfg.state, segments=3))
    return cfg


def _packed_configs() -> dict:
    """The distinct configs that pack inside their kernels, named by their first name."""
    named = [(name, cfg) for t in table_names() for name, cfg in fast.load_table(t).configs.items()]
    named += [(f"step: {s.name}", s.config) for s in steps_for(segmented=True, segments=3)]
    configs: dict = {}
    for name, cfg in named:
        cfg = _with_segments(cfg)
        if packs_in_kernels(cfg) and cfg not in configs.values():
            configs[name] = cfg
    return configs


CONFIGS = _packed_configs()
SHAPE = SSDShape(2, 150, 4, 16, 2, 16, 32, name="packed rows")   # 5 chunks, the last of 22 rows
#: row 0 from sequence 0: boundaries inside chunks, one on a chunk's edge (64), a one-token sequence, a last
#: sequence of two chunks; row 1 from sequence 1: a sequence of more than three chunks, then one token
LENGTHS = ([5, 1, 58, 22, 64], [100, 1, 49])
NO_LIMIT = (0.0, float("inf"))
TOL = {torch.float32: 1e-4, torch.bfloat16: 1e-2}   # relative L2 error vs float64, as the unpacked forward's


def seq_idx_of(lengths_per_row, first_ids) -> torch.Tensor:
    return torch.stack([torch.repeat_interleave(torch.arange(first, first + len(ls), dtype=torch.int32),
                                                torch.tensor(ls)) for ls, first in zip(lengths_per_row,
                                                                                       first_ids)])


SEQ_IDX = seq_idx_of(LENGTHS, (0, 1))


def _inputs(dtype, seed=0):
    kw = make_inputs(SHAPE, seed=seed, dtype=torch.float64, D=True, z=True, dt_bias=True, initial_states=True)
    low = {k: v.to(dtype if k in ("x", "B", "C", "z") else torch.float32) if isinstance(v, torch.Tensor)
           else v for k, v in kw.items()}
    return kw, low


def _launched(run) -> list[str]:
    names: list = []
    with recording(lambda kernel, grid, args: names.append(kernel._pyfunc.__name__)):
        run()
    return names


def test_the_packed_configs_cover_both_walks_and_both_scans():
    states = {type(c.state) for c in CONFIGS.values()}
    scans = {type(c.scan) for c in CONFIGS.values()}
    assert states == {fast.Fused, fast.Segmented} and scans == {fast.ChunkScan, fast.SharedScan}
    assert any(c.scan.unroll for c in CONFIGS.values() if isinstance(c.scan, fast.ChunkScan))
    assert not packs_in_kernels(fast.TAUGHT)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_packed_batch_in_the_kernels_equals_each_sequence_alone(name, dtype):
    cfg = CONFIGS[name]
    kw, low = _inputs(dtype)
    Q = SHAPE.chunk_size
    want_y, want_final = ssd_each_sequence(ssd_recurrent, seq_idx=SEQ_IDX, return_final_states=True, **kw)
    y, final = ssd_forward(**low, chunk_size=Q, seq_idx=SEQ_IDX, return_final_states=True, backend="cpu",
                           config=cfg, _poison=True)
    assert y.dtype == dtype and final.dtype == torch.float32
    assert not y.isnan().any() and not final.isnan().any(), "an output element was never written"
    for what, got, want in (("y", y, want_y), ("final_states", final, want_final)):
        err = relative_error(got, want)
        assert err <= TOL[dtype], f"{name} {dtype}: {what} relative error {err:.2e} vs float64"
    # every sequence alone through the same config: the same results up to rounding
    packing = validate_packing(SEQ_IDX, None, False, SHAPE.batch, SHAPE.seqlen, "cpu")
    tensors = {k: low[k] for k in ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")}
    alone_y, alone_final = _each_sequence(packing, tensors, True, chunk_size=Q,
                                          dt_softplus=low["dt_softplus"], dt_limit=NO_LIMIT, backend="cpu",
                                          config=cfg)
    assert relative_error(y, alone_y) <= 2 * TOL[dtype]
    assert relative_error(final, alone_final) <= (1e-5 if dtype == torch.float32 else 2 * TOL[dtype])


def test_the_reset_matters_a_packed_row_is_not_the_unpacked_one():
    """The same inputs unpacked differ after the first boundary: the packed results above come from the
    resets, not from inputs that hide them."""
    cfg = CONFIGS["segmented-occ2-acc-kd+chunk-bf16cb-kd"]
    _, low = _inputs(torch.float32)
    run = dict(**low, chunk_size=SHAPE.chunk_size, return_final_states=True, backend="cpu", config=cfg)
    y_packed, final_packed = ssd_forward(**run, seq_idx=SEQ_IDX)
    y_whole, final_whole = ssd_forward(**run)
    torch.testing.assert_close(y_packed[0, :5], y_whole[0, :5])          # sequence 0 of row 0: the same
    assert relative_error(y_packed[0, 5:], y_whole[0, 5:]) > 0.05
    assert relative_error(y_packed[1], y_whole[1]) > 0.05                # row 1 drops the initial state
    assert relative_error(final_packed, final_whole) > 0.05


@pytest.mark.parametrize("name", ["fused+shared", "segmented-occ2-acc-kd+chunk-bf16cb-kd"])
def test_a_packed_batch_launches_what_the_unpacked_one_does(name):
    """The packed path's launches: those of the unpacked batch, whatever the number of sequences."""
    cfg = CONFIGS[name]
    _, low = _inputs(torch.bfloat16)
    run = dict(**low, chunk_size=SHAPE.chunk_size, backend="cpu", config=cfg)
    unpacked = _launched(lambda: ssd_forward(**run))
    assert 2 <= len(unpacked) <= 4
    for lengths in (LENGTHS, ([1] * 30 + [120], [150])):
        seq_idx = seq_idx_of(lengths, (0, 0))
        assert _launched(lambda seq_idx=seq_idx: ssd_forward(**run, seq_idx=seq_idx)) == unpacked


def test_what_the_kernels_do_not_pack_runs_sequence_by_sequence():
    """Each sequence alone (one set of launches per sequence): the taught stages, training and
    ``return_varlen_states``."""
    kw, low = _inputs(torch.float32)
    Q = SHAPE.chunk_size
    cfg = CONFIGS["segmented-occ2-acc-kd+chunk-bf16cb-kd"]
    sequences = sum(len(ls) for ls in LENGTHS)
    taught = _launched(lambda: ssd_forward(**low, chunk_size=Q, seq_idx=SEQ_IDX, backend="cpu",
                                           config=fast.TAUGHT))
    assert taught.count("chunk_scan_kernel") == sequences
    x = low["x"].clone().requires_grad_()
    training = _launched(lambda: ssd_forward(**{**low, "x": x}, chunk_size=Q, seq_idx=SEQ_IDX, backend="cpu",
                                             config=cfg))
    assert training.count("chunk_scan_chunk_kernel") == sequences
    one_row = {k: v[:1] if k in ("x", "dt", "B", "C", "z", "initial_states") else v for k, v in low.items()}
    cu_seqlens = torch.tensor([0, 5, 6, 64, 86, 150], dtype=torch.int32)
    varlen = _launched(lambda: ssd_forward(**one_row, chunk_size=Q, seq_idx=SEQ_IDX[:1],
                                           cu_seqlens=cu_seqlens, return_varlen_states=True, backend="cpu",
                                           config=cfg))
    assert varlen.count("chunk_scan_chunk_kernel") == len(LENGTHS[0])


def test_packed_stages_refuse_a_taught_stage():
    from mamba2_tutorial.fast.plan import StateCall, resolve
    from mamba2_tutorial.fast.stages import run_state

    _, low = _inputs(torch.float32)
    plan = resolve(fast.TAUGHT, SHAPE.batch, SHAPE.nheads, 5, torch.float32, "cpu", NO_LIMIT)
    call = StateCall(low["x"], low["dt"], low["A"], low["B"], SHAPE.chunk_size, None, False, NO_LIMIT,
                     None, "cpu", False, SEQ_IDX)
    with pytest.raises(ValueError, match="packed rows"):
        run_state(plan, call)


# ----------------------------------------------------------------------------------------------------
# on a GPU, against mamba_ssm's own seq_idx path
# ----------------------------------------------------------------------------------------------------
GPU_SHAPE = SSDShape(2, 1000, 8, 64, 2, 64, 64, name="packed rows on a GPU")  # 16 chunks, the last of 40
#: row 0: a 7-token sequence, a one-token one, one of about five chunks, one of exactly a chunk, a long last
#: one; row 1: half the row, one token, the rest
GPU_LENGTHS = ([7, 1, 300, 64, 628], [500, 1, 499])


def _mamba_chunk_scan_combined():
    from mamba2_tutorial.perf.bench import import_mamba_chunk_scan_combined

    try:
        return import_mamba_chunk_scan_combined()
    except ImportError:
        return None


def packed_agreement(shape, lengths, dtype, device, backend, combined) -> None:
    """``ssd_forward`` on packed rows (the shipped config: the resets inside the kernels), forward and the
    gradients of x, dt, B and C: against the float64 oracle (every sequence alone), and against ``combined``
    (mamba_ssm's ``mamba_chunk_scan_combined``) given the same ``seq_idx``, as closely as it agrees with
    float64 itself."""
    Q = shape.chunk_size
    seq_idx = seq_idx_of(lengths, (0, 0)).to(device)
    kw = make_inputs(shape, seed=4, dtype=torch.float64, D=True, z=True, dt_bias=True, device=device)
    names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias")
    low = {k: (v.to(dtype if k in ("x", "B", "C", "z") else torch.float32) if k in names else v)
           for k, v in kw.items()}
    gen = torch.Generator(device=device).manual_seed(5)
    dout = torch.randn(shape.batch, shape.seqlen, shape.nheads, shape.headdim, device=device, generator=gen)

    def run(forward, inputs, **options):
        leaves = {k: inputs[k].detach().clone().requires_grad_() for k in ("x", "dt", "B", "C")}
        y = forward(**{**inputs, **leaves}, chunk_size=Q, seq_idx=seq_idx, **options)
        y = y[0] if isinstance(y, tuple) else y
        grads = torch.autograd.grad(y, list(leaves.values()), dout.to(y.dtype))
        return y.detach(), dict(zip(leaves, grads))

    def oracle(chunk_size, **inputs):
        return ssd_each_sequence(ssd_recurrent, **inputs)

    want_y, want_g = run(oracle, kw)
    y, g = run(ssd_forward, low, backend=backend)
    assert y.dtype == dtype and not y.isnan().any()
    bound = TOL[dtype] * (3 if dtype == torch.bfloat16 else 1)
    assert relative_error(y, want_y) <= TOL[dtype], relative_error(y, want_y)
    for k in g:
        assert relative_error(g[k], want_g[k]) <= bound, (k, relative_error(g[k], want_g[k]))
    m_y, m_g = run(combined, low)
    # the same semantics: mamba_ssm's packed rows are the oracle's too, and ours and its agree with each other
    # about as well as each agrees with float64
    mamba_err = relative_error(m_y, want_y)
    assert mamba_err <= 2 * TOL[dtype], f"the other's packed output: {mamba_err:.2e} vs float64"
    assert relative_error(y, m_y) <= 2 * TOL[dtype] + 2 * mamba_err
    for k in g:
        m_err = relative_error(m_g[k], want_g[k])
        assert m_err <= 2 * bound, f"the other implementation's d{k}: {m_err:.2e} vs float64"
        assert relative_error(g[k], m_g[k]) <= 2 * bound + 2 * m_err, (k, relative_error(g[k], m_g[k]), m_err)


def test_the_packed_agreement_check_on_the_cpu():
    """The GPU check below, on the CPU executor with a stand-in for mamba_ssm (the reference run on each
    sequence alone, in float32); a stand-in that ignores seq_idx fails it."""
    def packed_reference(chunk_size, seq_idx, **inputs):
        wide = {k: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                for k, v in inputs.items()}
        return ssd_each_sequence(ssd_recurrent, seq_idx=seq_idx, **wide)

    def unpacked(chunk_size, seq_idx, **inputs):
        return ssd_recurrent(**inputs)

    packed_agreement(SHAPE, LENGTHS[:1] + ([100, 1, 49],), torch.float32, "cpu", "cpu", packed_reference)
    with pytest.raises(AssertionError):
        packed_agreement(SHAPE, LENGTHS[:1] + ([100, 1, 49],), torch.float32, "cpu", "cpu", unpacked)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_packed_rows_on_the_gpu_agree_with_float64_and_with_mamba_ssm(dtype):
    """:func:`packed_agreement` on a GPU, against mamba_ssm's own seq_idx path."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    combined = _mamba_chunk_scan_combined()
    if combined is None:
        pytest.skip("mamba_ssm does not import here")
    packed_agreement(GPU_SHAPE, GPU_LENGTHS, dtype, "cuda", "gpu", combined)
