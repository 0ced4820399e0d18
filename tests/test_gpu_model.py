"""The GPU execution model of notebook 04: Hopper's numbers, the occupancy calculator, the figure, and what
tileiras makes of a load and an mma (read from the compiler's remarks and the cubin, no GPU needed)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import cuda.tile as ct  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from mamba2_tutorial.figures.gpu import SM_GID, plot_gpu_model  # noqa: E402
from mamba2_tutorial.kernels import primer  # noqa: E402
from mamba2_tutorial.runtime.compile import _parse_remarks, compile_cubin, compiler_remarks  # noqa: E402
from mamba2_tutorial.runtime.hardware import H100_SXM, H200, KiB, MiB, cubin_launch_info, occupancy  # noqa: E402


def test_hopper_numbers_are_consistent():
    for spec in (H100_SXM, H200):
        assert spec.sm_count == 132 and spec.arch == "sm_90"
        assert spec.registers_per_sm * 4 == 256 * KiB  # 64 K 32-bit registers
        assert spec.max_threads_per_sm == 2048
        assert spec.max_shared_per_sm == 228 * KiB <= spec.l1_shared_per_sm
        assert spec.l2_bytes == 50 * MiB
        assert spec.tensor_cores == 528 and spec.fp32_lanes == 16_896
        assert spec.peak_flops["bf16"] == pytest.approx(2 * spec.peak_flops["tf32"], rel=1e-3)
        assert spec.peak_flops["bf16"] == pytest.approx(spec.peak_flops["fp8"] / 2, rel=1e-3)
        assert spec.peak_flops["bf16"] > 10 * spec.peak_flops["fp32"]
        assert "fp32" not in spec.tensor_core_dtypes  # float32 operands do not run on the tensor cores
    # the two differ only in their memory
    assert (H200.memory, H200.memory_bytes, H200.memory_bandwidth) == ("HBM3e", 141e9, 4.8e12)
    assert (H100_SXM.memory, H100_SXM.memory_bytes, H100_SXM.memory_bandwidth) == ("HBM3", 80e9, 3.35e12)
    assert H200.peak_flops == H100_SXM.peak_flops and H200.l2_bytes == H100_SXM.l2_bytes
    assert 200 < H200.ridge("bf16") < 210  # 989 TFLOP/s over 4.8 TB/s: ~206 FLOP per byte


@pytest.mark.parametrize(
    ("threads", "regs", "smem", "blocks", "limiter"),
    [
        (256, 255, 0, 1, "registers"),  # 255 rounds up to 256 per thread: 65 536 registers, the whole file
        (256, 128, 0, 2, "registers"),
        (256, 64, 0, 4, "registers"),
        (128, 32, 0, 16, "warps"),  # 4 warps each, 64 warps per SM
        (32, 16, 0, 32, "blocks"),  # the 32-blocks-per-SM cap
        (128, 64, 100 * KiB, 2, "shared memory"),  # (100 + 1 reserved) KiB each, 228 KiB per SM
    ],
)
def test_occupancy_calculator(threads, regs, smem, blocks, limiter):
    occ = occupancy(threads, regs, smem)
    assert occ.blocks_per_sm == blocks, occ
    assert occ.limiter == limiter, occ
    assert occ.warps_per_sm <= H200.max_warps_per_sm
    assert occ.fraction == occ.warps_per_sm / 64
    assert occ.waves(132 * blocks * 3) == 3
    assert "limited by" in str(occ)


def test_occupancy_rejects_impossible_blocks():
    with pytest.raises(ValueError, match="threads_per_block"):
        occupancy(2048, 32)
    with pytest.raises(ValueError, match="registers_per_thread"):
        occupancy(128, 300)
    with pytest.raises(ValueError, match="shared_per_block"):
        occupancy(128, 32, 300 * KiB)


def test_gpu_model_figure_draws_every_sm_and_the_numbers():
    fig = plot_gpu_model(H200, grid_blocks=300, blocks_per_sm=2)
    ax = fig.axes[0]
    sms = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_gid() == SM_GID]
    assert len(sms) == 132
    # 300 blocks, 2 per SM: 264 in the first wave, so 132 SMs hold two blocks (darker) and none is idle
    colors = {tuple(p.get_facecolor()) for p in sms}
    assert len(colors) == 1
    text = " ".join(t.get_text() for t in ax.texts)
    for needle in ("132 SMs", "50 MiB", "HBM3e: 141 GB at 4.80 TB/s", "228 KiB shared", "65,536 x 32 bit",
                   "tensor core", "TMA", "FMA", "264 in the first wave, 2 waves"):
        assert needle in text, needle
    h100 = " ".join(t.get_text() for t in plot_gpu_model(H100_SXM).axes[0].texts)
    assert "HBM3: 80 GB at 3.35 TB/s" in h100 and "in the first wave" not in h100
    with pytest.raises(ValueError, match="blocks_per_sm"):
        plot_gpu_model(blocks_per_sm=0)
    with pytest.raises(ValueError, match="grid_blocks"):
        plot_gpu_model(grid_blocks=0)


def _matmul_args(dtype, M=128, N=72, K=64):
    A, B = torch.randn(M, K).to(dtype), torch.randn(K, N).to(dtype)
    return A, B, torch.empty(M, N, dtype=dtype), 64, 64, 32


ZERO = ct.PaddingMode.ZERO


@ct.kernel
def _matmul_tf32(A, B, C, TM: ct.Constant[int], TN: ct.Constant[int], TK: ct.Constant[int]):
    bm, bn = ct.bid(0), ct.bid(1)
    acc = ct.zeros((TM, TN), dtype=ct.float32)
    for k in range(ct.num_tiles(A, axis=1, shape=(TM, TK))):
        a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ZERO).astype(ct.tfloat32)
        b = ct.load(B, index=(k, bn), shape=(TK, TN), padding_mode=ZERO).astype(ct.tfloat32)
        acc = ct.mma(a, b, acc)
    ct.store(C, index=(bm, bn), tile=acc.astype(C.dtype))


def _mma(remarks):
    return {(r.status, r.instruction) for r in remarks if r.category == "Tensor-core"}


def test_tensor_cores_take_bf16_and_tf32_but_not_float32():
    """The fact notebook 04 teaches: float32 operands of ct.mma are compiled to FMA instructions."""
    assert _mma(compiler_remarks(primer.matmul_kernel, _matmul_args(torch.bfloat16))) == {
        ("passed", "Tensor-core SM90")}
    tf32 = compiler_remarks(_matmul_tf32, _matmul_args(torch.float32))
    assert _mma(tf32) == {("passed", "Tensor-core SM90")}
    assert _mma(compiler_remarks(primer.matmul_kernel, _matmul_args(torch.float32))) == {("failed", "FMA")}
    assert _mma(compiler_remarks(primer.matmul_kernel, _matmul_args(torch.float16), arch="sm_80")) == {
        ("passed", "Tensor-core SM80")}


@pytest.mark.parametrize(("tile", "instruction"), [((16, 16, 16), "FMA"), ((32, 32, 32), "Tensor-core SM80"),
                                                   ((64, 64, 32), "Tensor-core SM90")])
def test_tensor_cores_need_large_enough_tiles(tile, instruction):
    """bf16 alone is not enough: 16 x 16 tiles run as FMA, 32-row tiles as Ampere's mma, 64-row as wgmma."""
    args = (*_matmul_args(torch.bfloat16, M=256, N=256, K=256)[:3], *tile)
    remarks = compiler_remarks(primer.matmul_kernel, args, "sm_90", category="tensorcore")
    assert {r.instruction for r in remarks} == {instruction}


def test_tma_needs_16_byte_aligned_strides():
    aligned = compiler_remarks(primer.matmul_kernel, _matmul_args(torch.bfloat16), category="memory")
    assert {r.instruction for r in aligned if r.status == "passed"} == {"TMA Load instruction",
                                                                        "TMA Store instruction"}
    ragged = compiler_remarks(primer.matmul_kernel, _matmul_args(torch.bfloat16, K=50), category="memory")
    failed = [r for r in ragged if r.status == "failed"]
    assert failed and all("16-byte" in r.reason for r in failed)  # A's rows are 100 bytes apart
    assert {r.source for r in failed} == {"a = ct.load(A, index=(bm, k), shape=(TM, TK), padding_mode=ZERO)"}
    ampere = compiler_remarks(primer.matmul_kernel, _matmul_args(torch.bfloat16), arch="sm_80")
    assert not any("TMA" in r.instruction for r in ampere)  # no TMA before Hopper


def test_parse_remarks_reads_every_field_once():
    text = """in function: k:

  category: Memory
    remark[failed]: Failed to select TMA load instruction
      --> "/x/k.py":86:12
       |
       = name: RemarkMemoryTmaLoadFailed
       = reason: loc("/x/k.py":86:12): stride not 16-byte aligned

    remark[failed]: Failed to select TMA load instruction
      --> "/x/k.py":86:12
       |
       = name: RemarkMemoryTmaLoadFailed
       = reason: loc("/x/k.py":86:12): stride not 16-byte aligned

  category: Tensor-core
    remark[passed]: MMA operation successfully optimized to use Tensor Cores
      --> "/x/k.py":90:14
       |
       = name: RemarkTensorCoreMMA
       = note: Instruction = Tensor-core SM90
       = note: Shape = [64, 64, 16]
"""
    memory, mma = _parse_remarks(text)
    assert (memory.category, memory.status, memory.line, memory.reason) == (
        "Memory", "failed", 86, "stride not 16-byte aligned")
    assert (mma.category, mma.line, mma.instruction, mma.shape) == ("Tensor-core", 90, "Tensor-core SM90",
                                                                    (64, 64, 16))
    with pytest.raises(ValueError, match="category"):
        compiler_remarks(primer.matmul_kernel, _matmul_args(torch.bfloat16), category="tensor")


def test_cubin_launch_info_and_the_occupancy_hint():
    args = _matmul_args(torch.bfloat16)
    base = cubin_launch_info(compile_cubin(primer.matmul_kernel, args, "sm_90"))
    assert base["threads_per_block"] % 32 == 0 and base["static_shared_bytes"] > 0
    for hint in (2, 4):
        hinted = primer.matmul_kernel.replace_hints(occupancy=hint)
        info = cubin_launch_info(compile_cubin(hinted, args, "sm_90"))
        assert info["threads_per_block"] == base["threads_per_block"]
        occ = occupancy(info["threads_per_block"], info["registers_per_thread"], info["static_shared_bytes"])
        assert occ.blocks_per_sm >= hint, occ  # the hint caps registers so that `hint` blocks fit
        assert info["registers_per_thread"] <= base["registers_per_thread"]
    with pytest.raises(ValueError, match="ELF"):
        cubin_launch_info(b"not a cubin at all, just bytes")
