"""Packed sequences (``seq_idx``, ``cu_seqlens``, ``return_varlen_states``): every form equals each sequence
run alone, and bad packing arguments get an error that names them.

The oracle is :func:`ssd_each_sequence` with the float64 recurrence: it cuts each row at its boundaries and
runs every sequence by itself. The recurrence with resets, the dual form with a block-diagonal L and the
chunked form run per sequence must all agree with it, on packs whose boundaries fall inside chunks, with a
one-token sequence and with a sequence longer than several chunks; and the sequences that follow the first
must not see the initial state.
"""

from __future__ import annotations

import functools

import pytest
import torch

from mamba2_tutorial.lessons.checks import assert_close
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs
from mamba2_tutorial.reference import (
    seq_idx_from_cu_seqlens,
    ssd_chunked,
    ssd_each_sequence,
    ssd_quadratic,
    ssd_recurrent,
)
from mamba2_tutorial.runtime.validation import validate_packing

#: per row, the lengths of its sequences (each row sums to l = 29); chunk size 8 puts boundaries inside chunks
PACKS = {
    "inside chunks, one token": [[5, 1, 23], [11, 9, 9]],
    "one sequence per row": [[29], [29]],
    "many short": [[3, 2, 4, 1, 1, 6, 5, 7], [1, 28]],
}
SHAPE = SSDShape(2, 29, 6, 5, 3, 7, 8, name="packed")


def seq_idx_of(lengths_per_row, first_id=0) -> torch.Tensor:
    rows = [torch.repeat_interleave(torch.arange(first_id, first_id + len(ls), dtype=torch.int32),
                                    torch.tensor(ls)) for ls in lengths_per_row]
    return torch.stack(rows)


def inputs(seed, **options):
    kw = make_inputs(SHAPE, seed=seed, dtype=torch.float64, D=True, z=True, dt_bias=True,
                     initial_states=True, **options)
    return kw


@pytest.mark.parametrize("pack", list(PACKS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_form_equals_each_sequence_alone(pack, seed):
    kw = inputs(seed)
    seq_idx = seq_idx_of(PACKS[pack])
    want_y, want_final = ssd_each_sequence(ssd_recurrent, seq_idx=seq_idx, return_final_states=True, **kw)
    for name, form in (("recurrent", ssd_recurrent), ("quadratic", ssd_quadratic)):
        y, final = form(seq_idx=seq_idx, return_final_states=True, **kw)
        assert_close(y, want_y, name=f"{name} y, {pack}")
        assert_close(final, want_final, name=f"{name} final_states, {pack}")
    chunked = functools.partial(ssd_chunked, chunk_size=SHAPE.chunk_size)
    y, final = ssd_each_sequence(chunked, seq_idx=seq_idx, return_final_states=True, **kw)
    assert_close(y, want_y, name=f"chunked per sequence y, {pack}")
    assert_close(final, want_final, name=f"chunked per sequence final_states, {pack}")


def test_a_packed_row_is_not_the_unpacked_row_and_later_sequences_ignore_the_initial_state():
    kw = inputs(3)
    seq_idx = seq_idx_of(PACKS["inside chunks, one token"])
    packed = ssd_recurrent(seq_idx=seq_idx, **kw)
    whole = ssd_recurrent(**kw)
    # the first sequence of each row is the same either way; after its end the packed row differs
    for row, lengths in enumerate(PACKS["inside chunks, one token"]):
        first = lengths[0]
        assert_close(packed[row, :first], whole[row, :first], name="first sequence")
        assert (packed[row, first:] - whole[row, first:]).abs().max() > 1e-3
    # a sequence other than sequence 0 starts from zero whatever the initial state
    zeros = torch.zeros_like(kw["initial_states"])
    zero_init = ssd_recurrent(seq_idx=seq_idx, **{**kw, "initial_states": zeros})
    for row, lengths in enumerate(PACKS["inside chunks, one token"]):
        assert_close(packed[row, lengths[0]:], zero_init[row, lengths[0]:], name="later sequences")
    # a row whose first sequence is not number 0 never sees the initial state (mamba_ssm's convention)
    shifted = ssd_recurrent(seq_idx=seq_idx + 1, **kw)
    assert_close(shifted, zero_init, name="a row starting at sequence 1")


def test_varlen_states_are_each_sequence_final_state():
    shape = SSDShape(1, 37, 4, 3, 2, 5, 8)
    kw = make_inputs(shape, seed=4, dtype=torch.float64, initial_states=True)
    cu_seqlens = torch.tensor([0, 9, 10, 30, 37], dtype=torch.int32)
    seq_idx = seq_idx_from_cu_seqlens(cu_seqlens)
    assert seq_idx.shape == (1, 37) and seq_idx.dtype == torch.int32
    y, final, varlen = ssd_recurrent(seq_idx=seq_idx, cu_seqlens=cu_seqlens, return_final_states=True,
                                     return_varlen_states=True, **kw)
    assert varlen.shape == (4, 4, 3, 5)
    for i in range(4):
        start, end = int(cu_seqlens[i]), int(cu_seqlens[i + 1])
        alone = {k: (v[:, start:end] if k in ("x", "dt", "B", "C") else v) for k, v in kw.items()}
        if i:
            alone["initial_states"] = None
        _, final_i = ssd_recurrent(return_final_states=True, **alone)
        assert_close(varlen[i], final_i[0], name=f"sequence {i}'s final state")
    assert_close(final, varlen[-1:], name="final_states is the last sequence's")
    oracle = ssd_each_sequence(ssd_recurrent, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
                               return_varlen_states=True, **kw)
    assert_close(oracle[1], varlen, name="oracle's varlen states")
    assert_close(oracle[0], y, name="oracle's y")


def test_packed_forms_are_differentiable_like_the_oracle():
    kw = make_inputs(SSDShape(1, 13, 2, 3, 1, 4, 4), seed=5, dtype=torch.float64, initial_states=True)
    seq_idx = seq_idx_of([[4, 1, 8]])
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    others = {k: v for k, v in kw.items() if k not in leaves}

    def grads(run):
        out = run(**leaves, **others)
        return torch.autograd.grad(out.square().sum(), list(leaves.values()))

    want = grads(lambda **a: ssd_each_sequence(ssd_recurrent, seq_idx=seq_idx, **a))
    got = grads(lambda **a: ssd_quadratic(seq_idx=seq_idx, **a))
    for name, g_want, g_got in zip(leaves, want, got):
        assert_close(g_got, g_want, name=f"d{name}")


@pytest.mark.parametrize("case, error, words", [
    ("decreasing", ValueError, "non-decreasing"),
    ("int64", TypeError, "int32"),
    ("shape", ValueError, "seq_idx must have shape (b, l)"),
    ("negative", ValueError, ">= 0"),
    ("cu without seq_idx", ValueError, "need seq_idx"),
    ("varlen without cu", ValueError, "needs cu_seqlens"),
    ("cu with b > 1", ValueError, "b must be 1"),
    ("cu disagrees", ValueError, "disagrees with seq_idx"),
    ("cu wrong end", ValueError, "must end at the sequence length"),
    ("cu not increasing", ValueError, "strictly increase"),
])
def test_bad_packing_arguments_are_named(case, error, words):
    b, l = (2, 10) if case == "cu with b > 1" else (1, 10)
    good = seq_idx_of([[4, 6]] * b)
    args = {"seq_idx": good, "cu_seqlens": None, "return_varlen_states": False}
    if case == "decreasing":
        args["seq_idx"] = torch.tensor([[0, 0, 1, 1, 0, 2, 2, 2, 2, 2]], dtype=torch.int32)
    elif case == "int64":
        args["seq_idx"] = good.long()
    elif case == "shape":
        args["seq_idx"] = good[:, :7]
    elif case == "negative":
        args["seq_idx"] = good - 1
    elif case == "cu without seq_idx":
        args |= {"seq_idx": None, "cu_seqlens": torch.tensor([0, 4, 10], dtype=torch.int32)}
    elif case == "varlen without cu":
        args["return_varlen_states"] = True
    elif case == "cu with b > 1":
        args["cu_seqlens"] = torch.tensor([0, 4, 10], dtype=torch.int32)
    elif case == "cu disagrees":
        args["cu_seqlens"] = torch.tensor([0, 5, 10], dtype=torch.int32)
    elif case == "cu wrong end":
        args["cu_seqlens"] = torch.tensor([0, 4, 12], dtype=torch.int32)
    elif case == "cu not increasing":
        args["cu_seqlens"] = torch.tensor([0, 4, 4, 10], dtype=torch.int32)
    with pytest.raises(error, match=None) as info:
        validate_packing(**args, b=b, l=l, device=torch.device("cpu"))
    assert words in str(info.value), str(info.value)


def test_no_packing_is_none_and_a_good_pack_has_its_bounds():
    assert validate_packing(None, None, False, 2, 10, torch.device("cpu")) is None
    packing = validate_packing(seq_idx_of([[4, 1, 5], [10]]), None, False, 2, 10, torch.device("cpu"))
    assert packing.bounds == (((0, 4), (4, 5), (5, 10)), ((0, 10),))


def test_ssd_forward_runs_packed_rows_like_each_sequence_alone_with_gradients():
    """The cuTile fast path (CPU executor) on a packed batch: outputs, final states and the gradients of
    every input equal the float64 recurrence with resets, within float32 tolerance."""
    from mamba2_tutorial import ssd_forward

    shape = SSDShape(2, 21, 4, 3, 2, 5, 8)
    kw = make_inputs(shape, seed=6, dtype=torch.float32, D=True, z=True, dt_bias=True, initial_states=True)
    seq_idx = seq_idx_of([[5, 1, 15], [12, 9]])
    leaves = {k: v.clone().requires_grad_() for k, v in kw.items() if isinstance(v, torch.Tensor)}
    options = {k: v for k, v in kw.items() if k not in leaves}
    y, final = ssd_forward(chunk_size=shape.chunk_size, seq_idx=seq_idx, return_final_states=True,
                           backend="cpu", **leaves, **options)
    wide = {k: v.detach().double().requires_grad_() for k, v in leaves.items()}
    want_y, want_final = ssd_recurrent(seq_idx=seq_idx, return_final_states=True, **wide, **options)
    assert_close(y, want_y.float(), name="y")
    assert_close(final, want_final.float(), name="final_states")
    weight = torch.randn(y.shape, generator=torch.Generator().manual_seed(1))
    got = torch.autograd.grad((y * weight).sum() + final.sum(), list(leaves.values()))
    want = torch.autograd.grad((want_y * weight.double()).sum() + want_final.sum(), list(wide.values()))
    for name, g_got, g_want in zip(leaves, got, want):
        assert_close(g_got, g_want.float(), name=f"d{name}")
