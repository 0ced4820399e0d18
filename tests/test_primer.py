"""The primer kernels (vector add, tiled matmul, row cumsum) vs torch: CPU executor in CI, GPU on H200."""

from __future__ import annotations

import pytest
import torch

from mamba2_tutorial.kernels.primer import matmul, row_cumsum, vector_add
from mamba2_tutorial.lessons.checks import assert_close

SEEDS = [0, 1, 2]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randn(*shape, dtype=torch.float32, gen, device="cpu"):
    return torch.randn(*shape, generator=gen).to(dtype=dtype, device=device)


# ---------------------------------------------------------------------------------------- CPU executor
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_vector_add_cpu_ragged(seed, dtype):
    gen = _gen(seed)
    n = int(torch.randint(1, 1500, (1,), generator=gen))
    a, b = _randn(n, dtype=dtype, gen=gen), _randn(n, dtype=dtype, gen=gen)
    c = vector_add(a, b, backend="cpu")
    assert c.shape == (n,) and c.dtype == dtype
    assert_close(c, (a.double() + b.double()), name="c")


def test_vector_add_store_is_masked_past_the_end():
    # a view of the first n elements of a bigger buffer: the ragged last tile must not write past n
    gen = _gen(3)
    n, tile = 300, 128
    a, b = _randn(n, gen=gen), _randn(n, gen=gen)
    big = torch.full((2 * tile * 3,), -7.0)
    from mamba2_tutorial.kernels.primer import vector_add_kernel
    from mamba2_tutorial.runtime.backends import launch

    launch(vector_add_kernel, (3, 1, 1), (a, b, big[:n], tile), backend="cpu")
    assert_close(big[:n], a + b, name="c")
    assert torch.all(big[n:] == -7.0), "the store wrote past the end of the array"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_matmul_cpu_ragged(seed, dtype):
    gen = _gen(10 + seed)
    m, n, k = (int(v) for v in torch.randint(1, 150, (3,), generator=gen))
    a, b = _randn(m, k, dtype=dtype, gen=gen), _randn(k, n, dtype=dtype, gen=gen)
    c = matmul(a, b, backend="cpu")
    assert c.shape == (m, n) and c.dtype == dtype
    assert_close(c, a.double() @ b.double(), name="C")


@pytest.mark.parametrize("tile", [(16, 32, 16), (32, 16, 64)])
def test_matmul_cpu_other_tiles_and_distinct_dims(tile):
    gen = _gen(20)
    m, n, k = 37, 53, 71  # no dimension a multiple of any tile size
    a, b = _randn(m, k, gen=gen), _randn(k, n, gen=gen)
    assert_close(matmul(a, b, tile=tile, backend="cpu"), a.double() @ b.double(), name="C")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_cumsum_cpu_ragged(seed, dtype):
    gen = _gen(30 + seed)
    rows = int(torch.randint(1, 40, (1,), generator=gen))
    length = int(torch.randint(1, 300, (1,), generator=gen))
    x = _randn(rows, length, dtype=dtype, gen=gen)
    y = row_cumsum(x, backend="cpu")
    assert y.shape == x.shape and y.dtype == dtype
    assert_close(y, torch.cumsum(x.double(), dim=1), name="y")


def test_row_cumsum_cpu_single_tile_and_many_tiles():
    gen = _gen(40)
    x = _randn(5, 7, gen=gen)
    assert_close(row_cumsum(x, tile=(4, 16), backend="cpu"), torch.cumsum(x.double(), 1), name="y")
    x = _randn(3, 200, gen=gen)
    assert_close(row_cumsum(x, tile=(2, 16), backend="cpu"), torch.cumsum(x.double(), 1), name="y")


def test_wrappers_reject_bad_inputs():
    a = torch.randn(10)
    with pytest.raises(ValueError, match="b must match a"):
        vector_add(a, torch.randn(11), backend="cpu")
    with pytest.raises(ValueError, match="a must be 1-D"):
        vector_add(torch.randn(2, 5), torch.randn(2, 5), backend="cpu")
    with pytest.raises(ValueError, match=r"shape \(K, N\)"):
        matmul(torch.randn(4, 5), torch.randn(6, 3), backend="cpu")
    with pytest.raises(TypeError, match="dtype"):
        matmul(torch.randn(4, 5).double(), torch.randn(5, 3).double(), backend="cpu")
    with pytest.raises(ValueError, match="power of two"):
        matmul(torch.randn(4, 5), torch.randn(5, 3), tile=(48, 64, 32), backend="cpu")
    with pytest.raises(ValueError, match="x must be 2-D"):
        row_cumsum(torch.randn(5), backend="cpu")


def test_empty_inputs():
    assert vector_add(torch.empty(0), torch.empty(0), backend="cpu").shape == (0,)
    c = matmul(torch.randn(3, 0), torch.randn(0, 4), backend="cpu")
    assert c.shape == (3, 4) and torch.all(c == 0)


# ---------------------------------------------------------------------------------------- GPU
@pytest.mark.gpu
@pytest.mark.parametrize("seed", SEEDS)
def test_primer_gpu_matches_torch_and_cpu_executor(seed):
    gen = _gen(50 + seed)
    n = int(torch.randint(1, 5000, (1,), generator=gen))
    a, b = _randn(n, gen=gen), _randn(n, gen=gen)
    c_gpu = vector_add(a.cuda(), b.cuda(), backend="gpu")
    assert c_gpu.is_cuda
    assert_close(c_gpu, a.double() + b.double(), name="c")

    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        m, n_, k = (int(v) for v in torch.randint(1, 300, (3,), generator=gen))
        a2, b2 = _randn(m, k, dtype=dtype, gen=gen), _randn(k, n_, dtype=dtype, gen=gen)
        c_gpu = matmul(a2.cuda(), b2.cuda(), backend="gpu")
        assert_close(c_gpu, a2.double() @ b2.double(), name="C")
        assert_close(c_gpu, matmul(a2, b2, backend="cpu"), name="C")

    rows, length = (int(v) for v in torch.randint(1, 700, (2,), generator=gen))
    x = _randn(rows % 60 + 1, length, gen=gen)
    y_gpu = row_cumsum(x.cuda(), backend="gpu")
    assert_close(y_gpu, torch.cumsum(x.double(), 1), name="y")
    assert_close(y_gpu, row_cumsum(x, backend="cpu"), name="y")
