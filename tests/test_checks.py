"""assert_close, default_tolerance and relative_error."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from mamba2_tutorial import assert_close, default_tolerance, relative_error
from mamba2_tutorial.lessons.checks import TOLERANCES


def _y(seed=0, dtype=torch.float64, shape=(2, 37, 6, 5)):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)


def _raises(actual, expected, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        assert_close(actual, expected, **kw)
    return str(info.value)


def test_default_tolerances_order_and_values():
    r64, a64 = default_tolerance(torch.float64)
    r32, a32 = default_tolerance(torch.float32)
    r16, a16 = default_tolerance(torch.float16)
    rbf, abf = default_tolerance(torch.bfloat16)
    assert r64 < r32 < r16 < rbf and a64 < a32 < a16 < abf  # from the dtype's precision
    assert (r64, r32, r16, rbf) == (1e-10, 1e-4, 5e-3, 2e-2)
    assert (a64, a32, a16, abf) == (1e-10, 1e-4, 5e-3, 2e-2)
    assert default_tolerance(np.float32) == (r32, a32)
    assert default_tolerance("bfloat16") == (rbf, abf)
    assert default_tolerance(torch.int32) == TOLERANCES[torch.float64]


def test_passes_within_tolerance():
    e = _y()
    assert_close(e, e)
    assert_close(e * (1 + 1e-12), e)  # float64: rtol 1e-10
    assert_close(e.float(), e)  # float32 rounding is well within the float32 tolerance
    assert_close(e.bfloat16(), e)  # so is bfloat16 rounding within the bfloat16 one
    assert_close(e.half(), e.float())
    assert_close(e.numpy(), e)  # arrays and tensors mix
    assert_close(e + 1e-3, e, atol=2e-3)


def test_fails_beyond_tolerance_with_informative_message():
    e = _y()
    a = e.clone()
    a[1, 20, 4, 3] += 0.5
    msg = _raises(a, e, name="y")
    assert msg.startswith("y: 1 of 2220 elements (0.05%) differ beyond tolerance")
    assert "rtol=1.0e-10, atol=1.0e-10; the float64 defaults" in msg
    assert "max abs error 5.000e-01 at (b=1, l=20, h=4, p=3)" in msg
    assert f"actual {a[1, 20, 4, 3].item():.6g}, expected {e[1, 20, 4, 3].item():.6g}" in msg
    assert "max rel error" in msg and "relative L2 error" in msg
    assert "first mismatch at (b=1, l=20, h=4, p=3)" in msg


def test_tolerance_from_the_lower_precision_dtype():
    e = _y()
    a = e + 5e-4  # fine for float16 (atol 5e-3) but not for float32 or float64
    _raises(a, e)
    _raises(a.float(), e)
    assert_close(a.half(), e)
    assert_close(e, a.half())  # either side may be the low-precision one


def test_float64_tolerance_is_tight():
    e = _y()
    msg = _raises(e * (1 + 1e-8), e)
    assert "float64 defaults" in msg


def test_given_tolerance_reported():
    e = _y()
    msg = _raises(e + 0.1, e, rtol=0.0, atol=1e-3)
    assert "rtol=0.0e+00, atol=1.0e-03; the float64 defaults are rtol=1e-10, atol=1e-10" in msg


def test_only_atol_given_keeps_default_rtol():
    e = _y() * 1000
    assert_close(e.float(), e, atol=0.0)  # rtol 1e-4 of float32 still applies


def test_nan_never_passes():
    e = _y()
    a = e.clone()
    a[0, 3, 1, 2] = math.nan
    msg = _raises(a, e, name="y")
    assert "1 of 2220" in msg and "actual nan" in msg
    assert "actual has 1 NaN and 0 inf where expected is finite" in msg
    _raises(torch.full((3,), math.nan), torch.full((3,), math.nan))  # even NaN vs NaN
    _raises(a, e, atol=1e9)


def test_infinities():
    e = torch.tensor([1.0, math.inf, -math.inf], dtype=torch.float64)
    assert_close(e.clone(), e)  # the same inf passes
    msg = _raises(torch.tensor([1.0, -math.inf, -math.inf]), e)
    assert "1 of 3" in msg
    msg = _raises(torch.tensor([math.inf, math.inf, -math.inf]), e)
    assert "0 NaN and 1 inf where expected is finite" in msg
    finite = torch.tensor([1.0, 1e300, -math.inf], dtype=torch.float64)
    _raises(finite, e, atol=math.inf)  # a finite value never matches an inf


def test_shape_mismatch_names_both_shapes():
    e = _y()
    msg = _raises(e[:, :36], e, name="y")
    assert msg == "y: shape mismatch: actual (2, 36, 6, 5) vs expected (2, 37, 6, 5)"
    msg = _raises(e.transpose(1, 2), e, name="y", hint="y is (b, l, h, p)")
    assert "same number of elements: a missing reshape or transpose?" in msg
    assert "hint: y is (b, l, h, p)" in msg


def test_all_nan_hint():
    e = _y()
    msg = _raises(torch.full_like(e, math.nan), e, name="y")
    assert "every element of actual is NaN: an output that was never written" in msg


def test_all_zero_hint():
    e = _y()
    msg = _raises(torch.zeros_like(e), e, name="y")
    assert "actual is all zeros" in msg


def test_ragged_tail_hint():
    e = _y()
    a = e.clone()
    a[:, 32:] += 1.0  # wrong only from l = 32 on (the last chunk of l = 37, Q = 16)
    msg = _raises(a, e, name="y")
    assert "mismatches only at sequence positions l >= 32 (of 37); the first 32 are right" in msg
    assert "ragged chunk" in msg


def test_head_hint():
    e = _y()
    a = e.clone()
    a[:, :, 4] *= 1.5
    msg = _raises(a, e, name="y")
    assert "only heads [4] of 6 mismatch" in msg and "i // (h // g)" in msg


def test_layouts_by_name_and_explicit_dims():
    e = _y(shape=(2, 6, 5, 7))
    a = e.clone()
    a[1, 2, 3, 4] += 1
    assert "(b=1, h=2, p=3, n=4)" in _raises(a, e, name="final_states")
    assert "(i=1, j=2, k=3, m=4)" in _raises(a, e, dims="i j k m")
    assert "at (1, 2, 3, 4)" in _raises(a, e, name="something")  # unknown name: plain index
    s = _y(shape=(2, 3, 6, 5, 7))
    t = s.clone()
    t[:, 2] += 1
    msg = _raises(t, s, name="states")
    assert "(b=0, c=2, h=0, p=0, n=0)" in msg
    assert "mismatches only in chunks [2] of 3 (the last one)" in msg


def test_isolated_error_hint_instead_of_axis_patterns():
    e = _y()
    a = e.clone()
    a[0, 10, 2, 1] += 5
    msg = _raises(a, e, name="y")
    assert "only 1 element(s) wrong: an isolated error" in msg
    assert "only heads" not in msg and "sequence positions" not in msg


def test_sparse_errors_do_not_claim_an_axis_pattern():
    e = _y()
    a = e.clone()
    a[0, 10:, 2, 1] += 5  # 27 scattered elements in a (b, l, h, p) block of 2·27·6·5: under 10 % dense
    msg = _raises(a, e, name="y")
    assert "sequence positions l >= 10" not in msg


def test_user_hint_is_appended():
    e = _y()
    msg = _raises(e + 1, e, hint="did you apply D twice?")
    assert msg.rstrip().endswith("hint: did you apply D twice?")


def test_accepts_numpy_and_bfloat16_arrays():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    e = _y(shape=(4, 5)).numpy()
    assert_close(e.astype(ml_dtypes.bfloat16), e)
    msg = _raises((e + 0.1).astype(np.float32), e)
    assert "actual float32, expected float64" in msg


def test_relative_error():
    e = _y()
    assert relative_error(e, e) == 0.0
    a = e * 1.01
    assert relative_error(a, e) == pytest.approx(0.01, rel=1e-9)
    assert relative_error(a.float(), e) == pytest.approx(0.01, rel=1e-5)
    assert relative_error(a.numpy(), e) == pytest.approx(0.01, rel=1e-9)
    assert relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert relative_error(torch.ones(3), torch.zeros(3)) == math.inf
    assert math.isnan(relative_error(torch.tensor([math.nan, 1.0]), torch.ones(2)))
    with pytest.raises(ValueError, match=re.escape("shapes differ: actual (3,) vs expected (4,)")):
        relative_error(torch.ones(3), torch.ones(4))
    # computed in float64: no overflow of the squares of large float32 values
    big = torch.full((10,), 1e30, dtype=torch.float32)
    assert relative_error(big * 1.5, big) == pytest.approx(0.5, rel=1e-6)


@pytest.mark.gpu
def test_cuda_tensors_compare_on_device_and_against_cpu():
    e = _y()
    assert_close(e.cuda(), e)
    assert_close(e.float().cuda(), e.cuda())
    a = e.clone().cuda()
    a[0, 5, 2, 1] += 1
    msg = _raises(a, e.cuda(), name="y")
    assert "(b=0, l=5, h=2, p=1)" in msg
    assert relative_error(a, e) > 0
