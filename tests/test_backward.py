"""The SSD backward: the cuTile backward kernels against autograd through the float64 reference.

``ssd_forward`` and ``ssd_forward_taught`` are differentiable. Their gradients, for every input (x, dt through
dt_bias / softplus / dt_limit, A, B, C, D, z, initial_states), must match those of autograd through
``reference.ssd_chunked`` in float64, on random problems with a distinct size in every dimension, ragged last
chunks, groups, several seeds, every dtype and every optional input; with every intermediate poisoned with NaN
first. On the CPU the kernels run on the tile executor; the tests marked ``gpu`` run them on a GPU, and also
against mamba_ssm's Triton backward where it is installed.
"""

from __future__ import annotations

import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.kernels.backward import dt_backward, gate_backward
from mamba2_tutorial.kernels.forward import ssd_forward_taught
from mamba2_tutorial.lessons.checks import SSD_TENSOR_ARGS as INPUTS
from mamba2_tutorial.lessons.checks import relative_error, ssd_gradients
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: relative L2 error vs float64, as the forward's (tests/test_fast_path.py). A, dt_bias and D are sums over
#: the whole batch and sequence with cancellation: in bf16 and fp16 they get a wider bound.
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}
SUMMED = {"A": 3.0, "dt_bias": 3.0, "D": 3.0}
FORWARDS = {"fast": ssd_forward, "taught": ssd_forward_taught}

#: (b, l, h, p, g, n, Q): every dimension distinct, ragged last chunks, groups
PROBLEMS = [(2, 150, 4, 32, 2, 48, 64), (1, 211, 6, 24, 3, 40, 32), (3, 97, 2, 40, 1, 56, 64)]


def _problem(dims, dtype, seed, device="cpu", **extras):
    b, l, h, p, g, n, Q = dims
    want = dict(D=True, z=True, dt_bias=True, initial_states=True) | extras
    inputs = make_inputs(SSDShape(b, l, h, p, g, n, Q), seed=seed, dtype=dtype, device=device, **want)
    gen = torch.Generator().manual_seed(1000 + seed)
    dout = torch.randn(b, l, h, p, generator=gen).to(device=device, dtype=dtype)
    dfinal = torch.randn(b, h, p, n, generator=gen).to(device)
    return inputs, Q, dout, dfinal


def _grads(fn, inputs, Q, dout, dfinal, dtype=None, **kw):
    return ssd_gradients(fn, inputs, Q, dout, dfinal, dtype=dtype, **kw)


def _check_grads(got, want, dtype, what):
    assert got.keys() == want.keys()
    for name, g in got.items():
        if want[name] is None:   # an input the loss does not depend on (z and D, for final_states alone)
            assert g is None or not g.any(), f"{what}: d{name} should be zero"
            continue
        assert g is not None, f"{what}: no gradient for {name}"
        assert not g.isnan().any(), f"{what}: the gradient of {name} has NaN (an element never written?)"
        err = relative_error(g, want[name])
        bound = TOL[dtype] * (SUMMED.get(name, 1.0) if dtype != torch.float32 else 1.0)
        assert err <= bound, (f"{what}: d{name} relative error {err:.2e} > {bound:.1e} "
                              "against float64 autograd")


def _run(path, dims, dtype, seed, backend="cpu", device="cpu", dout=True, dfinal=True, **extras):
    inputs, Q, d_out, d_final = _problem(dims, dtype, seed, device, **extras)
    d_out, d_final = (d_out if dout else None), (d_final if dfinal else None)
    want = _grads(ref.ssd_chunked, inputs, Q, d_out, d_final, dtype=torch.float64)
    got = _grads(FORWARDS[path], inputs, Q, d_out, d_final, backend=backend, _poison=True)
    for name, g in got.items():
        assert g is None or (g.dtype == inputs[name].dtype and g.shape == inputs[name].shape), name
    _check_grads(got, want, dtype, f"{path} {dims} {dtype} seed {seed}")
    return got


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("path", list(FORWARDS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradients_match_float64_autograd(path, seed, dtype):
    _run(path, PROBLEMS[seed], dtype, seed)


@pytest.mark.parametrize("extras", [
    dict(D=False, z=False, dt_bias=False, initial_states=False),   # the bare SSD
    dict(z=False),
    dict(initial_states=False, dt_bias=False),
], ids=["bare", "no-z", "no-initial-states"])
def test_gradients_without_the_optional_inputs(extras):
    _run("fast", PROBLEMS[1], torch.float32, seed=4, **extras)


def test_gradients_with_D_per_channel_and_a_clamping_dt_limit():
    """D (h, p), and a dt_limit that clamps some dt at both ends: the clamp passes no gradient there."""
    inputs, Q, dout, dfinal = _problem(PROBLEMS[0], torch.float32, seed=5)
    h, p = inputs["x"].shape[2:]
    inputs["D"] = torch.randn(h, p, generator=torch.Generator().manual_seed(5))
    inputs["dt_limit"] = (0.005, 0.05)
    dt_proc = torch.nn.functional.softplus(inputs["dt"] + inputs["dt_bias"])
    clamped = ((dt_proc < 0.005) | (dt_proc > 0.05)).float().mean()
    assert 0.1 < clamped < 0.9, "the limit should clamp some dt, not all"
    want = _grads(ref.ssd_chunked, inputs, Q, dout, dfinal, dtype=torch.float64)
    got = _grads(ssd_forward, inputs, Q, dout, dfinal, backend="cpu", _poison=True)
    _check_grads(got, want, torch.float32, "D (h, p), dt_limit")


@pytest.mark.parametrize("path", list(FORWARDS))
def test_dD_is_summed_before_rounding(path):
    """dD = sum dy ∘ x over every position: a sum with heavy cancellation, so rounding each dy = dout ∘
    silu(z) to bfloat16 first would cost about 1e-3 of relative error however long the sum. Summed from the
    float32 dy of the gate's backward, it is as exact as mamba_ssm's, about 1e-7."""
    inputs, Q, dout, dfinal = _problem(PROBLEMS[1], torch.bfloat16, seed=8)
    want = _grads(ref.ssd_chunked, inputs, Q, dout, dfinal, dtype=torch.float64)
    got = _grads(FORWARDS[path], inputs, Q, dout, dfinal, backend="cpu")
    assert relative_error(got["D"], want["D"]) <= 1e-5
    assert relative_error(got["x"], want["x"]) <= TOL[torch.bfloat16]


@pytest.mark.parametrize("which", ["out", "final_states"])
def test_only_one_output_used(which):
    """A loss on ``out`` alone or on ``final_states`` alone: the other output's gradient is None."""
    _run("taught", PROBLEMS[2], torch.float32, seed=6, dout=which == "out", dfinal=which == "final_states")


def test_no_grad_runs_the_plain_forward():
    inputs, Q, _, _ = _problem(PROBLEMS[2], torch.float32, seed=7)
    x = inputs["x"].requires_grad_()
    with torch.no_grad():
        out = ssd_forward(**inputs, chunk_size=Q, backend="cpu")
    assert out.grad_fn is None
    out = ssd_forward(**inputs, chunk_size=Q, backend="cpu")
    assert out.grad_fn is not None and x.requires_grad
    plain = ssd_forward(**{k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()},
                        chunk_size=Q, backend="cpu")
    # the training forward applies the gate after the scan: one more rounding, nothing else
    assert relative_error(out.detach(), plain) <= 1e-6


def test_gate_and_dt_backward_match_autograd():
    gen = torch.Generator().manual_seed(8)
    y, z, dout = (torch.randn(5, 7, dtype=torch.float64, generator=gen) for _ in range(3))
    z.requires_grad_(), y.requires_grad_()
    (y * torch.nn.functional.silu(z) * dout).sum().backward()
    dy, dz = gate_backward(dout, y.detach(), z.detach())
    assert torch.allclose(dy.double(), y.grad, rtol=1e-6) and torch.allclose(dz.double(), z.grad, rtol=1e-6)

    dt = (torch.randn(3, 11, 4, dtype=torch.float64, generator=gen) * 8).requires_grad_()  # some above 20
    bias = torch.randn(4, dtype=torch.float64, generator=gen).requires_grad_()
    ddt = torch.randn(3, 11, 4, dtype=torch.float64, generator=gen)
    proc, _ = ref.chunk_cumsum(dt, -torch.ones(4, dtype=torch.float64), 11, dt_bias=bias, dt_softplus=True,
                               dt_limit=(0.1, 15.0))                                  # (b, h, 1 chunk, 11)
    (proc.squeeze(2).permute(0, 2, 1) * ddt).sum().backward()
    got_dt, got_bias = dt_backward(ddt, dt.detach(), bias.detach(), True, (0.1, 15.0))
    assert torch.allclose(got_dt.double(), dt.grad, rtol=1e-5, atol=1e-12)
    assert torch.allclose(got_bias.double(), bias.grad, rtol=1e-5)


# ----------------------------------------------------------------------------------------------------
# on a GPU
# ----------------------------------------------------------------------------------------------------
GPU_PROBLEMS = [(2, 700, 8, 64, 2, 128, 64), (1, 1300, 8, 64, 1, 128, 256), (3, 515, 6, 48, 3, 80, 128)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("path", list(FORWARDS))
@pytest.mark.parametrize("problem", range(len(GPU_PROBLEMS)))
def test_gradients_on_the_gpu(problem, path, dtype):
    _run(path, GPU_PROBLEMS[problem], dtype, seed=problem, backend="gpu", device="cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float32), ids=lambda d: str(d).replace("torch.", ""))
def test_gradients_match_mamba_ssm(dtype):
    """Against mamba_ssm's Triton backward (``mamba_chunk_scan_combined``), where it is installed: both are
    compared with float64 autograd, and ours must be about as close as theirs."""
    from mamba2_tutorial.perf.bench import import_mamba_chunk_scan_combined

    try:
        mamba = import_mamba_chunk_scan_combined()
    except ImportError as exc:
        pytest.skip(f"mamba_ssm is not installed: {exc}")
    dims = GPU_PROBLEMS[1]
    inputs, Q, dout, dfinal = _problem(dims, dtype, seed=3, device="cuda")
    want = _grads(ref.ssd_chunked, inputs, Q, dout, dfinal, dtype=torch.float64)
    ours = _grads(ssd_forward, inputs, Q, dout, dfinal, backend="gpu")
    theirs = _grads(mamba, inputs, Q, dout, dfinal)
    for name in INPUTS:
        e_ours, e_theirs = relative_error(ours[name], want[name]), relative_error(theirs[name], want[name])
        assert e_ours <= max(2 * e_theirs, 1e-5), f"d{name}: ours {e_ours:.2e}, mamba_ssm's {e_theirs:.2e}"
