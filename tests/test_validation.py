"""validate_ssd_inputs: every bad argument gets an error that names it and the expected shape / dtype."""

from __future__ import annotations

import re

import pytest
import torch

from mamba2_tutorial import validate_ssd_inputs
from mamba2_tutorial.runtime.validation import SSDDims, validate_decode_inputs

b, l, h, p, g, n = 2, 37, 6, 5, 3, 7  # every size distinct


def good(dtype=torch.float32, device="cpu", **over):
    gen = torch.Generator().manual_seed(0)
    args = dict(
        x=torch.randn(b, l, h, p, generator=gen),
        dt=torch.rand(b, l, h, generator=gen),
        A=-torch.rand(h, generator=gen),
        B=torch.randn(b, l, g, n, generator=gen),
        C=torch.randn(b, l, g, n, generator=gen),
    )
    for k in ("x", "B", "C"):
        args[k] = args[k].to(dtype)
    args = {k: v.to(device) for k, v in args.items()}
    args.update(over)
    return args


def call(**over):
    kw = good()
    kw.update(over)
    x, dt, A, B, C = (kw.pop(k) for k in ("x", "dt", "A", "B", "C"))
    return validate_ssd_inputs(x, dt, A, B, C, **kw)


def test_returns_named_dims():
    dims = call()
    assert isinstance(dims, SSDDims)
    assert dims == (b, l, h, p, g, n)
    named = (dims.batch, dims.seqlen, dims.nheads, dims.headdim, dims.ngroups, dims.dstate)
    assert named == (b, l, h, p, g, n)


def test_accepts_all_optionals():
    dims = call(
        chunk_size=16, D=torch.ones(h, p), z=torch.randn(b, l, h, p), dt_bias=torch.zeros(h),
        initial_states=torch.zeros(b, h, p, n, dtype=torch.float64), dt_limit=(0.0, float("inf")),
    )
    assert dims.ngroups == g
    call(D=torch.ones(h))  # (h,) is fine too


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_accepts_every_float_dtype(dtype):
    kw = good(dtype=dtype)
    validate_ssd_inputs(**kw, z=torch.randn(b, l, h, p).to(dtype))


@pytest.mark.parametrize(
    "arg, value, pattern",
    [
        ("x", torch.randn(b, l, h), r"x must have shape \(b, l, h, p\) \(4 dimensions\), got \(2, 37, 6\)"),
        ("dt", torch.rand(b, l),
         r"dt must have shape \(b, l, h\) = \(2, 37, 6\) \(3 dimensions\), got \(2, 37\)"),
        ("dt", torch.rand(b, l + 1, h), r"dt must have shape \(b, l, h\) = \(2, 37, 6\), got \(2, 38, 6\) "
                                        r"\(size of l differs\)"),
        ("A", -torch.rand(h, 1), r"A must have shape \(h,\) = \(6,\) \(1 dimensions\), got \(6, 1\)"),
        ("A", -torch.rand(h + 1), r"A must have shape \(h,\) = \(6,\), got \(7,\)"),
        ("B", torch.randn(b, l, n), r"B must have shape \(b, l, g, n\) = \(2, 37, g, n\) \(4 dimensions\), "
                                    r"got \(2, 37, 7\)"),
        ("B", torch.randn(b, l - 1, g, n), r"B must have shape \(b, l, g, n\) = \(2, 37, g, n\), got"),
        ("C", torch.randn(b, l, g, n + 1), r"C must have shape \(b, l, g, n\) = \(2, 37, 3, 7\), "
                                           r"got \(2, 37, 3, 8\) \(size of n differs\)"),
        ("C", torch.randn(b, l, 1, n), r"C must have shape \(b, l, g, n\) = \(2, 37, 3, 7\)"),
    ],
)
def test_wrong_shape_or_rank_names_argument_and_math_shape(arg, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(**{arg: value})


@pytest.mark.parametrize(
    "arg, value, pattern",
    [
        ("D", torch.ones(h + 1), r"D must have shape \(h,\) = \(6,\)"),
        ("D", torch.ones(h, p + 1), r"D must have shape \(h, p\) = \(6, 5\)"),
        ("D", torch.ones(h, p, 1),
         r"D must have shape \(h,\) = \(6,\) or \(h, p\) = \(6, 5\), got \(6, 5, 1\)"),
        ("z", torch.randn(b, l, h), r"z must have shape \(b, l, h, p\) = \(2, 37, 6, 5\)"),
        ("dt_bias", torch.zeros(h, 1), r"dt_bias must have shape \(h,\) = \(6,\)"),
        ("initial_states", torch.zeros(b, h, p),
         r"initial_states must have shape \(b, h, p, n\) = \(2, 6, 5, 7\)"),
        ("initial_states", torch.zeros(b, h, p, n + 2),
         r"initial_states must have shape .* \(size of n differs\)"),
    ],
)
def test_wrong_optional_shapes(arg, value, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(**{arg: value})


def test_heads_not_divisible_by_groups():
    with pytest.raises(ValueError, match=r"nheads h = 6 must be divisible by ngroups g = 4"):
        call(B=torch.randn(b, l, 4, n), C=torch.randn(b, l, 4, n))


def test_empty_dimensions_are_rejected():
    with pytest.raises(ValueError, match=r"x with shape .* is empty \(l = 0\)"):
        call(x=torch.randn(b, 0, h, p), dt=torch.rand(b, 0, h), B=torch.randn(b, 0, g, n),
             C=torch.randn(b, 0, g, n))
    with pytest.raises(ValueError, match=r"B with shape .* is empty \(g = 0\)"):
        call(B=torch.randn(b, l, 0, n), C=torch.randn(b, l, 0, n))


@pytest.mark.parametrize("chunk_size", [0, -16])
def test_chunk_size_not_positive(chunk_size):
    with pytest.raises(ValueError, match=rf"chunk_size \(Q\) must be a positive int, got {chunk_size}"):
        call(chunk_size=chunk_size)


@pytest.mark.parametrize("chunk_size", [16.0, "16", True, [16]])
def test_chunk_size_not_an_int(chunk_size):
    with pytest.raises(TypeError, match=r"chunk_size \(Q\) must be an int"):
        call(chunk_size=chunk_size)


def test_chunk_size_numpy_int_is_fine():
    np = pytest.importorskip("numpy")
    call(chunk_size=np.int64(16))


@pytest.mark.parametrize("arg", ["B", "C", "z"])
def test_dtype_mismatch_with_x(arg):
    value = {"B": torch.randn(b, l, g, n), "C": torch.randn(b, l, g, n), "z": torch.randn(b, l, h, p)}[arg]
    with pytest.raises(TypeError, match=rf"{arg} has dtype torch.float64 but x has dtype torch.float32: "
                                        r"x, B, C and z must share one floating dtype"):
        call(**{arg: value.double()})


@pytest.mark.parametrize("arg", ["x", "dt", "A"])
def test_integer_dtypes_rejected(arg):
    kw = good()
    value = kw[arg].to(torch.int64)
    with pytest.raises(TypeError, match=rf"{arg} must have a floating dtype .*got torch.int64"):
        call(**{arg: value})


def test_dt_may_have_its_own_float_dtype():
    call(dt=torch.rand(b, l, h, dtype=torch.float64), A=-torch.rand(h, dtype=torch.float64))


def test_not_a_tensor():
    with pytest.raises(TypeError, match="B must be a torch.Tensor, got ndarray"):
        call(B=good()["B"].numpy())
    with pytest.raises(TypeError, match="x must be a torch.Tensor, got list"):
        call(x=[1.0, 2.0])


@pytest.mark.parametrize("arg", ["dt", "A", "B", "C"])
def test_device_mismatch(arg):
    kw = good()
    value = kw[arg].to("meta")
    pattern = rf"{arg} is on device meta but x is on device cpu: all tensors must be on one device"
    with pytest.raises(ValueError, match=pattern):
        call(**{arg: value})


@pytest.mark.parametrize(
    "arg, value",
    [("D", torch.ones(h)), ("z", torch.randn(b, l, h, p)), ("dt_bias", torch.zeros(h)),
     ("initial_states", torch.zeros(b, h, p, n))],
)
def test_device_mismatch_optionals(arg, value):
    with pytest.raises(ValueError, match=rf"{arg} is on device meta but x is on device cpu"):
        call(**{arg: value.to("meta")})


def test_all_on_meta_device_is_fine():
    dims = validate_ssd_inputs(**good(device="meta"), D=torch.ones(h, device="meta"))
    assert dims.nheads == h


@pytest.mark.parametrize(
    "dt_limit, exc, pattern",
    [
        ((0.2, 0.1), ValueError, r"dt_limit = \(lo, hi\) must have lo <= hi, got \(0.2, 0.1\)"),
        ((0.0,), TypeError, r"dt_limit must be a pair \(lo, hi\)"),
        (0.1, TypeError, r"dt_limit must be a pair \(lo, hi\)"),
        ((0.0, "inf"), TypeError, r"dt_limit must be a pair .* hi is 'inf'"),
        ((float("nan"), 1.0), ValueError, r"lo <= hi"),
    ],
)
def test_bad_dt_limit(dt_limit, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call(dt_limit=dt_limit)


def test_messages_use_the_math_names_for_the_brief_example():
    with pytest.raises(ValueError) as info:
        call(B=torch.randn(2, 37, 16))
    msg = str(info.value)
    assert msg.startswith("B must have shape (b, l, g, n)")
    assert "got (2, 37, 16)" in msg


def test_decode_inputs():
    x_t = torch.randn(b, h, p)
    args = (torch.zeros(b, h, p, n), x_t, torch.rand(b, h), -torch.rand(h), torch.randn(b, g, n),
            torch.randn(b, g, n))
    assert validate_decode_inputs(*args) == (b, 1, h, p, g, n)
    with pytest.raises(ValueError, match=re.escape("C_t must have shape (b, g, n) = (2, 3, 7)")):
        validate_decode_inputs(*args[:5], torch.randn(b, g, n + 1))
    with pytest.raises(TypeError, match="B_t has dtype torch.float64 but x_t has dtype torch.float32"):
        validate_decode_inputs(*args[:4], args[4].double(), args[5])
    with pytest.raises(ValueError, match="z_t is on device meta"):
        validate_decode_inputs(*args, z_t=torch.randn(b, h, p, device="meta"))
