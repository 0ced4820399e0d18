"""The GPU the kernels target, as numbers: NVIDIA Hopper (H100 SXM5 and H200), and an occupancy calculator.

Notebook 04 teaches the execution model with these numbers; notebooks 05-09 refer back to it.

Sources: NVIDIA's H100 Tensor Core GPU Architecture whitepaper (GH100 in the H100 SXM5 configuration: 132 SMs,
50 MB of L2), the H100 and H200 product datasheets (memory size and bandwidth, dense tensor-core rates; the
datasheets print rates "with sparsity", twice the dense ones given here) and the CUDA C++ Programming Guide's
table of technical specifications per compute capability (9.0: 64 K registers per SM, 255 per thread, up to
228 KiB of shared memory per SM and 227 KiB per block, 64 resident warps and 32 resident blocks per SM).

The H100 SXM5 and the H200 use the same GH100 chip with the same SMs, caches and clocks; they differ only in
their memory (HBM3, 80 GB at 3.35 TB/s against HBM3e, 141 GB at 4.8 TB/s). Sizes of on-chip memories are
binary (KiB, MiB); memory capacity and bandwidth are decimal (GB, TB/s), as NVIDIA prints them.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field, replace

__all__ = [
    "GPUSpec",
    "H100_SXM",
    "H200",
    "Occupancy",
    "GPUS",
    "cubin_launch_info",
    "gpu_spec",
    "occupancy",
    "sm_count",
]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class GPUSpec:
    """One GPU's execution resources (per SM and for the whole chip) and its datasheet rates."""

    name: str
    arch: str  # the tileiras --gpu-name
    sm_count: int
    # per SM
    warp_size: int = 32
    max_warps_per_sm: int = 64
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 64 * 1024  # 32-bit registers: a 256 KiB register file
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256  # registers are allocated to a warp in units of 256 (8 per thread)
    l1_shared_per_sm: int = 256 * KiB  # one SRAM array, split between L1 cache and shared memory
    max_shared_per_sm: int = 228 * KiB
    max_shared_per_block: int = 227 * KiB
    reserved_shared_per_block: int = 1 * KiB  # the system's share of each resident block
    sub_partitions_per_sm: int = 4  # each: a warp scheduler, a quarter of the registers, one tensor core
    fp32_lanes_per_sm: int = 128  # CUDA cores: 32 fp32 FMA per clock per sub-partition
    # chip
    l2_bytes: int = 50 * MiB
    memory: str = ""
    memory_bytes: float = 0.0
    memory_bandwidth: float = 0.0  # bytes/s, datasheet
    # dense peak rates (FLOP/s, datasheet, no sparsity); "fp32" is the CUDA cores, the rest the tensor cores
    peak_flops: dict = field(default_factory=dict)
    #: what each tensor-core input dtype is, and what runs where (the teaching summary of notebook 04)
    tensor_core_dtypes: tuple = ("tf32", "fp16", "bf16", "fp8 (e4m3, e5m2)", "int8", "fp64")

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * self.warp_size

    @property
    def registers_per_sub_partition(self) -> int:
        return self.registers_per_sm // self.sub_partitions_per_sm

    @property
    def tensor_cores(self) -> int:
        return self.sm_count * self.sub_partitions_per_sm

    @property
    def fp32_lanes(self) -> int:
        return self.sm_count * self.fp32_lanes_per_sm

    def ridge(self, dtype: str = "bf16") -> float:
        """FLOP per byte of device memory above which a kernel of ``dtype`` matmuls is compute-bound."""
        return self.peak_flops[dtype] / self.memory_bandwidth


_HOPPER_RATES = {  # dense, from the H100 SXM5 / H200 datasheets (identical: same chip, same clocks)
    "fp64": 67e12,  # tensor cores (FP64 on CUDA cores: 34 TFLOP/s)
    "fp32": 67e12,  # CUDA cores: 16 896 lanes x 2 FLOP x ~1.98 GHz
    "tf32": 494.7e12,
    "bf16": 989.4e12,
    "fp16": 989.4e12,
    "fp8": 1978.9e12,
}

#: H100 SXM5: GH100 with 132 SMs enabled, 80 GB of HBM3 at 3.35 TB/s.
H100_SXM = GPUSpec(
    name="NVIDIA H100 SXM5",
    arch="sm_90",
    sm_count=132,
    memory="HBM3",
    memory_bytes=80e9,
    memory_bandwidth=3.35e12,
    peak_flops=dict(_HOPPER_RATES),
)

#: H200 (SXM): the same chip as the H100 SXM5, with 141 GB of HBM3e at 4.8 TB/s. The tuning table's GPU.
H200 = replace(H100_SXM, name="NVIDIA H200", memory="HBM3e", memory_bytes=141e9, memory_bandwidth=4.8e12)

#: the GPUs described here, by the name CUDA reports (``torch.cuda.get_device_name``); an H100 SXM5 reports
#: itself as "NVIDIA H100 80GB HBM3"
GPUS: dict[str, GPUSpec] = {spec.name: spec for spec in (H100_SXM, H200)}
GPUS["NVIDIA H100 80GB HBM3"] = H100_SXM


def gpu_spec(name: str) -> GPUSpec:
    """The :class:`GPUSpec` of the GPU CUDA calls ``name``; ValueError listing the known ones otherwise."""
    try:
        return GPUS[name]
    except KeyError:
        raise ValueError(f"no GPUSpec for GPU {name!r}: known are {sorted(GPUS)}; describe it in "
                         "mamba2_tutorial/runtime/hardware.py") from None


def sm_count(device) -> int:
    """The SMs a launch on ``device`` has: the GPU's own count for a CUDA device (asked once per GPU), and
    the H200's (:data:`H200`, the GPU the shipped tables are tuned on) for the CPU executor, so that both
    tiers split the work the same way. The one source of the SM count for every tuned launch."""
    if getattr(device, "type", device) == "cuda":
        import torch

        index = device.index if getattr(device, "index", None) is not None else torch.cuda.current_device()
        return _cuda_sm_count(index)
    return H200.sm_count


@functools.lru_cache(maxsize=16)
def _cuda_sm_count(index: int) -> int:          # launches are on the host's hot path
    import torch

    return torch.cuda.get_device_properties(index).multi_processor_count


@dataclass(frozen=True)
class Occupancy:
    """How many blocks of one kernel fit on one SM at once, and what stops more from fitting."""

    blocks_per_sm: int
    limits: dict  # resource -> the block count that resource alone allows
    warps_per_block: int
    registers_per_block: int
    shared_per_block: int
    spec: GPUSpec

    @property
    def limiter(self) -> str:
        """The resource that allows the fewest blocks (the first in the order of ``limits`` on a tie)."""
        return min(self.limits, key=self.limits.get)

    @property
    def warps_per_sm(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def fraction(self) -> float:
        """Resident warps over the SM's maximum: what 'occupancy' usually means."""
        return self.warps_per_sm / self.spec.max_warps_per_sm

    def waves(self, grid_blocks: int) -> float:
        """How many rounds of ``blocks_per_sm`` blocks on every SM a grid of ``grid_blocks`` blocks takes."""
        return grid_blocks / (self.blocks_per_sm * self.spec.sm_count)

    def __str__(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self.limits.items())
        return (f"{self.blocks_per_sm} block(s) of {self.warps_per_block} warps per SM = {self.warps_per_sm} "
                f"of {self.spec.max_warps_per_sm} warps ({self.fraction:.0%}); limited by {self.limiter} "
                f"(blocks allowed by each resource: {parts})")


def _round_up(v: int, unit: int) -> int:
    return -(-v // unit) * unit


def occupancy(threads_per_block: int, registers_per_thread: int, shared_per_block: int = 0,
              spec: GPUSpec = H200) -> Occupancy:
    """Blocks of a kernel resident on one SM, from its block size, registers per thread and shared memory.

    The same arithmetic as CUDA's occupancy calculator: registers are allocated per warp in units of
    ``spec.register_alloc_unit``; each block's shared memory is its own plus ``reserved_shared_per_block``.
    """
    if not 1 <= threads_per_block <= spec.max_threads_per_block:
        raise ValueError(
            f"threads_per_block must be in 1..{spec.max_threads_per_block}, got {threads_per_block}")
    if not 1 <= registers_per_thread <= spec.max_registers_per_thread:
        raise ValueError(
            f"registers_per_thread must be in 1..{spec.max_registers_per_thread}, got {registers_per_thread}")
    if not 0 <= shared_per_block <= spec.max_shared_per_block:
        raise ValueError(
            f"shared_per_block must be in 0..{spec.max_shared_per_block} bytes, got {shared_per_block}")
    warps = -(-threads_per_block // spec.warp_size)
    regs_per_warp = _round_up(registers_per_thread * spec.warp_size, spec.register_alloc_unit)
    smem = shared_per_block + spec.reserved_shared_per_block
    limits = {
        "warps": spec.max_warps_per_sm // warps,
        "registers": spec.registers_per_sm // (regs_per_warp * warps),
        "shared memory": spec.max_shared_per_sm // smem,
        "blocks": spec.max_blocks_per_sm,
    }
    return Occupancy(min(limits.values()), limits, warps, regs_per_warp * warps, shared_per_block, spec)


# EIATTR codes of a cubin's per-kernel .nv.info section (what cuobjdump prints)
_EIATTR_REQNTID = 0x10  # the block size the kernel was compiled for: (x, y, z) threads
_EIATTR_REGCOUNT = 0x2F


def cubin_launch_info(cubin: bytes) -> dict:
    """``{"threads_per_block", "registers_per_thread", "static_shared_bytes"}`` of the (first) kernel in a
    cubin made by tileiras: its required block size (EIATTR_REQNTID), its registers per thread
    (EIATTR_REGCOUNT) and the size of its ``.nv.shared`` section. cuTile chooses the block size; a kernel's
    dynamic shared memory (TMA staging buffers) is set at launch and is not in the cubin.
    """
    from .cubin_info import _sections

    sections = _sections(cubin)
    info: dict = {}
    for name, data in sections.items():
        if not name.startswith(".nv.info"):
            continue
        i = 0
        while i + 2 <= len(data):
            fmt, attr = data[i], data[i + 1]
            if fmt == 4:  # EIFMT_SVAL: u16 size, then the payload
                size = struct.unpack_from("<H", data, i + 2)[0]
                payload = data[i + 4:i + 4 + size]
                if attr == _EIATTR_REQNTID and size >= 12:
                    x, y, z = struct.unpack_from("<III", payload)
                    info.setdefault("threads_per_block", x * y * z)
                elif attr == _EIATTR_REGCOUNT and size >= 8:
                    info.setdefault("registers_per_thread", struct.unpack_from("<I", payload, 4)[0])
                i += 4 + size
            elif fmt in (1, 2, 3):  # EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL: a 4-byte record
                i += 4
            else:
                raise ValueError(f"cubin_launch_info: unknown .nv.info record format {fmt} in {name}")
    missing = {"threads_per_block", "registers_per_thread"} - set(info)
    if missing:
        raise ValueError(f"cubin_launch_info: no {sorted(missing)} record in the cubin's .nv.info sections")
    info["static_shared_bytes"] = sum(
        size for n, size in _section_sizes(cubin).items()
        if n.startswith(".nv.shared.") and not n.startswith(".nv.shared.reserved")
    )
    return info


def _section_sizes(cubin: bytes) -> dict[str, int]:
    """Section name -> sh_size from the ELF section headers (shared memory sections hold no file bytes)."""
    shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sizes = {}
    for h in headers:
        end = cubin.index(b"\0", names_at + h[0])
        sizes[cubin[names_at + h[0]:end].decode()] = h[5]
    return sizes
