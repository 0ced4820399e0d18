"""Packed rows inside the fast forward's kernels (``fast/resets.py``): one set of launches for the batch, not
one per sequence, and each sequence's SSD as if it ran alone.

Every config of the shipped tables and the staged steps whose stages take ``seq_idx`` (a fused or segmented
state stage, a whole-chunk or shared scan) runs on the CPU executor, in float32 and bfloat16, on packs with
boundaries inside chunks and on a chunk's edge, a one-token sequence, sequences longer than several chunks,
a row that starts at sequence 0 (it takes the initial state) and one that starts at sequence 1 (it does not),
and a ragged last chunk. Each is checked against the float64 oracle (every sequence alone through the
recurrence) and against ``ssd_forward`` running every sequence alone (``_each_sequence``). Under autograd
the same configs run the forward and the fast backward in the kernels: the output and the gradient of every
input against the float64 oracle's, with ``_each_sequence`` made to fail; and ``return_varlen_states``
reads each sequence's final state from the kernels' entering states.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from mamba2_tutorial import fast
from mamba2_tutorial.fast import backward as fast_backward
from mamba2_tutorial.fast import forward as fast_forward
from mamba2_tutorial.fast.forward import _each_sequence, ssd_forward
from mamba2_tutorial.fast.stages import packs_in_kernels
from mamba2_tutorial.fast.steps import steps_for
from mamba2_tutorial.fast.tuning import table_names
from mamba2_tutorial.lessons.checks import relative_error, ssd_gradients
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
    """Each sequence alone (one set of launches per sequence): the taught stages, and
    ``return_varlen_states`` under autograd (whose varlen states come differentiable from each sequence's
    own final state). Training without it and the varlen states without autograd run in the kernels (the
    tests below)."""
    kw, low = _inputs(torch.float32)
    Q = SHAPE.chunk_size
    cfg = CONFIGS["segmented-occ2-acc-kd+chunk-bf16cb-kd"]
    sequences = sum(len(ls) for ls in LENGTHS)
    taught = _launched(lambda: ssd_forward(**low, chunk_size=Q, seq_idx=SEQ_IDX, backend="cpu",
                                           config=fast.TAUGHT))
    assert taught.count("chunk_scan_kernel") == sequences
    one_row = {k: v[:1] if k in ("x", "dt", "B", "C", "z", "initial_states") else v for k, v in low.items()}
    cu_seqlens = torch.tensor([0, 5, 6, 64, 86, 150], dtype=torch.int32)
    x = one_row["x"].clone().requires_grad_()
    run = dict(chunk_size=Q, seq_idx=SEQ_IDX[:1], cu_seqlens=cu_seqlens, return_varlen_states=True,
               backend="cpu", config=cfg)
    varlen = _launched(lambda: ssd_forward(**{**one_row, "x": x}, **run))     # recorded, not run
    assert varlen.count("chunk_scan_chunk_kernel") == len(LENGTHS[0])
    _, states = ssd_forward(**{**one_row, "x": x}, **run)
    (dx,) = torch.autograd.grad(states.sum(), x)
    # each sequence's final state depends on that sequence's inputs only, and the last's on all its positions
    one64 = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
             for k, v in {**one_row, "x": x.detach()}.items()}
    x64 = one64["x"].clone().requires_grad_()
    _, want = ssd_each_sequence(ssd_recurrent, **{**one64, "x": x64}, seq_idx=SEQ_IDX[:1],
                                cu_seqlens=cu_seqlens, return_varlen_states=True)
    (want_dx,) = torch.autograd.grad(want.sum(), x64)
    assert relative_error(states, want) <= TOL[torch.float32]
    assert relative_error(dx, want_dx) <= TOL[torch.float32]


# ----------------------------------------------------------------------------------------------------
# training: the forward and the fast backward in the kernels
# ----------------------------------------------------------------------------------------------------
#: b, l, h, p, g, n, Q all distinct but b = 3 and g = 2 (grouped B and C, two heads a group): 7 chunks, the
#: last of 4 rows
GRAD_SHAPE = SSDShape(3, 100, 4, 12, 2, 20, 16, name="packed rows, gradients")
#: row 0 from sequence 0: boundaries inside a chunk (3, 4), on chunk edges (32, 48), a one-token sequence, a
#: last one of more than three chunks; row 1 from sequence 1 (no initial state): a sequence of more than
#: four chunks, a one-token one, one that ends the row inside the ragged last chunk; row 2: one chunk, then a
#: sequence to the end
GRAD_LENGTHS = ([3, 1, 28, 16, 52], [70, 1, 29], [16, 84])
GRAD_SEQ_IDX = seq_idx_of(GRAD_LENGTHS, (0, 1, 0))
#: relative L2 error of a gradient against float64's: float32 as the unpacked backward's; bfloat16 inputs
#: (x, B, C, z) give the gradients the rounding of x's dtype, as ``packed_agreement`` bounds them
GRAD_TOL = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
OPTIONAL = ("D", "z", "dt_bias", "initial_states")


def _grad_inputs(seed: int, optional: bool) -> dict:
    """float64 inputs of GRAD_SHAPE (with D, z, dt_bias and initial_states, or none of them)."""
    flags = dict.fromkeys(OPTIONAL, optional)
    return make_inputs(GRAD_SHAPE, seed=seed, dtype=torch.float64, **flags)


def _cotangents(seed: int) -> tuple:
    """dL/dy and dL/d final_states, float64."""
    s = GRAD_SHAPE
    gen = torch.Generator().manual_seed(100 + seed)
    return (torch.randn(s.batch, s.seqlen, s.nheads, s.headdim, generator=gen, dtype=torch.float64),
            torch.randn(s.batch, s.nheads, s.headdim, s.dstate, generator=gen, dtype=torch.float64))


def _each_sequence_float64(chunk_size, **inputs):
    return ssd_each_sequence(ssd_recurrent, **inputs)


@functools.lru_cache(maxsize=8)
def _oracle_gradients(seed: int, optional: bool) -> tuple:
    """(y, final_states, {name: gradient}) of the float64 oracle: every sequence alone."""
    inp = _grad_inputs(seed, optional)
    dout, dfinal = _cotangents(seed)
    y, final = _each_sequence_float64(GRAD_SHAPE.chunk_size, **inp, seq_idx=GRAD_SEQ_IDX,
                                      return_final_states=True)
    grads = ssd_gradients(_each_sequence_float64, inp, GRAD_SHAPE.chunk_size, dout, dfinal,
                          seq_idx=GRAD_SEQ_IDX)
    return y, final, grads


def _no_fallback(monkeypatch) -> None:
    def each_sequence(*args, **kwargs):
        raise AssertionError("the packed batch ran sequence by sequence")
    monkeypatch.setattr(fast_forward, "_each_sequence", each_sequence)


def _check_training(cfg, dtype, seed, optional, what) -> None:
    inp = _grad_inputs(seed, optional)
    low = {k: v.to(dtype if k in ("x", "B", "C", "z") else torch.float32) if isinstance(v, torch.Tensor)
           else v for k, v in inp.items()}
    dout, dfinal = _cotangents(seed)
    want_y, want_final, want = _oracle_gradients(seed, optional)
    run = dict(chunk_size=GRAD_SHAPE.chunk_size, seq_idx=GRAD_SEQ_IDX, backend="cpu", config=cfg,
               _poison=True)
    leaves = {k: v.detach().clone().requires_grad_() for k, v in low.items()
              if isinstance(v, torch.Tensor) and v.is_floating_point()}
    y, final = ssd_forward(**{**low, **leaves}, return_final_states=True, **run)
    torch.autograd.backward([y, final], [dout.to(y.dtype), dfinal.float()])
    assert y.dtype == dtype
    assert relative_error(y, want_y) <= TOL[dtype], f"{what}: y"
    assert relative_error(final, want_final) <= TOL[dtype], f"{what}: final_states"
    assert set(leaves) == {k for k, g in want.items() if g is not None}
    for k, leaf in leaves.items():
        grad = leaf.grad
        assert grad is not None and grad.dtype == leaf.dtype and not grad.isnan().any(), f"{what}: d{k}"
        err = relative_error(grad, want[k])
        assert err <= GRAD_TOL[dtype], f"{what}: d{k} relative error {err:.2e} vs float64"


@pytest.mark.parametrize("name", list(CONFIGS))
def test_packed_training_in_the_kernels_equals_each_sequence_alone(name, monkeypatch):
    """Every packing config, float32 with every optional input: y, final_states and the gradient of x, dt,
    A, B, C, D, z, dt_bias and initial_states against the float64 oracle, with no fallback."""
    _no_fallback(monkeypatch)
    _check_training(CONFIGS[name], torch.float32, 0, True, name)


@pytest.mark.parametrize(("name", "dtype", "seed", "optional"), [
    ("fused-occ2-acc-kd+chunk-bf16cb-kd", torch.bfloat16, 1, True),
    ("segmented-occ2-acc-kd+chunk-bf16cb-kd", torch.bfloat16, 2, False),
    ("fused+shared", torch.float32, 3, False),
    ("segmented-occ2+chunk-bf16cb-kd", torch.float32, 4, True),
], ids=["fused-bf16-all", "segmented-bf16-none", "shared-f32-none", "segmented-f32-all"])
def test_packed_training_other_seeds_dtypes_and_inputs(name, dtype, seed, optional, monkeypatch):
    """bfloat16, other seeds, and no D, z, dt_bias or initial_states."""
    _no_fallback(monkeypatch)
    _check_training(CONFIGS[name], dtype, seed, optional, f"{name} {dtype} seed {seed}")


@pytest.mark.parametrize("name", ["fused+shared", "segmented-occ2-acc-kd+chunk-bf16cb-kd"])
def test_packed_training_launches_what_the_unpacked_training_does(name, monkeypatch):
    """Forward and backward of a packed batch: the launches of the unpacked batch, whatever the number of
    sequences (the fused state-gradient stage is the one packed rows run)."""
    monkeypatch.setattr(fast_backward, "uses_fused_state_grads", lambda *a, **k: True)
    inp = _grad_inputs(0, True)
    low = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in inp.items()}

    def train(seq_idx):
        x = low["x"].clone().requires_grad_()
        y = ssd_forward(**{**low, "x": x}, chunk_size=GRAD_SHAPE.chunk_size, seq_idx=seq_idx, backend="cpu",
                        config=CONFIGS[name])
        y.sum().backward()

    unpacked = _launched(lambda: train(None))
    assert {"state_grads_fused_kernel", "chunk_bwd_dc_heads_kernel", "chunk_bwd_dx_heads_kernel"} <= set(
        unpacked)
    for lengths in (GRAD_LENGTHS, ([1] * 20 + [80], [100], [99, 1])):
        seq_idx = seq_idx_of(lengths, (0, 0, 0))
        assert _launched(lambda seq_idx=seq_idx: train(seq_idx)) == unpacked


def test_packed_training_takes_the_fused_state_gradients_where_the_taught_would_run(monkeypatch):
    """Where the fast backward would run the taught kernels 1 and 2 (few blocks), a packed batch runs the
    fused state-gradient stage, the one that resets; the unpacked batch keeps the taught kernels."""
    monkeypatch.setattr(fast_backward, "uses_fused_state_grads", lambda *a, **k: False)
    _no_fallback(monkeypatch)
    _check_training(CONFIGS["fused+shared"], torch.float32, 0, True, "taught state stage unpacked")
    inp = _grad_inputs(0, False)
    x = inp["x"].float().requires_grad_()
    low = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in inp.items()}
    unpacked = _launched(lambda: ssd_forward(**{**low, "x": x}, chunk_size=GRAD_SHAPE.chunk_size,
                                             backend="cpu", config=CONFIGS["fused+shared"]).sum().backward())
    assert "state_passing_bwd_kernel" in unpacked and "state_grads_fused_kernel" not in unpacked


def test_the_packed_backward_refuses_the_taught_kernels():
    from mamba2_tutorial.kernels.backward import ssd_backward_taught

    inp = _grad_inputs(0, False)
    b, l, h, p = inp["x"].shape
    nchunks, Q = GRAD_SHAPE.nchunks, GRAD_SHAPE.chunk_size
    zeros = torch.zeros(b, h, nchunks, Q)
    with pytest.raises(ValueError, match="packed rows"):
        ssd_backward_taught(torch.zeros(b, l, h, p), inp["x"], inp["dt"], inp["A"], inp["B"], inp["C"], zeros,
                            zeros, torch.zeros(b, nchunks, h, p, GRAD_SHAPE.dstate), seq_idx=GRAD_SEQ_IDX)


# ----------------------------------------------------------------------------------------------------
# return_varlen_states from the kernels' entering states
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["fused-occ2-acc-kd+chunk-bf16cb-kd",
                                  "segmented-occ2-acc-kd+chunk-bf16cb-kd", "fused+shared"])
def test_varlen_states_in_the_kernels_equal_each_sequence_alone(name, dtype, monkeypatch):
    """Each sequence's final state of a packed row: from sequence 0 (with the initial state) and from
    sequence 1 (without), against the float64 oracle, with the launches of the plain forward (no fallback)."""
    _no_fallback(monkeypatch)
    cfg = CONFIGS[name]
    inp = _grad_inputs(5, True)
    Q = GRAD_SHAPE.chunk_size
    for row, first in ((0, 0), (1, 1)):
        one = {k: v[row:row + 1] if k in ("x", "dt", "B", "C", "z", "initial_states") else v
               for k, v in inp.items()}
        lengths = GRAD_LENGTHS[row]
        seq_idx = seq_idx_of([lengths], (first,))
        cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)
        want_y, want_final, want = ssd_each_sequence(ssd_recurrent, **one, seq_idx=seq_idx,
                                                     cu_seqlens=cu_seqlens, return_final_states=True,
                                                     return_varlen_states=True)
        low = {k: v.to(dtype if k in ("x", "B", "C", "z") else torch.float32) if isinstance(v, torch.Tensor)
               else v for k, v in one.items()}
        y, final, states = ssd_forward(**low, chunk_size=Q, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
                                       return_final_states=True, return_varlen_states=True, backend="cpu",
                                       config=cfg, _poison=True)
        assert states.shape == (len(lengths), *want.shape[1:]) and states.dtype == torch.float32
        for what, got, expected in (("y", y, want_y), ("final_states", final, want_final)):
            assert relative_error(got, expected) <= TOL[dtype], f"{name}: {what}"
        for i in range(len(lengths)):
            err = relative_error(states[i], want[i])
            assert err <= TOL[dtype], f"{name} {dtype}: sequence {i}'s state, relative error {err:.2e}"
        plain = _launched(lambda low=low, seq_idx=seq_idx: ssd_forward(**low, chunk_size=Q, seq_idx=seq_idx,
                                                                         backend="cpu", config=cfg))
        varlen = _launched(lambda low=low, seq_idx=seq_idx, cu=cu_seqlens: ssd_forward(
            **low, chunk_size=Q, seq_idx=seq_idx, cu_seqlens=cu, return_varlen_states=True, backend="cpu",
            config=cfg))
        assert len(varlen) <= len(plain) + 1                   # the kd launch, where the plan stored kd


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
    """``ssd_forward`` on packed rows (the shipped config: the resets inside the forward's and the backward's
    kernels), forward and the gradients of x, dt, A, B, C, D, z and dt_bias: against the float64 oracle
    (every sequence alone), and against ``combined`` (mamba_ssm's ``mamba_chunk_scan_combined``) given the
    same ``seq_idx``, as closely as it agrees with float64 itself."""
    Q = shape.chunk_size
    seq_idx = seq_idx_of(lengths, (0, 0)).to(device)
    kw = make_inputs(shape, seed=4, dtype=torch.float64, D=True, z=True, dt_bias=True, device=device)
    names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias")
    low = {k: (v.to(dtype if k in ("x", "B", "C", "z") else torch.float32) if k in names else v)
           for k, v in kw.items()}
    gen = torch.Generator(device=device).manual_seed(5)
    dout = torch.randn(shape.batch, shape.seqlen, shape.nheads, shape.headdim, device=device, generator=gen)

    def run(forward, inputs, **options):
        leaves = {k: inputs[k].detach().clone().requires_grad_() for k in names}
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
    """:func:`packed_agreement` on a GPU, against mamba_ssm's own seq_idx path: the packed forward and
    backward in the kernels."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    combined = _mamba_chunk_scan_combined()
    if combined is None:
        pytest.skip("mamba_ssm does not import here")
    packed_agreement(GPU_SHAPE, GPU_LENGTHS, dtype, "cuda", "gpu", combined)
