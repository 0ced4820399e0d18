"""SSDShape, the SHAPES presets and make_inputs."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from mamba2_tutorial import SHAPES, SSDShape, make_inputs, ssd_chunked, validate_ssd_inputs
from mamba2_tutorial.lessons.inputs import BENCHMARK_SHAPES, MODEL_SHAPES, get_shape

TINY = [name for name, s in SHAPES.items() if s.batch * s.seqlen * s.nheads * s.headdim <= 100_000]


def test_ssdshape_fields_and_properties():
    s = SSDShape(2, 37, 6, 5, 2, 7, 16, "t")
    assert s.nchunks == 3 and s.ragged and s.heads_per_group == 3
    assert s.dims == {"b": 2, "l": 37, "h": 6, "p": 5, "g": 2, "n": 7, "Q": 16}
    assert not s.replace(seqlen=48).ragged
    assert s.replace(seqlen=48).name == "t*"
    assert s.scaled(seqlen=100, batch=1).dims["l"] == 100
    assert s.scaled(seqlen=100, batch=1).nheads == 6
    assert "l37" in str(s) and "Q16" in str(s)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seqlen = 3


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(nheads=6, ngroups=4), "nheads h = 6 must be divisible by ngroups g = 4"),
        (dict(chunk_size=0), "chunk_size must be a positive int"),
        (dict(seqlen=2.5), "seqlen must be a positive int"),
    ],
)
def test_ssdshape_rejects_bad_dims(kwargs, pattern):
    base = dict(batch=2, seqlen=37, nheads=6, headdim=5, ngroups=2, dstate=7, chunk_size=16)
    with pytest.raises(ValueError, match=pattern):
        SSDShape(**{**base, **kwargs})


def test_tiny_presets_have_distinct_dims_and_ragged_seqlen():
    for name in TINY:
        s = SHAPES[name]
        sizes = [s.batch, s.seqlen, s.nheads, s.headdim, s.dstate]
        if name != "small-pow2":  # n = Q = 32 there (kept: the benchmark test fixture is built on it)
            sizes.append(s.chunk_size)
        assert len(set(sizes)) == len(sizes), name
        assert s.ragged, name
    for name in ("tiny", "tiny-g3", "small", "small-pow2"):
        assert 1 < SHAPES[name].ngroups < SHAPES[name].nheads, name
    t = SHAPES["tiny"]
    assert tuple(t.dims.values()) == (2, 37, 6, 5, 2, 7, 16)
    for s in SHAPES.values():
        assert s.nheads % s.ngroups == 0
        assert s.name in SHAPES and SHAPES[s.name] is s


def test_real_model_and_benchmark_presets():
    # Mamba2 module: expand 2, headdim 64 → h = 2·d_model / 64
    for name, d_model in (("mamba2-130m", 768), ("mamba2-2.7b", 2560)):
        s = SHAPES[name]
        assert s.nheads == 2 * d_model // 64 and s.headdim == 64 and s.dstate == 128
        assert s.ngroups == 1 and s.chunk_size == 256
    expected = {
        "b8-l4096-h80": (8, 4096, 80, 1, 256),
        "b1-l32768-h80": (1, 32768, 80, 1, 256),
        "b4-l2048-h24": (4, 2048, 24, 1, 256),
        "b2-l8192-h128-g8": (2, 8192, 128, 8, 128),
    }
    assert tuple(expected) == BENCHMARK_SHAPES
    for name, (b, l, h, g, Q) in expected.items():
        s = SHAPES[name]
        assert (s.batch, s.seqlen, s.nheads, s.ngroups, s.chunk_size) == (b, l, h, g, Q)
        assert (s.headdim, s.dstate) == (64, 128)


def test_get_shape():
    assert get_shape("tiny") is SHAPES["tiny"]
    with pytest.raises(KeyError, match="unknown shape preset 'nope'; presets: tiny"):
        get_shape("nope")
    with pytest.raises(TypeError):
        get_shape((2, 37))


@pytest.mark.parametrize("name", TINY)
def test_make_inputs_validates_and_runs_for_small_presets(name):
    s = SHAPES[name]
    inp = make_inputs(name, seed=3, z=True, initial_states=True, dt_bias=True)
    tensors = {k: v for k, v in inp.items() if k != "dt_softplus"}
    dims = validate_ssd_inputs(**tensors, chunk_size=s.chunk_size)
    assert dims == (s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate)
    y = ssd_chunked(**inp, chunk_size=s.chunk_size)
    assert torch.isfinite(y).all()


def test_make_inputs_for_real_shapes_scaled_down():
    for name in ("mamba2-130m", *MODEL_SHAPES, *BENCHMARK_SHAPES):
        s = SHAPES[name].scaled(seqlen=5, batch=1)
        inp = make_inputs(s, D=False)
        assert inp["x"].shape == (1, 5, s.nheads, s.headdim)
        assert inp["B"].shape == (1, 5, s.ngroups, s.dstate)


def test_make_inputs_keys_shapes_and_dtypes():
    s = SHAPES["tiny"]
    b, l, h, p, g, n = s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate
    base = make_inputs(s)
    assert set(base) == {"x", "dt", "A", "B", "C", "D"}
    assert set(make_inputs(s, D=False)) == {"x", "dt", "A", "B", "C"}
    full = make_inputs(s, dtype=torch.bfloat16, z=True, dt_bias=True, initial_states=True)
    assert set(full) == {"x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states", "dt_softplus"}
    assert full["dt_softplus"] is True
    shapes = {"x": (b, l, h, p), "dt": (b, l, h), "A": (h,), "B": (b, l, g, n), "C": (b, l, g, n), "D": (h,),
              "z": (b, l, h, p), "dt_bias": (h,), "initial_states": (b, h, p, n)}
    for k, shape in shapes.items():
        assert full[k].shape == shape, k
    for k in ("x", "dt", "B", "C", "z"):
        assert full[k].dtype == torch.bfloat16, k
    for k in ("A", "D", "dt_bias", "initial_states"):
        assert full[k].dtype == torch.float32, k  # parameters and states stay float32, like mamba_ssm
    f64 = make_inputs(s, dtype=torch.float64, dt_bias=True, initial_states=True)
    assert all(f64[k].dtype == torch.float64 for k in ("x", "dt", "A", "D", "dt_bias", "initial_states"))


def test_make_inputs_realistic_values():
    inp = make_inputs(SHAPES["small"], seed=1, z=True)
    dt, A, D = inp["dt"], inp["A"], inp["D"]
    assert (dt > 0).all() and 0.005 < dt.median() < 0.05  # softplus(randn - 4): about 0.018
    assert (A < 0).all() and (A >= -16).all() and (A <= -1).all()
    assert (D - 1).abs().max() < 0.5
    for k in ("x", "B", "C", "z"):
        assert abs(inp[k].mean()) < 0.05 and 0.9 < inp[k].std() < 1.1, k
    raw = make_inputs(SHAPES["small"], seed=1, dt_bias=True)
    assert (raw["dt"] < 0).any()  # raw pre-softplus values
    step = torch.nn.functional.softplus(raw["dt"] + raw["dt_bias"])
    assert 1e-4 < step.min() and step.max() < 1.0
    bias_step = torch.nn.functional.softplus(raw["dt_bias"])
    assert (bias_step >= 1e-3 * 0.999).all() and (bias_step <= 0.1 * 1.001).all()


def test_make_inputs_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    a = make_inputs("tiny", seed=5, z=True)
    assert torch.equal(torch.get_rng_state(), state)
    b = make_inputs("tiny", seed=5, z=True)
    c = make_inputs("tiny", seed=6, z=True)
    for k in a:
        assert torch.equal(a[k], b[k]), k
        assert not torch.equal(a[k], c[k]), k


def test_make_inputs_values_do_not_depend_on_flags_or_dtype():
    plain = make_inputs("tiny", seed=2, D=False)
    rich = make_inputs("tiny", seed=2, z=True, initial_states=True)
    for k in plain:
        assert torch.equal(plain[k], rich[k]), k
    f64 = make_inputs("tiny", seed=2, dtype=torch.float64)
    f32 = make_inputs("tiny", seed=2, dtype=torch.float32)
    for k in ("x", "dt", "B", "C"):
        assert torch.equal(f64[k].float(), f32[k]), k
    # x, B and C are different draws (no accidental reuse of one stream)
    assert not torch.allclose(f64["B"], f64["C"])


def test_make_inputs_device_argument():
    inp = make_inputs("tiny", device="meta")
    assert all(v.device.type == "meta" for v in inp.values())


def test_nchunks_matches_chunk_cumsum():
    from mamba2_tutorial.reference import chunk_cumsum

    for name in TINY:
        s = SHAPES[name]
        inp = make_inputs(s)
        dt_out, _ = chunk_cumsum(inp["dt"], inp["A"], s.chunk_size)
        assert dt_out.shape[2] == s.nchunks == math.ceil(s.seqlen / s.chunk_size), name


def test_the_model_shapes_follow_the_released_models():
    """d_inner = 2 d_model, headdim 64: 370m (d_model 1024), 1.3b (2048), 2.7b (2560); d_state 128, g 1."""
    for name, d_model in zip(MODEL_SHAPES, (1024, 2048, 2560)):
        s = get_shape(name)
        assert (s.nheads * s.headdim, s.dstate, s.ngroups, s.chunk_size) == (2 * d_model, 128, 1, 256), name
