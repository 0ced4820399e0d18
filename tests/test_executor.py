"""The CPU tile executor: vector add, tiled matmul with ct.mma, launch() and the backend choice."""

from __future__ import annotations

import cuda.tile as ct
import numpy as np
import pytest
import torch

from mamba2_tutorial.executor import block_ids, run_kernel
from mamba2_tutorial.runtime.backends import ENV_VAR, BackendChoice, launch, select_backend

ZERO = ct.PaddingMode.ZERO


@ct.kernel
def vector_add(a, b, c, TILE: ct.Constant[int]):
    i = ct.bid(0)
    x = ct.load(a, (i,), (TILE,), padding_mode=ZERO)
    y = ct.load(b, (i,), (TILE,), padding_mode=ZERO)
    ct.store(c, (i,), x + y)


@ct.kernel
def tiled_matmul(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm = ct.bid(0)
    bn = ct.bid(1)
    acc = ct.full((TM, TN), 0, dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, (bm, k), (TM, TK), padding_mode=ZERO)
        b = ct.load(B, (k, bn), (TK, TN), padding_mode=ZERO)
        acc = ct.mma(a, b, acc)
    ct.store(C, (bm, bn), acc.astype(C.dtype))


@pytest.mark.parametrize("n", [1, 37, 128, 1000])
def test_vector_add_ragged(n):
    g = torch.Generator().manual_seed(n)
    a, b = torch.randn(n, generator=g), torch.randn(n, generator=g)
    c = torch.full((n,), float("nan"))
    run_kernel(vector_add, (ct.cdiv(n, 64),), (a, b, c, 64))
    assert torch.equal(c, a + b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("mnk", [(100, 70, 90), (64, 32, 16), (33, 65, 17)])
def test_tiled_matmul(dtype, mnk):
    m, n, k = mnk
    g = torch.Generator().manual_seed(m * n + k)
    A = torch.randn(m, k, generator=g).to(dtype)
    B = torch.randn(k, n, generator=g).to(dtype)
    C = torch.zeros(m, n, dtype=dtype)
    run_kernel(tiled_matmul, (ct.cdiv(m, 32), ct.cdiv(n, 16)), (A, B, C, 32, 16, 16))
    ref = (A.double() @ B.double()).to(dtype)
    tol = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(C.double(), ref.double(), rtol=tol, atol=tol * 4)


def test_launch_cpu_returns_choice_and_writes_in_place():
    a, b = torch.arange(50.0), torch.ones(50)
    c = torch.zeros(50)
    choice = launch(vector_add, (ct.cdiv(50, 16),), (a, b, c, 16), backend="cpu")
    assert choice == BackendChoice("cpu", choice.reason) and choice.name == "cpu"
    assert torch.equal(c, a + 1)


def test_select_backend_auto_without_gpu(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    choice = select_backend()
    assert choice.name == "cpu" and "no CUDA GPU" in choice.reason


def test_select_backend_env_override(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "cpu")
    assert select_backend("auto") == BackendChoice("cpu", f"{ENV_VAR}=cpu is set")
    monkeypatch.setenv(ENV_VAR, "tpu")
    with pytest.raises(ValueError, match=ENV_VAR):
        select_backend("auto")
    with pytest.raises(ValueError, match="backend must be one of"):
        select_backend("cuda")


def test_gpu_backend_rejects_cpu_tensors():
    a = torch.zeros(16)
    with pytest.raises((ValueError, RuntimeError), match="CUDA tensors|not usable"):
        launch(vector_add, (1,), (a, a, a, 16), backend="gpu")


def test_args_must_be_a_tuple():
    a = torch.zeros(16)
    with pytest.raises(TypeError, match="tuple"):
        launch(vector_add, (1,), [a, a, a, 16], backend="cpu")


def test_block_ids_orders():
    seq = block_ids((3, 2))
    assert seq[:4] == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)]
    rnd = block_ids((3, 2), "random", seed=1)
    assert sorted(rnd) == sorted(seq) and rnd != seq
    assert rnd == block_ids((3, 2), "random", seed=1)
    assert block_ids((3, 2), "reversed") == seq[::-1]
    with pytest.raises(ValueError, match="block_order"):
        block_ids((2,), "shuffled")


def test_numpy_arrays_are_accepted():
    a = np.arange(20, dtype=np.float32)
    c = np.zeros(20, dtype=np.float32)
    run_kernel(vector_add, (3,), (a, a, c, 8))
    np.testing.assert_array_equal(c, 2 * a)


def test_package_level_launch_is_callable_after_the_submodule_import():
    import mamba2_tutorial.runtime.backends  # noqa: F401  (binds the submodule as a package attribute)
    from mamba2_tutorial import launch as launch_from_package

    a, c = torch.arange(10.0), torch.zeros(10)
    choice = launch_from_package(vector_add, (1,), (a, a, c, 16), backend="cpu")
    assert choice.name == "cpu" and torch.equal(c, 2 * a)
