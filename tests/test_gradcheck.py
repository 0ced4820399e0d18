"""``torch.autograd.gradcheck`` of the cuTile SSD on tiny float64 problems, on the CPU executor's float64
tier.

The kernels accumulate in float32, too coarse for finite differences. Under ``executor.wide_floats()`` the
CPU executor holds and computes every float32 of a kernel in float64 (float64 arrays enter as float32, so the
kernels type-check as on the GPU): the same kernel code, in double precision. gradcheck then compares the
backward kernels' gradients with finite differences of the forward kernels, for every input, both paths. A
backward with a planted error must fail it.
"""

from __future__ import annotations

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError

from mamba2_tutorial.executor import wide_floats
from mamba2_tutorial.fast import ChunkScan, FastConfig, Fused, Segmented, SharedScan
from mamba2_tutorial.fast import backward as fast_backward
from mamba2_tutorial.fast.forward import ssd_forward
from mamba2_tutorial.kernels.forward import ssd_forward_taught
from mamba2_tutorial.lessons.inputs import SSDShape, make_inputs
from mamba2_tutorial.reference import ssd_chunked

FORWARDS = {"fast": ssd_forward, "taught": ssd_forward_taught}
#: (b, l, h, p, g, n, Q): tiny, every size distinct, a ragged last chunk, groups
TINY = [SSDShape(2, 11, 4, 3, 2, 5, 4), SSDShape(1, 13, 3, 2, 1, 6, 8)]


def _inputs(shape, seed):
    inp = make_inputs(shape, seed=seed, dtype=torch.float64, D=True, z=True, dt_bias=True,
                      initial_states=True)
    options = {k: v for k, v in inp.items() if not isinstance(v, torch.Tensor)}
    tensors = {k: v.detach().clone().requires_grad_() for k, v in inp.items() if isinstance(v, torch.Tensor)}
    return tensors, options


def _fn(forward, names, shape, options):
    def run(*tensors):
        return forward(**dict(zip(names, tensors)), **options, chunk_size=shape.chunk_size, backend="cpu",
                       return_final_states=True)
    return run


def test_the_float64_tier_computes_in_float64():
    tensors, options = _inputs(TINY[0], seed=0)
    want = ssd_chunked(**tensors, **options, chunk_size=TINY[0].chunk_size)
    with wide_floats():
        for forward in FORWARDS.values():
            got = forward(**tensors, **options, chunk_size=TINY[0].chunk_size, backend="cpu")
            assert got.dtype == torch.float64
            assert ((got - want).norm() / want.norm()).item() < 1e-13   # float32 would give ~1e-7
    with pytest.raises(TypeError, match="x has dtype torch.float64"):      # and float64 only there
        ssd_forward_taught(**tensors, **options, chunk_size=TINY[0].chunk_size, backend="cpu")


@pytest.mark.parametrize("path", list(FORWARDS))
@pytest.mark.parametrize("problem", range(len(TINY)))
def test_gradcheck(path, problem):
    """Every input (x, dt through dt_bias and softplus, A, B, C, D, z, initial_states), both outputs."""
    shape = TINY[problem]
    tensors, options = _inputs(shape, seed=problem)
    with wide_floats():
        fn = _fn(FORWARDS[path], list(tensors), shape, options)
        assert torch.autograd.gradcheck(fn, tuple(tensors.values()), fast_mode=problem == 0)


def test_gradcheck_catches_a_wrong_backward(monkeypatch):
    """The same check with dC off by 1% in the fast backward's chunk stage must fail."""
    real = fast_backward.ChunkBwdHeads.results

    def off_by_one_percent(self):
        dx, dB, dC, *rest = real(self)
        return (dx, dB, dC * 1.01, *rest)

    monkeypatch.setattr(fast_backward.ChunkBwdHeads, "results", off_by_one_percent)
    shape = TINY[1]
    tensors, options = _inputs(shape, seed=3)
    with wide_floats():
        fn = _fn(ssd_forward, list(tensors), shape, options)
        with pytest.raises(GradcheckError, match="Jacobian mismatch"):
            torch.autograd.gradcheck(fn, tuple(tensors.values()), fast_mode=True)


#: packed rows of TINY[0] (l = 11, Q = 4): row 0 from sequence 0, boundaries inside a chunk (3) and on a
#: chunk's edge (8); row 1 from sequence 1 (no initial state), a one-token sequence inside a chunk
PACKED_SEQ_IDX = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2], [1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3]],
                              dtype=torch.int32)
PACKED_CONFIGS = {"fused+shared": FastConfig(Fused(), SharedScan()),
                  "segmented+chunk": FastConfig(Segmented(segments=2), ChunkScan())}


@pytest.mark.parametrize("config", list(PACKED_CONFIGS))
def test_gradcheck_packed(config, monkeypatch):
    """Packed rows (``seq_idx``) in the fast forward's and backward's kernels: every input, both outputs,
    with the sequence-by-sequence fallback made to fail."""
    from mamba2_tutorial.fast import forward as fast_forward

    def each_sequence(*args, **kwargs):
        raise AssertionError("the packed batch ran sequence by sequence")
    monkeypatch.setattr(fast_forward, "_each_sequence", each_sequence)
    shape = TINY[0]
    tensors, options = _inputs(shape, seed=3)
    options = {**options, "seq_idx": PACKED_SEQ_IDX, "config": PACKED_CONFIGS[config]}
    with wide_floats():
        fn = _fn(ssd_forward, list(tensors), shape, options)
        assert torch.autograd.gradcheck(fn, tuple(tensors.values()), fast_mode=True)
