"""The three taught SSD kernels and ``ssd_forward_taught`` on the CPU tile executor, against the float64
reference (the fast path's kernels and configs: ``tests/test_fast_path.py``).

Each kernel runs through its host wrapper (``chunk_state_fwd``, ``state_passing_fwd``, ``chunk_scan_fwd``)
and is compared with the reference step it replaces (``mamba2_tutorial.reference``), computed in float64.
Shapes have a distinct size in every dimension, ragged last chunks, g > 1 and p, n that are not powers of two;
every output buffer is filled with NaN before the launch (``_poison=True``), so an unwritten element fails.
"""

from __future__ import annotations

import math

import pytest
import torch

import mamba2_tutorial.runtime.backends as launch_module
from mamba2_tutorial import reference as ref
from mamba2_tutorial.fast.forward import ssd_forward as ssd_forward_fast
from mamba2_tutorial.kernels.chunk_scan import chunk_scan_fwd
from mamba2_tutorial.kernels.chunk_state import chunk_state_fwd
from mamba2_tutorial.kernels.forward import ssd_forward_taught as ssd_forward
from mamba2_tutorial.kernels.forward import ssd_plan
from mamba2_tutorial.kernels.state_passing import state_passing_fwd
from mamba2_tutorial.lessons.checks import assert_close, relative_error
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs

# (b, l, h, p, g, n, Q): every dim distinct where possible, l mostly not a multiple of Q
CASES = {
    "ragged-g2": (2, 37, 6, 5, 2, 7, 16),
    "ragged-g1": (3, 29, 4, 6, 1, 5, 8),
    "g3-odd-n": (2, 45, 6, 4, 3, 9, 16),
    "one-chunk-g=h": (1, 16, 2, 3, 2, 4, 16),
    "l<Q-wide-n": (2, 7, 3, 9, 1, 33, 32),      # a single ragged chunk; n > 32 spans 2 state tiles in fp32
    "wide-p": (1, 70, 4, 40, 2, 6, 32),         # p > 32 spans 2 head-dim tiles in fp32
    "l=1": (1, 1, 2, 2, 1, 3, 4),
}
FP32_RTOL = 1e-4  # relative L2 error vs float64 (issue 4); elementwise checks use assert_close's defaults
LOW_RTOL = 1e-2


@pytest.fixture
def no_kernel_may_run(monkeypatch):
    import cuda.tile as ct

    def fail(*args, **kwargs):
        raise AssertionError("a kernel was launched before the bad input was rejected")

    monkeypatch.setattr(launch_module, "launch", fail)
    monkeypatch.setattr(ct, "launch", fail)


def _shape(case) -> SSDShape:
    b, l, h, p, g, n, Q = CASES[case] if isinstance(case, str) else case
    return SSDShape(b, l, h, p, g, n, Q, str(case))


def _f64(inputs: dict) -> dict:
    return {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def _random_case(seed: int):
    """A random problem with distinct, mostly non-power-of-two sizes (drawn per seed)."""
    gen = torch.Generator().manual_seed(1000 + seed)

    def draw(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    g = draw(1, 3)
    h = g * draw(1, 3)
    Q = 2 ** draw(2, 5)
    return (draw(1, 3), draw(1, 90), h, draw(1, 20), g, draw(1, 20), Q)


# ----------------------------------------------------------------------------------------------------
# kernel 1: dt preprocessing + cumsum + chunk states
# ----------------------------------------------------------------------------------------------------
DT_OPTIONS = {
    "plain": {},
    "bias-softplus": {"dt_bias": True, "dt_softplus": True},
    "limit": {"dt_limit": (0.01, 0.05)},
    "bias-softplus-limit": {"dt_bias": True, "dt_softplus": True, "dt_limit": (0.005, 0.08)},
}


def _dt_kwargs(inputs: dict, option: str) -> dict:
    opts = DT_OPTIONS[option]
    kw = {}
    if opts.get("dt_bias"):
        kw["dt_bias"] = inputs["dt_bias"]
    if opts.get("dt_softplus"):
        kw["dt_softplus"] = True
    if "dt_limit" in opts:
        kw["dt_limit"] = opts["dt_limit"]
    return kw


def _check_chunk_state(shape: SSDShape, option: str, seed: int, dtype=torch.float32):
    inputs = make_inputs(shape, seed=seed, dtype=dtype, dt_bias=True)
    if not DT_OPTIONS[option].get("dt_bias"):  # raw dt already positive
        inputs = make_inputs(shape, seed=seed, dtype=dtype)
    kw = _dt_kwargs(inputs, option)
    x, dt, A, B = inputs["x"], inputs["dt"], inputs["A"], inputs["B"]
    Q = shape.chunk_size
    dt_out, dA_cumsum, states = chunk_state_fwd(x, dt, A, B, Q, **kw, backend="cpu", _poison=True)

    k64 = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    r_dt, r_dA = ref.chunk_cumsum(dt.double(), A.double(), Q, **k64)
    r_states = ref.chunk_state(x.double(), B.double(), r_dt, r_dA)
    nchunks = math.ceil(shape.seqlen / Q)
    assert dt_out.shape == dA_cumsum.shape == (shape.batch, shape.nheads, nchunks, Q)
    assert states.shape == (shape.batch, nchunks, shape.nheads, shape.headdim, shape.dstate)
    assert dt_out.dtype == dA_cumsum.dtype == states.dtype == torch.float32
    assert_close(dt_out, r_dt, name="dt_out")
    assert_close(dA_cumsum, r_dA, name="dA_cumsum")
    if dtype == torch.float32:
        assert_close(states, r_states, name="states")
    assert relative_error(states, r_states) <= (FP32_RTOL if dtype == torch.float32 else LOW_RTOL)
    # past the sequence end dt is exactly 0 and the cumsum stays flat
    tail = nchunks * Q - shape.seqlen
    if tail:
        assert torch.all(dt_out[:, :, -1, Q - tail:] == 0)
        assert torch.all(dA_cumsum[:, :, -1, Q - tail:] == dA_cumsum[:, :, -1, Q - tail - 1: Q - tail])


@pytest.mark.parametrize("case", list(CASES))
def test_chunk_state_matches_reference(case):
    _check_chunk_state(_shape(case), "bias-softplus", seed=0)


@pytest.mark.parametrize("option", list(DT_OPTIONS))
def test_chunk_state_dt_options(option):
    _check_chunk_state(_shape("ragged-g2"), option, seed=1)


def test_chunk_state_clamps_negative_dt_like_mamba_ssm():
    # without softplus a negative raw dt is clamped to dt_limit[0] = 0 (mamba_ssm always clamps)
    shape = _shape("ragged-g1")
    inputs = make_inputs(shape, seed=3)
    dt = inputs["dt"] - 0.03  # some entries negative
    assert (dt < 0).any()
    dt_out, _, _ = chunk_state_fwd(inputs["x"], dt, inputs["A"], inputs["B"], shape.chunk_size, backend="cpu")
    r_dt, _ = ref.chunk_cumsum(dt.double(), inputs["A"].double(), shape.chunk_size)
    assert_close(dt_out, r_dt, name="dt_out")
    assert torch.all(dt_out >= 0)


def test_chunk_state_softplus_is_accurate_for_very_negative_dt():
    # softplus(u) ~ e^u for u << 0: log(1 + e^u) computed naively in float32 would round to 0
    shape = _shape("one-chunk-g=h")
    inputs = make_inputs(shape, seed=4)
    dt = torch.full_like(inputs["dt"], -25.0)
    dt_out, _, _ = chunk_state_fwd(inputs["x"], dt, inputs["A"], inputs["B"], shape.chunk_size,
                                   dt_softplus=True, backend="cpu")
    assert_close(dt_out, torch.full_like(dt_out, math.exp(-25.0)), name="dt_out")


# ----------------------------------------------------------------------------------------------------
# kernel 2: state passing
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("with_initial", [False, True], ids=["zero-start", "initial-states"])
@pytest.mark.parametrize("case", ["ragged-g2", "g3-odd-n", "l<Q-wide-n", "wide-p", "l=1"])
def test_state_passing_matches_reference(case, with_initial):
    shape = _shape(case)
    b, h, p, n, Q = shape.batch, shape.nheads, shape.headdim, shape.dstate, shape.chunk_size
    nchunks = math.ceil(shape.seqlen / Q)
    gen = torch.Generator().manual_seed(sum(CASES[case]))
    states = torch.randn(b, nchunks, h, p, n, generator=gen)
    dA_cumsum = -(0.1 * torch.rand(b, h, nchunks, Q, generator=gen)).cumsum(-1)
    initial = torch.randn(b, h, p, n, generator=gen) if with_initial else None
    chunk_init, final = state_passing_fwd(states, dA_cumsum, initial, backend="cpu", _poison=True)
    r_init, r_final = ref.state_passing(states.double(), dA_cumsum.double(),
                                        None if initial is None else initial.double())
    assert chunk_init.shape == states.shape and final.shape == (b, h, p, n)
    assert chunk_init.dtype == final.dtype == torch.float32
    assert_close(chunk_init, r_init, name="chunk_init_states")
    assert_close(final, r_final, name="final_states")


def test_state_passing_narrow_output_is_the_rounded_float32_result():
    shape = _shape("g3-odd-n")
    b, h, p, n, Q = shape.batch, shape.nheads, shape.headdim, shape.dstate, shape.chunk_size
    nchunks = math.ceil(shape.seqlen / Q)
    gen = torch.Generator().manual_seed(21)
    states = torch.randn(b, nchunks, h, p, n, generator=gen)
    dA_cumsum = -(0.1 * torch.rand(b, h, nchunks, Q, generator=gen)).cumsum(-1)
    wide, final = state_passing_fwd(states, dA_cumsum, backend="cpu")
    narrow, final2 = state_passing_fwd(states, dA_cumsum, out_dtype=torch.bfloat16, backend="cpu",
                                       _poison=True)
    assert narrow.dtype == torch.bfloat16 and final2.dtype == torch.float32
    assert torch.equal(narrow, wide.to(torch.bfloat16)) and torch.equal(final, final2)


# ----------------------------------------------------------------------------------------------------
# kernel 3: chunk scan
# ----------------------------------------------------------------------------------------------------
def _check_chunk_scan(shape: SSDShape, D_kind: str, with_z: bool, seed: int, dtype=torch.float32):
    inputs = make_inputs(shape, seed=seed, dtype=dtype, D=True, z=True, dt_bias=True, initial_states=True)
    i64 = _f64(inputs)
    Q = shape.chunk_size
    # the reference's steps 1-3 in float64 make the kernel's inputs
    r_dt, r_dA = ref.chunk_cumsum(i64["dt"], i64["A"], Q, dt_bias=i64["dt_bias"], dt_softplus=True)
    r_states = ref.chunk_state(i64["x"], i64["B"], r_dt, r_dA)
    r_init, _ = ref.state_passing(r_states, r_dA, i64["initial_states"])
    D_hp = inputs["D"][:, None] + 0.05 * torch.arange(shape.headdim)
    D = {"none": None, "h": inputs["D"], "hp": D_hp}[D_kind]
    z = inputs["z"] if with_z else None
    y = chunk_scan_fwd(inputs["x"], r_dt.float(), r_dA.float(), inputs["C"], inputs["B"], r_init.float(),
                       D=D, z=z, backend="cpu", _poison=True)
    r_y = ref.chunk_scan(i64["x"], r_dt, r_dA, i64["C"], i64["B"], r_init,
                         D=None if D is None else D.double(), z=None if z is None else z.double())
    assert y.shape == inputs["x"].shape and y.dtype == dtype
    if dtype == torch.float32:
        assert_close(y, r_y, name="y")
    assert relative_error(y, r_y) <= (FP32_RTOL if dtype == torch.float32 else LOW_RTOL)


@pytest.mark.parametrize("case", list(CASES))
def test_chunk_scan_matches_reference(case):
    _check_chunk_scan(_shape(case), "h", with_z=True, seed=0)


@pytest.mark.parametrize("D_kind", ["none", "h", "hp"])
@pytest.mark.parametrize("with_z", [False, True], ids=["no-z", "z"])
def test_chunk_scan_skip_and_gate(D_kind, with_z):
    _check_chunk_scan(_shape("g3-odd-n"), D_kind, with_z, seed=5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_kernels_low_precision(dtype):
    _check_chunk_state(_shape("wide-p"), "bias-softplus", seed=6, dtype=dtype)
    _check_chunk_scan(_shape("wide-p"), "hp", with_z=True, seed=6, dtype=dtype)


# ----------------------------------------------------------------------------------------------------
# ssd_forward: the three kernels together vs the float64 chunked reference
# ----------------------------------------------------------------------------------------------------
def _check_forward(shape: SSDShape, dtype, seed, *, D=True, z=True, dt_bias=True, initial_states=True,
                   dt_limit=None, D_per_channel=False):
    inputs = make_inputs(shape, seed=seed, dtype=dtype, D=D, z=z, dt_bias=dt_bias,
                         initial_states=initial_states)
    if D_per_channel:
        inputs["D"] = inputs["D"][:, None] * torch.linspace(0.5, 1.5, shape.headdim)
    if dt_limit is not None:
        inputs["dt_limit"] = dt_limit
    out, final = ssd_forward(**inputs, chunk_size=shape.chunk_size, return_final_states=True, backend="cpu",
                             _poison=True)
    r_out, r_final = ref.ssd_chunked(**_f64(inputs), chunk_size=shape.chunk_size, return_final_states=True)
    assert out.shape == inputs["x"].shape and out.dtype == dtype
    assert final.shape == (shape.batch, shape.nheads, shape.headdim, shape.dstate)
    assert final.dtype == torch.float32
    tol = FP32_RTOL if dtype == torch.float32 else LOW_RTOL
    err_out, err_final = relative_error(out, r_out), relative_error(final, r_final)
    assert err_out <= tol, f"{shape} {dtype}: relative error of out {err_out:.2e} > {tol:.0e}"
    assert err_final <= tol, f"{shape} {dtype}: relative error of final_states {err_final:.2e} > {tol:.0e}"
    if dtype == torch.float32:
        assert_close(out, r_out, name="out")
        assert_close(final, r_final, name="final_states")
    return err_out


@pytest.mark.parametrize("case", list(CASES))
def test_ssd_forward_fp32_matches_float64_reference(case):
    _check_forward(_shape(case), torch.float32, seed=7)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ssd_forward_random_shapes(seed):
    case = _random_case(seed)
    opts = [dict(), dict(z=False, D_per_channel=True), dict(dt_bias=False, initial_states=False, D=False),
            dict(dt_limit=(0.002, 0.06))][seed % 4]
    _check_forward(_shape(case), torch.float32, seed=seed, **opts)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("case", ["ragged-g2", "l<Q-wide-n"])
def test_ssd_forward_low_precision(case, dtype):
    _check_forward(_shape(case), dtype, seed=8, D_per_channel=True)


def test_ssd_forward_matches_the_recurrence():
    # a second, independent form: the step-by-step recurrence in float64
    shape = _shape("g3-odd-n")
    inputs = make_inputs(shape, seed=9, z=True, dt_bias=True, initial_states=True)
    out, final = ssd_forward(**inputs, chunk_size=shape.chunk_size, return_final_states=True, backend="cpu")
    r_out, r_final = ref.ssd_recurrent(**_f64(inputs), return_final_states=True)
    assert relative_error(out, r_out) <= FP32_RTOL
    assert relative_error(final, r_final) <= FP32_RTOL


def test_ssd_forward_return_convention_and_noncontiguous_inputs():
    shape = _shape("ragged-g2")
    inputs = make_inputs(shape, seed=10)
    out = ssd_forward(**inputs, chunk_size=shape.chunk_size, backend="cpu")
    assert isinstance(out, torch.Tensor)  # no tuple unless return_final_states, as mamba_ssm
    # x as a strided view (every other column of a wider tensor) gives the same result
    wide = torch.stack([inputs["x"], torch.full_like(inputs["x"], 1e6)], dim=-1)
    strided = dict(inputs, x=wide[..., 0])
    assert not strided["x"].is_contiguous()
    out2 = ssd_forward(**strided, chunk_size=shape.chunk_size, backend="cpu")
    assert torch.equal(out, out2)


def test_ssd_forward_reads_views_in_place():
    # as in the Mamba2 block: x, B and C are slices of one projection (last dim dense, other strides larger);
    # the kernels read them in place, and the result equals the one from contiguous copies
    shape = _shape("g3-odd-n")
    b, l, h, p, g, n = shape.batch, shape.seqlen, shape.nheads, shape.headdim, shape.ngroups, shape.dstate
    inputs = make_inputs(shape, seed=13, z=True, initial_states=True)
    xBC = torch.cat([inputs["x"].reshape(b, l, h * p), inputs["B"].reshape(b, l, g * n),
                     inputs["C"].reshape(b, l, g * n)], dim=-1)
    split = h * p + g * n
    views = dict(inputs, x=xBC[..., : h * p].view(b, l, h, p),
                 B=xBC[..., h * p: split].view(b, l, g, n), C=xBC[..., split:].view(b, l, g, n))
    assert not any(views[k].is_contiguous() for k in ("x", "B", "C"))
    expected = ssd_forward(**inputs, chunk_size=shape.chunk_size, backend="cpu")
    got = ssd_forward(**views, chunk_size=shape.chunk_size, backend="cpu", _poison=True)
    assert torch.equal(got, expected)


def test_ssd_forward_block_order_does_not_matter(monkeypatch):
    # the CPU executor runs blocks in order by default; a kernel that relied on it (one block reading what
    # another wrote) would change its result when the order is reversed
    shape = _shape("wide-p")
    inputs = make_inputs(shape, seed=11, z=True, initial_states=True)
    expected = ssd_forward(**inputs, chunk_size=shape.chunk_size, backend="cpu")
    real_launch = launch_module.launch

    def reversed_launch(kernel, grid, args, *, backend="auto", **kw):
        return real_launch(kernel, grid, args, backend=backend, block_order="reversed")

    monkeypatch.setattr(launch_module, "launch", reversed_launch)
    assert torch.equal(ssd_forward(**inputs, chunk_size=shape.chunk_size, backend="cpu"), expected)


def test_ssd_forward_rejects_an_empty_sequence(no_kernel_may_run):
    b, l, h, p, g, n = 2, 0, 4, 3, 2, 5
    x, dt = torch.zeros(b, l, h, p), torch.zeros(b, l, h)
    B, C = torch.zeros(b, l, g, n), torch.zeros(b, l, g, n)
    with pytest.raises(ValueError, match="l = 0"):
        ssd_forward(x, dt, -torch.ones(h), B, C, 16, backend="cpu")


def test_ssd_plan_covers_every_output_tile():
    for dims in [(8, 4096, 80, 64, 1, 128, 256), CASES["wide-p"], CASES["l<Q-wide-n"]]:
        b, l, h, p, g, n, Q = dims
        for dtype in (torch.bfloat16, torch.float32):
            plan = ssd_plan(b, l, h, p, g, n, Q, dtype)
            nchunks = math.ceil(l / Q)
            k1, k2, k3 = plan["chunk_state"], plan["state_passing"], plan["chunk_scan"]
            assert k1.grid == (math.ceil(p / k1.tiles["TP"]) * math.ceil(n / k1.tiles["TN"]), b * nchunks, h)
            assert k2.grid == (math.ceil(p / k2.tiles["TP"]) * math.ceil(n / k2.tiles["TN"]), b, h)
            m_tiles, p_tiles = Q // k3.tiles["TM"], math.ceil(p / k3.tiles["TP"])
            assert k3.grid == (m_tiles * p_tiles, b * nchunks, h)
            assert k3.tiles["NS"] >= n and all(v & (v - 1) == 0 for v in k3.tiles.values())
    assert ssd_plan(8, 4096, 80, 64, 1, 128, 256)["chunk_scan"].grid == (4, 128, 80)


# ----------------------------------------------------------------------------------------------------
# bad input: a clear error before any kernel runs
# ----------------------------------------------------------------------------------------------------
def _bad(inputs, **changes):
    return {**inputs, **changes}


BAD_INPUTS = {
    "x-3d": (lambda i: _bad(i, x=i["x"][..., 0]), ValueError, r"x must have shape \(b, l, h, p\)"),
    "B-dtype": (lambda i: _bad(i, B=i["B"].half()), TypeError, "B has dtype"),
    "C-shape": (lambda i: _bad(i, C=i["C"][:, :, :, :-1]), ValueError, "C must have shape"),
    "g-not-dividing-h": (lambda i: _bad(i, B=i["B"][:, :, :1].expand(-1, -1, 4, -1).contiguous(),
                                        C=i["C"][:, :, :1].expand(-1, -1, 4, -1).contiguous()),
                         ValueError, "divisible by ngroups"),
    "D-shape": (lambda i: _bad(i, D=i["D"][:-1]), ValueError, "D must have shape"),
    "A-positive": (lambda i: _bad(i, A=i["A"].clone().index_fill_(0, torch.tensor([1]), 0.25)), ValueError,
                   r"A must be <= 0 in every head .* A\[1\] = 0.25"),
    "initial-states-shape": (lambda i: _bad(i, initial_states=torch.zeros(2, 6, 5, 8)), ValueError,
                             "initial_states must have shape"),
    "x-float64": (lambda i: {k: v.double() if k in ("x", "B", "C") else v for k, v in i.items()}, TypeError,
                  "float32, float16 or bfloat16"),
    "dt-limit": (lambda i: _bad(i, dt_limit=(1.0, 0.1)), ValueError, "dt_limit"),
}


FORWARDS = {"taught": ssd_forward, "fast": ssd_forward_fast}


@pytest.mark.parametrize("forward", list(FORWARDS))
@pytest.mark.parametrize("bad", list(BAD_INPUTS))
def test_bad_input_fails_before_any_kernel(bad, forward, no_kernel_may_run):
    make_bad, error, message = BAD_INPUTS[bad]
    inputs = make_inputs(_shape("ragged-g2"), seed=0, D=True)
    with pytest.raises(error, match=message):
        FORWARDS[forward](**make_bad(inputs), chunk_size=16, backend="cpu")


@pytest.mark.parametrize("chunk_size, error, message", [
    (24, ValueError, "power of two"), (0, ValueError, "chunk_size"), (16.0, TypeError, "chunk_size"),
])
@pytest.mark.parametrize("forward", list(FORWARDS))
def test_bad_chunk_size(chunk_size, error, message, forward, no_kernel_may_run):
    inputs = make_inputs(_shape("ragged-g2"), seed=0)
    with pytest.raises(error, match=message):
        FORWARDS[forward](**inputs, chunk_size=chunk_size, backend="cpu")


@pytest.mark.parametrize("forward", list(FORWARDS))
def test_bad_backend(forward, no_kernel_may_run):
    inputs = make_inputs(_shape("ragged-g2"), seed=0)
    with pytest.raises(ValueError, match="backend"):
        FORWARDS[forward](**inputs, chunk_size=16, backend="tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA tensors"):
            FORWARDS[forward](**inputs, chunk_size=16, backend="gpu")


def test_wrappers_check_their_inputs(no_kernel_may_run):
    shape = _shape("ragged-g2")
    inputs = make_inputs(shape, seed=0)
    b, l, h, p, g, n, Q = CASES["ragged-g2"]
    nchunks = math.ceil(l / Q)
    with pytest.raises(ValueError, match="dA_cumsum must have shape"):
        state_passing_fwd(torch.zeros(b, nchunks, h, p, n), torch.zeros(b, h + 1, nchunks, Q), backend="cpu")
    with pytest.raises(TypeError, match="states must be a float32"):
        state_passing_fwd(torch.zeros(b, nchunks, h, p, n).double(), torch.zeros(b, h, nchunks, Q))
    with pytest.raises(ValueError, match="chunk_init_states must have shape"):
        chunk_scan_fwd(inputs["x"], torch.zeros(b, h, nchunks, Q), torch.zeros(b, h, nchunks, Q), inputs["C"],
                       inputs["B"], torch.zeros(b, nchunks, h, p, n + 1), backend="cpu")
    with pytest.raises(ValueError, match="nchunks"):
        chunk_scan_fwd(inputs["x"], torch.zeros(b, h, nchunks + 1, Q), torch.zeros(b, h, nchunks + 1, Q),
                       inputs["C"], inputs["B"], torch.zeros(b, nchunks + 1, h, p, n), backend="cpu")
    with pytest.raises(ValueError, match="power of two"):
        chunk_state_fwd(inputs["x"], inputs["dt"], inputs["A"], inputs["B"], 12, backend="cpu")


def test_a_changed_in_place_is_checked_again(no_kernel_may_run):
    """A parameter updated in place (an optimizer step) bumps its version: the A <= 0 check runs again."""
    inputs = make_inputs(_shape("ragged-g2"), seed=0)
    A = inputs["A"]
    with pytest.raises(AssertionError, match="a kernel was launched"):  # A <= 0: validation passes, a launch
        ssd_forward_fast(**inputs, chunk_size=16, backend="cpu")
    A.add_(20.0)
    with pytest.raises(ValueError, match="A must be <= 0"):
        ssd_forward_fast(**inputs, chunk_size=16, backend="cpu")
