"""The FLOP and memory formulas of mamba2_tutorial.lessons.costs: growth rates, padding, groups,
consistency."""

from __future__ import annotations

import math

import pytest

from mamba2_tutorial.lessons import costs

DIMS = dict(batch=2, nheads=6, headdim=5, dstate=7, ngroups=3)  # distinct sizes everywhere
Q = 16


def _slope(form: str, attr: str, l0: int, l1: int, **dims) -> float:
    c0 = getattr(costs.form_cost(form, seqlen=l0, **dims), attr)
    c1 = getattr(costs.form_cost(form, seqlen=l1, **dims), attr)
    return math.log(c1 / c0) / math.log(l1 / l0)


@pytest.mark.parametrize("attr", ["flops", "memory_bytes"])
def test_quadratic_grows_as_l_squared(attr):
    slope = _slope("quadratic", attr, 2**12, 2**16, chunk_size=Q, **DIMS)
    assert 1.99 < slope <= 2.0, slope


def test_recurrent_and_chunked_flops_grow_linearly():
    assert _slope("recurrent", "flops", 100, 6400, chunk_size=Q, **DIMS) == pytest.approx(1.0)
    # on multiples of Q the chunked count is exactly linear
    assert _slope("chunked", "flops", 4 * Q, 256 * Q, chunk_size=Q, **DIMS) == pytest.approx(1.0)
    assert _slope("chunked", "memory_bytes", 4 * Q, 256 * Q, chunk_size=Q, **DIMS) == pytest.approx(1.0)


def test_recurrent_memory_does_not_depend_on_length():
    short = costs.recurrent_cost(seqlen=3, **{k: v for k, v in DIMS.items() if k != "ngroups"})
    long = costs.recurrent_cost(seqlen=30000, **{k: v for k, v in DIMS.items() if k != "ngroups"})
    assert short.memory_bytes == long.memory_bytes == 4 * 2 * 6 * 5 * 7
    assert long.flops == 10000 * short.flops


def test_chunked_pays_for_a_full_last_chunk():
    ragged = costs.chunked_cost(seqlen=3 * Q + 1, chunk_size=Q, **DIMS)
    padded = costs.chunked_cost(seqlen=4 * Q, chunk_size=Q, **DIMS)
    shorter = costs.chunked_cost(seqlen=3 * Q, chunk_size=Q, **DIMS)
    assert ragged == padded
    assert shorter.flops < ragged.flops


def test_chunked_is_the_sum_of_its_steps():
    steps = costs.chunked_step_costs(seqlen=100, chunk_size=Q, **DIMS)
    assert list(steps) == ["chunk_cumsum", "chunk_state", "state_passing", "chunk_scan"]
    total = costs.chunked_cost(seqlen=100, chunk_size=Q, **DIMS)
    assert total.flops == sum(s.flops for s in steps.values())
    assert total.memory_bytes == sum(s.memory_bytes for s in steps.values())
    # the matrix products dominate: chunk_scan and chunk_state outweigh cumsum and state passing
    assert steps["chunk_scan"].flops > steps["chunk_state"].flops > steps["state_passing"].flops
    assert steps["chunk_state"].flops > steps["chunk_cumsum"].flops


def test_chunked_beats_quadratic_only_for_long_sequences():
    # one chunk: the chunked form is the quadratic form plus overhead
    one_chunk = costs.chunked_cost(seqlen=Q, chunk_size=Q, **DIMS)
    assert one_chunk.flops > costs.quadratic_cost(seqlen=Q, **DIMS).flops
    long = dict(seqlen=256 * Q, **DIMS)
    assert costs.chunked_cost(chunk_size=Q, **long).flops < costs.quadratic_cost(**long).flops / 50


def test_groups_share_c_b_products():
    base = dict(batch=2, seqlen=48, nheads=6, headdim=5, dstate=7)
    g1 = costs.quadratic_cost(ngroups=1, **base)
    g6 = costs.quadratic_cost(ngroups=6, **base)
    assert g6.flops - g1.flops == 2 * 5 * 48 * 48 * 7 * 2  # (g6 - g1) groups × 2·l²·n × batch
    c1 = costs.chunked_cost(ngroups=1, chunk_size=Q, **base)
    c6 = costs.chunked_cost(ngroups=6, chunk_size=Q, **base)
    assert c6.flops - c1.flops == 2 * 5 * 3 * 2 * Q * Q * 7  # batch × (g6 - g1) × chunks × 2·Q²·n


def test_small_counts_by_hand():
    one = dict(batch=1, seqlen=1, nheads=1, headdim=1, dstate=1)
    assert costs.recurrent_cost(**one) == costs.Cost(6.0, 4.0)  # dt·x, decay, outer, add, ·C (2)
    assert costs.quadratic_cost(**one) == costs.Cost(7.0, 12.0)  # CB (2), segsum+mask, L∘, M·X (2), dt·x
    # io: x and y 2·(1·2·3·4) + B and C 2·(1·2·1·5) elements at 2 bytes, dt (6) and A (3) at 4 bytes
    io = costs.io_bytes(batch=1, seqlen=2, nheads=3, headdim=4, dstate=5, ngroups=1, bytes_per_element=2)
    assert io == 2 * (48 + 20) + 4 * (6 + 3)
    io_final = costs.io_bytes(batch=1, seqlen=2, nheads=3, headdim=4, dstate=5, final_states=True)
    assert io_final == io + 4 * 3 * 4 * 5


def test_bytes_per_element_scales_memory_only():
    c4 = costs.chunked_cost(seqlen=100, chunk_size=Q, bytes_per_element=4, **DIMS)
    c2 = costs.chunked_cost(seqlen=100, chunk_size=Q, bytes_per_element=2, **DIMS)
    assert c4.flops == c2.flops and c4.memory_bytes == 2 * c2.memory_bytes


def test_sequential_steps():
    assert costs.sequential_steps("recurrent", seqlen=1000) == 1000
    assert costs.sequential_steps("quadratic", seqlen=1000) == 1
    assert costs.sequential_steps("chunked", seqlen=1000, chunk_size=64) == 16
    with pytest.raises(ValueError, match="chunk_size"):
        costs.sequential_steps("chunked", seqlen=1000)
    with pytest.raises(ValueError, match="form"):
        costs.sequential_steps("fft", seqlen=10)


def test_bad_dimensions_are_named():
    with pytest.raises(ValueError, match="seqlen"):
        costs.recurrent_cost(batch=1, seqlen=0, nheads=2, headdim=3, dstate=4)
    with pytest.raises(TypeError, match="headdim"):
        costs.recurrent_cost(batch=1, seqlen=5, nheads=2, headdim=3.0, dstate=4)
    with pytest.raises(ValueError, match="ngroups"):
        costs.quadratic_cost(batch=1, seqlen=5, nheads=6, headdim=3, dstate=4, ngroups=4)
    with pytest.raises(ValueError, match="chunk_size"):
        costs.chunked_cost(batch=1, seqlen=5, nheads=6, headdim=3, dstate=4, chunk_size=-1)
    with pytest.raises(ValueError, match="form"):
        costs.form_cost("fft", batch=1, seqlen=5, nheads=6, headdim=3, dstate=4)


def test_matrix_products_agree_with_the_roofline_count():
    """costs (every operation, dense blocks) and roofline (tensor-core products) agree on the products."""
    from mamba2_tutorial.perf import roofline

    b, l, h, p, g, n = 2, 8 * Q, 6, 5, 3, 7
    mm = roofline.matmul_flops(dict(b=b, l=l, h=h, p=p, g=g, n=n, Q=Q), causal=False)
    c = l // Q
    ours = {
        "chunk state (x ⊗ B)": b * h * c * 2 * Q * p * n,
        "CBᵀ": b * g * c * 2 * Q * Q * n,
        "intra-chunk (scores @ x)": b * h * c * 2 * Q * Q * p,
        "inter-chunk (C @ state)": b * h * c * 2 * Q * n * p,
    }
    assert mm == pytest.approx(ours)
    dims = dict(batch=b, seqlen=l, nheads=h, headdim=p, dstate=n, ngroups=g, chunk_size=Q)
    total = costs.chunked_cost(**dims).flops
    assert sum(ours.values()) < total < 1.2 * sum(ours.values())  # the rest is elementwise work
