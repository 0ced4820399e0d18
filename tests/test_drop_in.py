"""``ssd_forward`` and ``ssd_forward_taught`` as drop-ins for mamba_ssm's ``mamba_chunk_scan_combined``:
the same parameters in the same positions, called the ways mamba_ssm calls it, and a clear error for what they
do not support yet (packed sequences of different lengths), never a silent wrong answer.

mamba_ssm 2.2's signature (``mamba_ssm/ops/triton/ssd_combined.py``)::

    mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                              seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False, return_varlen_states=False)
"""

from __future__ import annotations

import inspect

import pytest
import torch

from mamba2_tutorial import reference as ref
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.kernels.forward import ssd_forward_taught
from mamba2_tutorial.lessons.checks import relative_error
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs

#: mamba_chunk_scan_combined's parameters, in order, with their defaults
MAMBA_SSM_PARAMETERS = [
    ("x", inspect.Parameter.empty), ("dt", inspect.Parameter.empty), ("A", inspect.Parameter.empty),
    ("B", inspect.Parameter.empty), ("C", inspect.Parameter.empty), ("chunk_size", inspect.Parameter.empty),
    ("D", None), ("z", None), ("dt_bias", None), ("initial_states", None), ("seq_idx", None),
    ("cu_seqlens", None), ("dt_softplus", False), ("dt_limit", (0.0, float("inf"))),
    ("return_final_states", False), ("return_varlen_states", False),
]

FORWARDS = {"ssd_forward": ssd_forward, "ssd_forward_taught": ssd_forward_taught}


@pytest.mark.parametrize("name", FORWARDS)
def test_the_parameters_are_mamba_ssms_in_its_positions(name):
    params = list(inspect.signature(FORWARDS[name]).parameters.values())
    head = params[:len(MAMBA_SSM_PARAMETERS)]
    assert [(p.name, p.default) for p in head] == MAMBA_SSM_PARAMETERS
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in head)
    # the project's own options come after them, keyword-only, so that no positional call reaches one
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[len(MAMBA_SSM_PARAMETERS):])


@pytest.fixture(scope="module")
def problem():
    """A small problem with every optional input: ragged last chunk, two groups."""
    shape = SSDShape(2, 50, 4, 16, 2, 16, 16)
    inp = make_inputs(shape, seed=11, dtype=torch.float32, D=True, z=True, dt_bias=True, initial_states=True)
    return {**inp, "chunk_size": shape.chunk_size}


@pytest.mark.parametrize("name", FORWARDS)
def test_called_as_mamba_ssms_own_tests_call_it(name, problem):
    """mamba_ssm's test of the SSD against ``ssd_minimal_discrete`` calls
    ``mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D=None)``; its Mamba-2 layer passes D, z, dt_bias
    and the rest after the six leading tensors and the chunk size. Every argument positional gives the results
    of the same call by keyword, and of the float64 reference."""
    forward = FORWARDS[name]
    x, dt, A, B, C = (problem[k] for k in ("x", "dt", "A", "B", "C"))
    D, z, dt_bias, init = (problem[k] for k in ("D", "z", "dt_bias", "initial_states"))
    Q = problem["chunk_size"]

    dt_positive = torch.nn.functional.softplus(dt + dt_bias)   # a processed dt, as that test passes
    plain = forward(x, dt_positive, A, B, C, Q, D=None, backend="cpu")
    want = ref.ssd_chunked(*(t.double() for t in (x, dt_positive, A, B, C)), chunk_size=Q)
    assert relative_error(plain, want) < 1e-4

    limit = (0.0, 2.0)
    positional = forward(x, dt, A, B, C, Q, D, z, dt_bias, init, None, None, True, limit, True, False,
                         backend="cpu")
    by_keyword = forward(x, dt, A, B, C, chunk_size=Q, D=D, z=z, dt_bias=dt_bias, initial_states=init,
                         dt_softplus=True, dt_limit=limit, return_final_states=True, backend="cpu")
    assert isinstance(positional, tuple) and len(positional) == 2
    for got, same in zip(positional, by_keyword):
        assert torch.equal(got, same)
    out, final = ref.ssd_chunked(*(t.double() for t in (x, dt, A, B, C)), chunk_size=Q, D=D.double(),
                                 z=z.double(), dt_bias=dt_bias.double(), initial_states=init.double(),
                                 dt_softplus=True, dt_limit=limit, return_final_states=True)
    assert relative_error(positional[0], out) < 1e-4
    assert relative_error(positional[1], final) < 1e-4


@pytest.mark.parametrize(("argument", "position"), [("seq_idx", 10), ("cu_seqlens", 11),
                                                    ("return_varlen_states", 15)])
def test_the_taught_forward_refuses_packed_sequences_by_name_and_says_where_they_run(argument, position,
                                                                                     problem):
    x, dt, A, B, C = (problem[k] for k in ("x", "dt", "A", "B", "C"))
    b, l = x.shape[:2]
    value = {"seq_idx": torch.zeros(b, l, dtype=torch.int32),
             "cu_seqlens": torch.tensor([0, 20, l], dtype=torch.int32),
             "return_varlen_states": True}[argument]
    with pytest.raises(NotImplementedError, match=rf"^{argument} is not supported by ssd_forward_taught.*"
                                                  r"ssd_forward \(the fast path"):
        ssd_forward_taught(x, dt, A, B, C, problem["chunk_size"], **{argument: value}, backend="cpu")
    args = [x, dt, A, B, C, problem["chunk_size"], None, None, None, None, None, None, False,
            (0.0, float("inf")), False, False]
    args[position] = value
    with pytest.raises(NotImplementedError, match=argument):
        ssd_forward_taught(*args, backend="cpu")
    # None and False are what mamba_ssm passes when the batch is not packed: accepted
    args[position] = None if argument != "return_varlen_states" else False
    assert ssd_forward_taught(*args, backend="cpu").shape == x.shape


def test_ssd_forward_takes_packed_sequences_in_mamba_ssms_positions(problem):
    """``mamba_chunk_scan_combined(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx,
    cu_seqlens, dt_softplus, dt_limit, return_final_states, return_varlen_states)`` with a packed batch."""
    x, dt, A, B, C = (problem[k][:1] if problem[k].dim() > 1 else problem[k]
                      for k in ("x", "dt", "A", "B", "C"))
    l = x.shape[1]
    cu_seqlens = torch.tensor([0, 3, 4, l], dtype=torch.int32)
    seq_idx = ref.seq_idx_from_cu_seqlens(cu_seqlens)
    out, final, varlen = ssd_forward(x, dt, A, B, C, problem["chunk_size"], None, None, None, None, seq_idx,
                                     cu_seqlens, False, (0.0, float("inf")), True, True, backend="cpu")
    want, want_final, want_varlen = ref.ssd_recurrent(
        x.double(), dt.double(), A.double(), B.double(), C.double(), seq_idx=seq_idx, cu_seqlens=cu_seqlens,
        return_final_states=True, return_varlen_states=True)
    assert relative_error(out, want) < 1e-4 and relative_error(final, want_final) < 1e-4
    assert varlen.shape == (3, *final.shape[1:]) and relative_error(varlen, want_varlen) < 1e-4


def test_a_seventeenth_positional_argument_is_refused():
    """``backend`` and ``config`` are keyword-only: a positional call with one argument more than mamba_ssm
    takes fails at once instead of reaching them."""
    with pytest.raises(TypeError):
        ssd_forward(*range(17))
