"""The reference ladder against an independent float64 implementation.

``independent_ssd`` below is written differently from the library on purpose: NumPy, explicit Python loops
over time, decays as running PRODUCTS of exp(dt·A) (never a sum of logs, never a segsum), and the full (l × l)
SSD matrix M materialized per (batch, head). The library's three forms must agree with it to 1e-9 relative
error in float64 on random cases (random sizes drawn per seed, ragged lengths, g > 1, odd p and n, every
option).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mamba2_tutorial.lessons.checks import assert_close, relative_error
from mamba2_tutorial.reference import (
    chunk_cumsum,
    chunk_scan,
    chunk_state,
    segsum,
    segsum_naive,
    ssd_chunked,
    ssd_decode_step,
    ssd_quadratic,
    ssd_recurrent,
    state_passing,
)

FORMS = ("recurrent", "quadratic", "chunked")


# ----------------------------------------------------------------------------------------------------
# the independent float64 implementation
# ----------------------------------------------------------------------------------------------------
def _np(t):
    return None if t is None else t.detach().to(torch.float64).cpu().numpy()


def independent_dt(dt, dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf)):
    dt = np.array(dt, dtype=np.float64)
    if dt_bias is not None:
        dt = dt + dt_bias
    if dt_softplus:
        # mamba_ssm's thresholded softplus: log(1 + e^v) for v <= 20, v itself above
        dt = np.where(dt <= 20.0, np.log1p(np.exp(np.minimum(dt, 20.0))), dt)
    return np.minimum(np.maximum(dt, dt_limit[0]), dt_limit[1])


def independent_ssd(x, dt, A, B, C, *, D=None, z=None, dt_bias=None, initial_states=None, dt_softplus=False,
                    dt_limit=(0.0, math.inf)):
    """Returns (y, final_state, M) in float64 NumPy; M is (b, h, l, l) including dt_j."""
    x, A, B, C = _np(x), _np(A), _np(B), _np(C)
    D, z, dt_bias, s0 = _np(D), _np(z), _np(dt_bias), _np(initial_states)
    dt = independent_dt(_np(dt), dt_bias, dt_softplus, dt_limit)
    b, l, h, p = x.shape
    g = B.shape[2]
    group_of = [i // (h // g) for i in range(h)]
    alpha = np.exp(dt * A[None, None, :])  # (b, l, h) per-step decay factor in (0, 1]

    M = np.zeros((b, h, l, l))
    for hi in range(h):
        gi = group_of[hi]
        for i in range(l):
            running = np.ones(b)  # product of alpha over steps j+1..i
            for j in range(i, -1, -1):
                cb = np.einsum("bn,bn->b", C[:, i, gi], B[:, j, gi])
                M[:, hi, i, j] = cb * running * dt[:, j, hi]
                running = running * alpha[:, j, hi]
    y = np.einsum("bhij,bjhp->bihp", M, x)

    # decay products from the start: prod_{k <= i} alpha_k ; to the end: prod_{k > j} alpha_k
    from_start = np.cumprod(alpha, axis=1)  # (b, l, h)
    to_end = np.ones_like(alpha)
    for j in range(l - 2, -1, -1):
        to_end[:, j] = to_end[:, j + 1] * alpha[:, j + 1]
    Bh = B[:, :, group_of]  # (b, l, h, n)
    Ch = C[:, :, group_of]
    final = np.einsum("blh,blh,blhp,blhn->bhpn", to_end, dt, x, Bh)
    if s0 is not None:
        y = y + np.einsum("blh,bhpn,blhn->blhp", from_start, s0, Ch)
        final = final + from_start[:, -1][:, :, None, None] * s0
    if D is not None:
        y = y + x * (D[None, None, :, None] if D.ndim == 1 else D[None, None])
    if z is not None:
        y = y * (z / (1.0 + np.exp(-z)))
    return y, final, M


# ----------------------------------------------------------------------------------------------------
# random cases
# ----------------------------------------------------------------------------------------------------
def random_case(seed, *, dtype=torch.float64, **force):
    """Random sizes and options from ``seed``; ``force`` overrides any of them."""
    rng = np.random.default_rng(1000 + seed)
    g = int(rng.choice([1, 2, 3]))
    opts = dict(
        b=int(rng.integers(1, 4)),
        l=int(rng.integers(1, 48)),
        g=g,
        h=g * int(rng.integers(1, 4)),
        p=int(rng.choice([1, 3, 5, 6, 7])),
        n=int(rng.choice([1, 2, 5, 7, 9])),
        Q=int(rng.choice([1, 3, 4, 8, 13, 16, 64])),
        D=rng.choice(["none", "h", "hp"]),
        z=bool(rng.integers(0, 2)),
        dt_bias=bool(rng.integers(0, 2)),
        softplus=bool(rng.integers(0, 2)),
        limit=bool(rng.integers(0, 2)),
        init=bool(rng.integers(0, 2)),
    )
    opts.update(force)
    b, l, h, p, g, n = (opts[k] for k in "blhpgn")
    gen = torch.Generator().manual_seed(seed)

    def randn(*s, scale=1.0):
        return scale * torch.randn(*s, generator=gen, dtype=torch.float64)

    if opts["softplus"]:
        dt = randn(b, l, h, scale=2.0) - 2.0  # raw values, some negative, softplus makes them positive
    else:
        dt = torch.rand(b, l, h, generator=gen, dtype=torch.float64) * 0.3
    kwargs = dict(
        x=randn(b, l, h, p), dt=dt, A=-torch.exp(randn(h)), B=randn(b, l, g, n), C=randn(b, l, g, n),
        dt_softplus=opts["softplus"],
    )
    if opts["D"] == "h":
        kwargs["D"] = randn(h)
    elif opts["D"] == "hp":
        kwargs["D"] = randn(h, p)
    if opts["z"]:
        kwargs["z"] = randn(b, l, h, p)
    if opts["dt_bias"]:
        kwargs["dt_bias"] = randn(h, scale=0.5)
    if opts["limit"]:
        kwargs["dt_limit"] = (0.02, 0.2)
    if opts["init"]:
        kwargs["initial_states"] = randn(b, h, p, n)
    for k in ("x", "B", "C", "z"):
        if k in kwargs:
            kwargs[k] = kwargs[k].to(dtype)
    return kwargs, opts


def run_form(form, kwargs, Q, **extra):
    if form == "recurrent":
        return ssd_recurrent(**kwargs, **extra)
    if form == "quadratic":
        return ssd_quadratic(**kwargs, **extra)
    return ssd_chunked(**kwargs, chunk_size=Q, **extra)


# ----------------------------------------------------------------------------------------------------
# the three forms against the independent implementation
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(16))
def test_forms_match_independent_float64(seed):
    kwargs, opts = random_case(seed)
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y, final = run_form(form, kwargs, opts["Q"], return_final_states=True)
        assert y.dtype == torch.float64 and final.dtype == torch.float64
        assert y.shape == kwargs["x"].shape
        assert final.shape == (opts["b"], opts["h"], opts["p"], opts["n"])
        assert relative_error(y, y_ref) <= 1e-9, (form, opts)
        assert relative_error(final, final_ref) <= 1e-9, (form, opts)
        assert_close(y, y_ref, name="y")
        assert_close(final, final_ref, name="final_states")


@pytest.mark.parametrize(
    "force",
    [
        dict(b=2, l=37, h=6, p=5, g=2, n=7, Q=16, D="hp", z=True, dt_bias=True, softplus=True, limit=True,
             init=True),
        dict(b=1, l=45, h=6, p=3, g=3, n=9, Q=8, D="h", z=False, dt_bias=False, softplus=False, limit=False,
             init=True),
        dict(b=3, l=16, h=4, p=7, g=4, n=5, Q=16, D="none", z=True, dt_bias=True, softplus=False, limit=True,
             init=False),  # l == Q: one full chunk
        dict(b=2, l=33, h=2, p=6, g=1, n=1, Q=1, D="h", z=False, dt_bias=False, softplus=True, limit=False,
             init=False),  # Q = 1: every step its own chunk
        dict(b=1, l=1, h=3, p=1, g=3, n=2, Q=64, D="hp", z=True, dt_bias=True, softplus=True, limit=False,
             init=True),  # one step, Q > l
        dict(b=2, l=48, h=6, p=5, g=2, n=7, Q=12, D="hp", z=True, dt_bias=True, softplus=True, limit=True,
             init=True),  # Q divides l
    ],
    ids=["tiny-all-options", "g3-init", "l-eq-Q", "Q1", "l1", "Q-divides-l"],
)
def test_forms_match_independent_chosen_cases(force):
    kwargs, opts = random_case(99, **force)
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y, final = run_form(form, kwargs, opts["Q"], return_final_states=True)
        assert relative_error(y, y_ref) <= 1e-9, form
        assert relative_error(final, final_ref) <= 1e-9, form


@pytest.mark.parametrize("seed", range(6))
def test_forms_float32_compute_in_float32_and_agree(seed):
    kwargs64, opts = random_case(seed + 50, l=41, Q=16)
    kwargs32, _ = random_case(seed + 50, l=41, Q=16, dtype=torch.float32)
    y_ref, final_ref, _ = independent_ssd(**kwargs64)
    for form in FORMS:
        y, final = run_form(form, kwargs32, opts["Q"], return_final_states=True)
        assert y.dtype == torch.float32 and final.dtype == torch.float32
        assert relative_error(y, y_ref) <= 1e-5, form
        assert_close(y, y_ref, name="y")
        assert_close(final, final_ref, name="final_states")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_inputs_return_x_dtype_and_compute_in_float32(dtype):
    kwargs, opts = random_case(7, l=30, Q=8, dtype=dtype, init=True)
    # the reference computes in float32 from the rounded inputs: compare with float64 on the same values
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y, final = run_form(form, kwargs, opts["Q"], return_final_states=True)
        assert y.dtype == dtype and final.dtype == torch.float32
        assert_close(y, y_ref, name="y")  # bf16/fp16 tolerance (output rounding)
        assert relative_error(final, final_ref) <= 1e-5  # states are float32, no output rounding


def test_return_value_without_final_states_and_inputs_untouched():
    kwargs, opts = random_case(3, init=True, z=True, D="hp", dt_bias=True)
    before = {k: v.clone() for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
    for form in FORMS:
        y = run_form(form, kwargs, opts["Q"])
        assert isinstance(y, torch.Tensor)
        for k, v in before.items():
            assert torch.equal(kwargs[k], v), f"{form} modified {k}"


def test_options_change_the_result():
    """Each option must matter (so the tests above cannot pass while ignoring one)."""
    kwargs, opts = random_case(5, l=30, Q=8, D="none", z=False, dt_bias=False, softplus=False, limit=False,
                               init=False)
    base = ssd_chunked(**kwargs, chunk_size=8)
    b, l, h, p = kwargs["x"].shape
    n = kwargs["B"].shape[-1]
    gen = torch.Generator().manual_seed(0)
    variants = {
        "D": dict(D=torch.randn(h, generator=gen, dtype=torch.float64)),
        "z": dict(z=torch.randn(b, l, h, p, generator=gen, dtype=torch.float64)),
        "dt_bias": dict(dt_bias=torch.full((h,), 0.3, dtype=torch.float64)),
        "dt_softplus": dict(dt_softplus=True),
        "dt_limit": dict(dt_limit=(0.1, 0.15)),
        "initial_states": dict(initial_states=torch.randn(b, h, p, n, generator=gen, dtype=torch.float64)),
    }
    for name, extra in variants.items():
        y = ssd_chunked(**{**kwargs, **extra}, chunk_size=8)
        assert relative_error(y, base) > 1e-3, name
        y_ref, _, _ = independent_ssd(**{**kwargs, **extra})
        assert relative_error(y, y_ref) <= 1e-9, name


def test_D_per_head_equals_D_per_channel_broadcast():
    kwargs, _ = random_case(11, D="h")
    y_h = ssd_recurrent(**kwargs)
    D_hp = kwargs["D"][:, None].expand(-1, kwargs["x"].shape[-1]).contiguous()
    y_hp = ssd_quadratic(**{**kwargs, "D": D_hp})
    assert_close(y_hp, y_h, name="y")


def test_group_mapping_is_contiguous_blocks_of_heads():
    """h = 6, g = 2: heads 0-2 read group 0 and heads 3-5 group 1 (not i % g)."""
    kwargs, _ = random_case(12, h=6, g=2, l=20, Q=8)
    y = ssd_chunked(**kwargs, chunk_size=8)
    for head_block, group in ((slice(0, 3), 0), (slice(3, 6), 1)):
        sub = dict(kwargs)
        sub["x"] = kwargs["x"][:, :, head_block]
        sub["dt"] = kwargs["dt"][:, :, head_block]
        sub["A"] = kwargs["A"][head_block]
        sub["B"] = kwargs["B"][:, :, group : group + 1]
        sub["C"] = kwargs["C"][:, :, group : group + 1]
        for k in ("D", "dt_bias"):
            if k in kwargs:
                sub[k] = kwargs[k][head_block]
        if "z" in kwargs:
            sub["z"] = kwargs["z"][:, :, head_block]
        if "initial_states" in kwargs:
            sub["initial_states"] = kwargs["initial_states"][:, head_block]
        assert_close(ssd_recurrent(**sub), y[:, :, head_block], name="y")


# ----------------------------------------------------------------------------------------------------
# the four chunked steps, one at a time
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_chunk_cumsum(seed):
    kwargs, opts = random_case(200 + seed, l=29, Q=8, dt_bias=True, softplus=True, limit=bool(seed % 2))
    Q = 8
    dt_out, dA_cumsum = chunk_cumsum(
        kwargs["dt"], kwargs["A"], Q, dt_bias=kwargs["dt_bias"], dt_softplus=True,
        dt_limit=kwargs.get("dt_limit", (0.0, math.inf)),
    )
    b, l, h = kwargs["dt"].shape
    c = math.ceil(l / Q)
    assert dt_out.shape == dA_cumsum.shape == (b, h, c, Q)
    assert dt_out.dtype == dA_cumsum.dtype == torch.float64
    dt_ref = independent_dt(_np(kwargs["dt"]), _np(kwargs["dt_bias"]), True,
                            kwargs.get("dt_limit", (0.0, math.inf)))
    A = _np(kwargs["A"])
    for t in range(c * Q):
        ci, s = divmod(t, Q)
        expect_dt = dt_ref[:, t] if t < l else np.zeros((b, h))  # zero past the sequence end
        np.testing.assert_allclose(_np(dt_out[:, :, ci, s]), expect_dt, rtol=1e-13, atol=0)
        running = sum(dt_ref[:, tt] * A for tt in range(ci * Q, min(t, l - 1) + 1))
        np.testing.assert_allclose(_np(dA_cumsum[:, :, ci, s]), running, rtol=1e-12, atol=1e-14)
    # float32 for low-precision dt
    dt16, dA16 = chunk_cumsum(kwargs["dt"].to(torch.bfloat16), kwargs["A"].float(), Q)
    assert dt16.dtype == dA16.dtype == torch.float32


def _independent_recurrence_states(kwargs):
    """States after every step, (b, l, h, p, n), by the plain loop in NumPy (processed dt)."""
    x, B = _np(kwargs["x"]), _np(kwargs["B"])
    dt = independent_dt(_np(kwargs["dt"]), _np(kwargs.get("dt_bias")), kwargs.get("dt_softplus", False),
                        kwargs.get("dt_limit", (0.0, math.inf)))
    A = _np(kwargs["A"])
    b, l, h, p = x.shape
    g, n = B.shape[2:]
    Bh = B[:, :, [i // (h // g) for i in range(h)]]
    s0 = kwargs.get("initial_states")
    state = np.zeros((b, h, p, n)) if s0 is None else _np(s0).copy()
    out = np.zeros((b, l, h, p, n))
    for t in range(l):
        state = np.exp(dt[:, t] * A)[:, :, None, None] * state + np.einsum(
            "bh,bhp,bhn->bhpn", dt[:, t], x[:, t], Bh[:, t]
        )
        out[:, t] = state
    return out, state


@pytest.mark.parametrize("seed", range(4))
def test_chunk_state_state_passing_chunk_scan_individually(seed):
    Q = 8
    kwargs, opts = random_case(300 + seed, l=27, Q=Q, init=True, g=2, h=4)
    x, B, C = kwargs["x"], kwargs["B"], kwargs["C"]
    b, l, h, p = x.shape
    n = B.shape[-1]
    c = math.ceil(l / Q)
    dt_out, dA_cumsum = chunk_cumsum(
        kwargs["dt"], kwargs["A"], Q, dt_bias=kwargs.get("dt_bias"), dt_softplus=kwargs["dt_softplus"],
        dt_limit=kwargs.get("dt_limit", (0.0, math.inf)),
    )

    # chunk_state: each chunk's recurrence from a zero state, run by the independent loop
    states = chunk_state(x, B, dt_out, dA_cumsum)
    assert states.shape == (b, c, h, p, n)
    for ci in range(c):
        sl = slice(ci * Q, min((ci + 1) * Q, l))
        piece = {k: v for k, v in kwargs.items() if k not in ("initial_states",)}
        for k in ("x", "dt", "B", "C", "z"):
            if k in piece:
                piece[k] = kwargs[k][:, sl]
        _, local_final = _independent_recurrence_states(piece)
        assert relative_error(states[:, ci], local_final) <= 1e-10, ci

    # state_passing: the state ENTERING chunk c is the recurrence's state after step c·Q - 1
    all_states, final_ref = _independent_recurrence_states(kwargs)
    entering, final = state_passing(states, dA_cumsum, kwargs["initial_states"])
    assert entering.shape == (b, c, h, p, n) and final.shape == (b, h, p, n)
    assert_close(entering[:, 0], kwargs["initial_states"], name="state")
    for ci in range(1, c):
        assert relative_error(entering[:, ci], all_states[:, ci * Q - 1]) <= 1e-10, ci
    assert relative_error(final, final_ref) <= 1e-10
    # without initial states chunk 0 starts from zeros
    entering0, _ = state_passing(states, dA_cumsum)
    assert torch.count_nonzero(entering0[:, 0]) == 0

    # chunk_scan: fed the true entering states, it reproduces y
    y = chunk_scan(x, dt_out, dA_cumsum, C, B, entering, D=kwargs.get("D"), z=kwargs.get("z"))
    y_ref, _, _ = independent_ssd(**kwargs)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert relative_error(y, y_ref) <= 1e-9


def test_chunk_steps_float32_outputs():
    kwargs, _ = random_case(400, l=21, Q=8, dtype=torch.float32, init=True)
    kwargs["dt"], kwargs["A"] = kwargs["dt"].float(), kwargs["A"].float()
    dt_out, dA = chunk_cumsum(kwargs["dt"], kwargs["A"], 8, dt_softplus=kwargs["dt_softplus"])
    assert dt_out.dtype == dA.dtype == torch.float32
    states = chunk_state(kwargs["x"].bfloat16(), kwargs["B"].bfloat16(), dt_out, dA)
    assert states.dtype == torch.float32
    entering, final = state_passing(states, dA)
    assert final.dtype == torch.float32
    x16, B16, C16 = (kwargs[k].bfloat16() for k in ("x", "B", "C"))
    y = chunk_scan(x16, dt_out, dA, C16, B16, entering)
    assert y.dtype == torch.bfloat16


def test_chunk_steps_reject_bad_shapes():
    kwargs, _ = random_case(401, l=21, Q=8, g=1, h=2)
    dt_out, dA = chunk_cumsum(kwargs["dt"], kwargs["A"], 8)
    with pytest.raises(ValueError, match="A must have shape"):
        chunk_cumsum(kwargs["dt"], kwargs["A"][:1], 8)
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_cumsum(kwargs["dt"], kwargs["A"], 0)
    with pytest.raises(ValueError, match="dA_cumsum must have shape"):
        chunk_state(kwargs["x"], kwargs["B"], dt_out, dA[:, :, :1])
    states = chunk_state(kwargs["x"], kwargs["B"], dt_out, dA)
    with pytest.raises(ValueError, match="initial_states must have shape"):
        state_passing(states, dA, torch.zeros(1, 1, 1, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must have shape \(b, l, h, p\) \(4 dimensions\)"):
        chunk_state(kwargs["x"][..., 0], kwargs["B"], dt_out, dA)
    with pytest.raises(ValueError, match=r"states must have shape \(b, c, h, p, n\)"):
        state_passing(states[0], dA)
    with pytest.raises(TypeError, match="dt must be a torch.Tensor, got ndarray"):
        chunk_cumsum(kwargs["dt"].numpy(), kwargs["A"], 8)
    entering, _ = state_passing(states, dA)
    with pytest.raises(ValueError, match="chunk_init_states must have shape"):
        chunk_scan(kwargs["x"], dt_out, dA, kwargs["C"], kwargs["B"], entering[:, :1])


# ----------------------------------------------------------------------------------------------------
# decode: chunked prefill + one token at a time == the recurrence
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", range(3))
def test_prefill_then_decode_equals_recurrence(seed, dtype):
    kwargs, opts = random_case(500 + seed, l=40, Q=16, g=2, h=4, D="hp", z=True, dt_bias=True, softplus=True,
                               limit=seed == 1, init=seed != 2, dtype=dtype)
    y_full, final_full = ssd_recurrent(**kwargs, return_final_states=True)
    prefill = 23  # a ragged prefill, then 17 decode steps
    head = {k: (v[:, :prefill] if k in ("x", "dt", "B", "C", "z") else v) for k, v in kwargs.items()}
    y_pre, state = ssd_chunked(**head, chunk_size=16, return_final_states=True)
    assert_close(y_pre, y_full[:, :prefill], name="y")
    common = dict(D=kwargs["D"], dt_bias=kwargs["dt_bias"], dt_softplus=True,
                  dt_limit=kwargs.get("dt_limit", (0.0, math.inf)))
    for t in range(prefill, 40):
        y_t, state = ssd_decode_step(
            state, kwargs["x"][:, t], kwargs["dt"][:, t], kwargs["A"], kwargs["B"][:, t], kwargs["C"][:, t],
            z_t=kwargs["z"][:, t], **common,
        )
        assert y_t.dtype == dtype and y_t.shape == kwargs["x"][:, t].shape
        assert state.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
        assert_close(y_t, y_full[:, t], name="y_t")
    assert_close(state, final_full, name="final_states")
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    assert_close(state, final_ref, name="final_states")


def test_decode_step_from_zero_state_is_the_first_step_of_the_recurrence():
    kwargs, _ = random_case(600, l=1, init=False, D="h", z=False)
    y = ssd_recurrent(**kwargs)
    b, _, h, p = kwargs["x"].shape
    n = kwargs["B"].shape[-1]
    y_t, state = ssd_decode_step(
        torch.zeros(b, h, p, n, dtype=torch.float64), kwargs["x"][:, 0], kwargs["dt"][:, 0], kwargs["A"],
        kwargs["B"][:, 0], kwargs["C"][:, 0], D=kwargs["D"], dt_bias=kwargs.get("dt_bias"),
        dt_softplus=kwargs["dt_softplus"], dt_limit=kwargs.get("dt_limit", (0.0, math.inf)),
    )
    assert_close(y_t, y[:, 0], name="y_t")


def test_decode_step_validates():
    x_t = torch.randn(2, 4, 3)
    with pytest.raises(ValueError, match=r"state must have shape \(b, h, p, n\) = \(2, 4, 3, 5\)"):
        ssd_decode_step(torch.zeros(2, 4, 3), x_t, torch.rand(2, 4), -torch.ones(4), torch.randn(2, 1, 5),
                        torch.randn(2, 1, 5))
    with pytest.raises(ValueError, match="divisible"):
        ssd_decode_step(torch.zeros(2, 4, 3, 5), x_t, torch.rand(2, 4), -torch.ones(4), torch.randn(2, 3, 5),
                        torch.randn(2, 3, 5))
    with pytest.raises(ValueError, match=r"dt_t must have shape \(b, h\)"):
        ssd_decode_step(torch.zeros(2, 4, 3, 5), x_t, torch.rand(2, 4, 1), -torch.ones(4),
                        torch.randn(2, 1, 5), torch.randn(2, 1, 5))


# ----------------------------------------------------------------------------------------------------
# stability: extreme dt·A and long sequences
# ----------------------------------------------------------------------------------------------------
def _extreme_case(dtype):
    """Per-step dt·A down to about -1e4 mixed with ordinary steps, so nothing decays uniformly."""
    gen = torch.Generator().manual_seed(42)
    b, l, h, p, g, n = 2, 70, 4, 3, 2, 5
    dt = torch.rand(b, l, h, generator=gen, dtype=torch.float64) * 0.05
    spikes = torch.rand(b, l, h, generator=gen, dtype=torch.float64) < 0.15
    dt = torch.where(spikes, torch.full_like(dt, 10.0), dt)  # dt = 10 with A = -1000 → dt·A = -1e4
    A = torch.tensor([-1000.0, -1.0, -300.0, -0.05], dtype=torch.float64)
    kwargs = dict(
        x=torch.randn(b, l, h, p, generator=gen, dtype=torch.float64).to(dtype),
        dt=dt, A=A,
        B=torch.randn(b, l, g, n, generator=gen, dtype=torch.float64).to(dtype),
        C=torch.randn(b, l, g, n, generator=gen, dtype=torch.float64).to(dtype),
        initial_states=torch.randn(b, h, p, n, generator=gen, dtype=torch.float64) * 1e3,
        D=torch.ones(h, dtype=torch.float64),
    )
    return kwargs


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_stable_at_extreme_decay(dtype):
    kwargs = _extreme_case(dtype)
    assert float((kwargs["dt"] * kwargs["A"]).min()) <= -9999.0
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    assert np.isfinite(y_ref).all()
    bound = 1e-9 if dtype == torch.float64 else 1e-5
    for form in FORMS:
        y, final = run_form(form, kwargs, 16, return_final_states=True)
        assert torch.isfinite(y).all() and torch.isfinite(final).all(), form
        assert relative_error(y, y_ref) <= bound, form
        assert relative_error(final, final_ref) <= bound, form


def test_stable_with_huge_softplus_inputs_and_infinite_dt():
    """Raw dt of 1e4 through softplus (no overflow: softplus(v) = v above 20); dt = inf, clamped."""
    kwargs, _ = random_case(700, l=30, Q=8, softplus=True, dt_bias=False, limit=False, init=True, D="h")
    kwargs["dt"] = kwargs["dt"].clone()
    kwargs["dt"][:, 5] = 1e4
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y, final = run_form(form, kwargs, 8, return_final_states=True)
        assert torch.isfinite(y).all() and torch.isfinite(final).all(), form
        assert relative_error(y, y_ref) <= 1e-9, form
    # dt = inf would make dt·x·B infinite (a legitimately infinite y); dt_limit clamps it to a large step
    kwargs["dt"][:, 5] = math.inf
    kwargs["dt_limit"] = (0.0, 50.0)
    y_ref, _, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y = run_form(form, kwargs, 8)
        assert torch.isfinite(y).all(), form
        assert relative_error(y, y_ref) <= 1e-9, form


def test_long_sequence_float32_stays_finite_and_accurate():
    """l = 4096 with tiny heads: the running log-decay reaches about -1e3; float32 chunked and recurrent
    agree with the float64 recurrence, and the float64 forms agree with each other to 1e-9."""
    gen = torch.Generator().manual_seed(7)
    b, l, h, p, g, n = 1, 4096, 2, 2, 1, 3
    kwargs64 = dict(
        x=torch.randn(b, l, h, p, generator=gen, dtype=torch.float64),
        dt=torch.nn.functional.softplus(torch.randn(b, l, h, generator=gen, dtype=torch.float64) - 4),
        A=torch.tensor([-16.0, -0.5], dtype=torch.float64),
        B=torch.randn(b, l, g, n, generator=gen, dtype=torch.float64),
        C=torch.randn(b, l, g, n, generator=gen, dtype=torch.float64),
    )
    assert float((kwargs64["dt"] * kwargs64["A"]).sum(1).min()) < -1000
    kwargs32 = {k: v.float() for k, v in kwargs64.items()}
    y64, f64 = ssd_recurrent(**kwargs64, return_final_states=True)
    y64c, f64c = ssd_chunked(**kwargs64, chunk_size=256, return_final_states=True)
    assert relative_error(y64c, y64) <= 1e-9 and relative_error(f64c, f64) <= 1e-9
    for y32, f32 in (
        ssd_chunked(**kwargs32, chunk_size=256, return_final_states=True),
        ssd_recurrent(**kwargs32, return_final_states=True),
    ):
        assert torch.isfinite(y32).all()
        assert relative_error(y32, y64) <= 1e-5
        assert_close(y32, y64, name="y")
        assert_close(f32, f64, name="final_states")
    # the quadratic form on a shorter stretch (it stores l × l per head)
    short = {k: (v[:, :1500] if v.ndim >= 3 else v) for k, v in kwargs32.items()}
    yq = ssd_quadratic(**short)
    assert torch.isfinite(yq).all()
    assert relative_error(yq, y64[:, :1500]) <= 1e-5


# ----------------------------------------------------------------------------------------------------
# segsum: stable vs naive
# ----------------------------------------------------------------------------------------------------
def test_segsum_matches_explicit_sums():
    gen = torch.Generator().manual_seed(3)
    a = -torch.rand(2, 3, 11, generator=gen, dtype=torch.float64)
    s = segsum(a)
    assert s.shape == (2, 3, 11, 11)
    for i in range(11):
        for j in range(11):
            if j > i:
                assert torch.all(s[..., i, j] == -math.inf)
            else:
                assert torch.allclose(s[..., i, j], a[..., j + 1 : i + 1].sum(-1), rtol=1e-14, atol=1e-15)
    assert torch.all(torch.diagonal(s, dim1=-2, dim2=-1) == 0)
    # benign inputs: the naive one agrees in float64
    assert_close(torch.exp(segsum_naive(a)), torch.exp(s), name="L")


def test_segsum_naive_fails_where_segsum_does_not():
    """float32, 2 % of the steps with dt·A = -1e4, the rest small: the naive difference of cumsums
    cancels catastrophically; the stable segsum stays at float32 rounding."""
    gen = torch.Generator().manual_seed(0)
    T = 512
    spikes = torch.rand(T, generator=gen, dtype=torch.float64) < 0.02
    a = torch.where(spikes, -1e4, -1e-2 * torch.rand(T, generator=gen, dtype=torch.float64))
    L_true = torch.exp(segsum(a))
    err_stable = (torch.exp(segsum(a.float())).double() - L_true).abs().max().item()
    err_naive = (torch.exp(segsum_naive(a.float())).double() - L_true).abs().max().item()
    assert err_stable < 1e-6
    assert err_naive > 1e-3  # thousands of times worse: wrong in the third digit
    # and in the log domain, short segments get relative errors of order 100 %
    true = segsum(a)
    near = torch.isfinite(true) & (true < 0) & (true > -5)
    rel_naive = ((segsum_naive(a.float()).double() - true).abs() / true.abs())[near].max().item()
    rel_stable = ((segsum(a.float()).double() - true).abs() / true.abs())[near].max().item()
    assert rel_naive > 0.5 and rel_stable < 1e-5


def test_segsum_naive_gives_nan_when_the_cumsum_overflows():
    a = torch.full((8,), -1e4, dtype=torch.float16)  # the float16 cumsum passes -65504 after 7 steps
    naive, stable = segsum_naive(a), segsum(a)
    assert torch.isnan(naive).any()
    assert not torch.isnan(stable).any()
    assert torch.all(torch.diagonal(stable) == 0)
    # an infinite decay: the naive one turns every later entry into NaN, the stable one into -inf (L = 0)
    a = torch.tensor([-0.1, -math.inf, -0.2, -0.3])
    assert torch.isnan(segsum_naive(a)[3, 2])
    assert segsum(a)[3, 2].item() == pytest.approx(-0.3)
    assert segsum(a)[3, 0].item() == -math.inf


def test_reference_forms_reject_bad_input():
    kwargs, _ = random_case(800, g=2, h=4)
    bad_B = kwargs["B"][:, :, :, 0]
    for form in FORMS:
        with pytest.raises(ValueError, match=r"B must have shape \(b, l, g, n\)"):
            run_form(form, {**kwargs, "B": bad_B}, 8)
    with pytest.raises(ValueError, match="chunk_size"):
        ssd_chunked(**kwargs, chunk_size=0)
    with pytest.raises(TypeError, match="chunk_size"):
        ssd_chunked(**kwargs, chunk_size=8.0)


# ----------------------------------------------------------------------------------------------------
# property test over unseen sizes, and the GPU
# ----------------------------------------------------------------------------------------------------
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies


@hypothesis.settings(deadline=None, max_examples=12, derandomize=True, database=None)
@hypothesis.given(
    b=st.integers(1, 2), l=st.integers(1, 40), g=st.integers(1, 3), hpg=st.integers(1, 3),
    p=st.integers(1, 6), n=st.integers(1, 6), Q=st.integers(1, 20), seed=st.integers(0, 2**16),
)
def test_property_three_forms_agree_with_independent(b, l, g, hpg, p, n, Q, seed):
    kwargs, _ = random_case(seed, b=b, l=l, g=g, h=g * hpg, p=p, n=n, Q=Q)
    y_ref, final_ref, _ = independent_ssd(**kwargs)
    for form in FORMS:
        y, final = run_form(form, kwargs, Q, return_final_states=True)
        assert relative_error(y, y_ref) <= 1e-9, form
        assert relative_error(final, final_ref) <= 1e-9, form


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_reference_on_cuda_matches_cpu(dtype):
    kwargs, opts = random_case(900, l=45, Q=16, g=2, h=4, D="hp", z=True, dt_bias=True, softplus=True,
                               init=True, dtype=dtype)
    cuda = {k: (v.cuda() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
    for form in FORMS:
        y_cpu, f_cpu = run_form(form, kwargs, 16, return_final_states=True)
        y_gpu, f_gpu = run_form(form, cuda, 16, return_final_states=True)
        assert y_gpu.device.type == "cuda" and y_gpu.dtype == dtype
        assert_close(y_gpu, y_cpu, name="y")
        assert_close(f_gpu, f_cpu, name="final_states")


def test_float32_default_tolerance_holds_at_model_like_dims():
    """n = 128, p = 64 (Mamba-2's dims) with z and initial states: the float32 chunked reference against the
    float64 one passes assert_close's float32 defaults (absolute errors grow with n·|terms|)."""
    from mamba2_tutorial import make_inputs
    from mamba2_tutorial.lessons.inputs import SSDShape

    shape = SSDShape(1, 600, 3, 64, 1, 128, 256, "model-like")
    i32 = make_inputs(shape, dtype=torch.float32, z=True, initial_states=True, dt_bias=True)
    i64 = make_inputs(shape, dtype=torch.float64, z=True, initial_states=True, dt_bias=True)
    y32, f32 = ssd_chunked(**i32, chunk_size=256, return_final_states=True)
    y64, f64 = ssd_chunked(**i64, chunk_size=256, return_final_states=True)
    assert_close(y32, y64, name="y")
    assert_close(f32, f64, name="final_states")
