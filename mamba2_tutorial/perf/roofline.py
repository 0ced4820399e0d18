"""Counted FLOPs and bytes of the SSD forward pass, the GPU's two ceilings, and the roofline floor.

Before timing anything, count two numbers: the floating-point operations the forward pass must do on the
tensor cores, and the fewest bytes it must move through device memory (each input read once, each output
written once). Operations over the matrix rate and bytes over the copy bandwidth give two times; the larger
one is the *floor*: no implementation runs much faster. A measured time over the floor is the gap; which term
is larger says whether the problem is moving bytes or doing arithmetic.

Dimensions (the names follow the math): batch b, sequence length l, heads h, head dim p, groups g (heads share
B and C within a group of h/g heads), state size n, chunk size Q, c = ceil(l/Q) chunks.

FLOPs (one multiply-add = 2 FLOPs; only the matrix products, which run on the tensor cores):

======================  ===========================  ====================================================
term                    count                        what it is
======================  ===========================  ====================================================
chunk state             2·b·l·h·p·n                  states[c] = Σ_t x_t ⊗ (decay_t·dt_t·B_t): a
                                                     (p × Q)(Q × n) product per (batch, chunk, head)
CBᵀ                     2·b·g·P·n                    the (Q × Q) matrix C·Bᵀ per (batch, chunk, group)
intra-chunk output      2·b·h·P·p                    y_diag = (CBᵀ ∘ decay ∘ mask · dt) @ x per head
inter-chunk output      2·b·l·h·p·n                  y_off = C_t · (state entering the chunk), per head
======================  ===========================  ====================================================

P is the number of (query t, key s) pairs inside chunks that the products touch. With ``causal=True`` (the
default) it counts only s ≤ t: Q·(Q+1)/2 per full chunk, r·(r+1)/2 for a ragged last chunk of r rows, so about
l·Q/2 — the work that is actually needed (a kernel that skips tiles above the diagonal does a little more, a
kernel that computes the whole square does twice as much). ``causal=False`` counts the full square, P = l·Q:
a looser floor (0.22 ms at b8 l4096 h80 Q256 with dt in float32, at 790 TFLOP/s and 4.3 TB/s).

Not counted, and why: the in-chunk cumsum of dt·A (b·l·h adds); the pairwise decays exp(dA_t − dA_s) (b·h·P
exponentials on the special-function units: about 0.08 ms of MUFU time at b8 l4096 h80 if done pairwise,
avoidable by factoring exp(dA_t)·exp(−dA_s) inside small sub-blocks); the elementwise scalings by dt and
exp(dA); state passing (2·b·c·h·p·n FP32 vector FLOPs, 0.25 FLOP per byte of state it streams: always
memory-bound). They are reported as ``vector_flops`` where relevant and left out of the floor, which uses
tensor-core FLOPs only.

Bytes of the whole forward pass (the minimum, no intermediates): x, dt, B, C (and z, D if used) read once, A
read once, y written once (and the final states, fp32, if returned). Element sizes come from the actual
dtypes.

Per kernel, for the three-kernel design (chunk state → state passing → chunk scan), intermediate tensors
travel through memory too: the chunk states (b, c, h, p, n) are written by chunk state, read and re-written
(as the state entering each chunk) by state passing, and read by chunk scan, each time ``state_bytes`` (4,
fp32) per element; the cumsum outputs dt_out and dA_cumsum (b, h, c, Q), fp32, are written once and read by
the later kernels. At b8 l4096 h80 the chunk states alone are 336 MB, as large as x: the three-kernel floor is
well above the fused floor, which is the case for fusing state passing into a neighbour.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

DIM_KEYS = ("b", "l", "h", "p", "g", "n", "Q")
KERNELS = ("chunk_state", "state_passing", "chunk_scan")
FUSED_KERNELS = ("chunk_state_passing", "chunk_scan")  # kernels 1 and 2 fused into one


@dataclass(frozen=True)
class Dims:
    """The SSD problem size: batch b, length l, heads h, head dim p, groups g, state size n, chunk size Q."""

    b: int
    l: int
    h: int
    p: int
    g: int
    n: int
    Q: int

    def __post_init__(self):
        for k in DIM_KEYS:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Dims: {k} must be a positive int, got {v!r}")
        if self.h % self.g:
            raise ValueError(f"Dims: nheads h={self.h} must be a multiple of ngroups g={self.g}")

    @property
    def nchunks(self) -> int:
        return math.ceil(self.l / self.Q)

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in DIM_KEYS}


def dims_of(obj) -> Dims:
    """Dims from a ``Dims``, a mapping with keys b, l, h, p, g, n, Q, or an ``SSDShape`` (batch, seqlen,
    ...)."""
    if isinstance(obj, Dims):
        return obj
    if isinstance(obj, Mapping):
        missing = [k for k in DIM_KEYS if k not in obj]
        if missing:
            raise ValueError(f"dims_of: mapping lacks keys {missing}; expected {list(DIM_KEYS)}")
        return Dims(**{k: obj[k] for k in DIM_KEYS})
    names = ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate", "chunk_size")
    if all(hasattr(obj, a) for a in names):
        return Dims(*(getattr(obj, a) for a in names))
    raise TypeError(
        f"dims_of: expected Dims, a mapping with keys {list(DIM_KEYS)} or an SSDShape, got {type(obj)}"
    )


def causal_pairs(l: int, Q: int, *, causal: bool = True) -> int:
    """Number of (t, s) pairs inside chunks with s ≤ t (``causal``) or all pairs of the chunk's rows (not
    causal).

    Full chunks contribute Q·(Q+1)/2 (causal) or Q·Q; a ragged last chunk of r = l mod Q rows r·(r+1)/2 or
    r·Q.
    """
    full, r = divmod(l, Q)
    if causal:
        return full * Q * (Q + 1) // 2 + r * (r + 1) // 2
    return l * Q


@dataclass(frozen=True)
class Cost:
    """Counted work: tensor-core FLOPs, bytes moved, and the named terms that add up to each (for display)."""

    flops: float
    bytes: float
    flop_terms: dict[str, float] = field(default_factory=dict)
    byte_terms: dict[str, float] = field(default_factory=dict)
    vector_flops: float = 0.0

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    def floor_ms(self, ceilings: Ceilings | None = None) -> float:
        c = ceilings or H200_CEILINGS
        return max(self.compute_ms(c), self.memory_ms(c))

    def compute_ms(self, ceilings: Ceilings | None = None) -> float:
        return self.flops / (ceilings or H200_CEILINGS).mma_flops_per_s * 1e3

    def memory_ms(self, ceilings: Ceilings | None = None) -> float:
        return self.bytes / (ceilings or H200_CEILINGS).copy_bytes_per_s * 1e3

    def bound(self, ceilings: Ceilings | None = None) -> str:
        """'compute' or 'memory': which term sets the floor."""
        return "compute" if self.compute_ms(ceilings) >= self.memory_ms(ceilings) else "memory"

    def __add__(self, other: Cost) -> Cost:
        ft, bt = dict(self.flop_terms), dict(self.byte_terms)
        for k, v in other.flop_terms.items():
            ft[k] = ft.get(k, 0.0) + v
        for k, v in other.byte_terms.items():
            bt[k] = bt.get(k, 0.0) + v
        return Cost(
            self.flops + other.flops, self.bytes + other.bytes, ft, bt, self.vector_flops + other.vector_flops
        )


def _cost(flop_terms: dict[str, float], byte_terms: dict[str, float], vector_flops: float = 0.0) -> Cost:
    return Cost(
        float(sum(flop_terms.values())),
        float(sum(byte_terms.values())),
        flop_terms,
        byte_terms,
        float(vector_flops),
    )


def matmul_flops(dims, *, causal: bool = True) -> dict[str, float]:
    """The four tensor-core FLOP terms of the forward pass (see the module docstring)."""
    d = dims_of(dims)
    pairs = causal_pairs(d.l, d.Q, causal=causal)
    return {
        "chunk state (x ⊗ B)": 2.0 * d.b * d.l * d.h * d.p * d.n,
        "CBᵀ": 2.0 * d.b * d.g * pairs * d.n,
        "intra-chunk (scores @ x)": 2.0 * d.b * d.h * pairs * d.p,
        "inter-chunk (C @ state)": 2.0 * d.b * d.l * d.h * d.p * d.n,
    }


def forward_cost(
    dims,
    *,
    io_bytes: int = 2,
    dt_bytes: int | None = None,
    causal: bool = True,
    has_D: bool = False,
    has_z: bool = False,
    final_states: bool = False,
) -> Cost:
    """FLOPs and the minimum bytes of the whole SSD forward (inputs read once, outputs written once).

    io_bytes: element size of x, B, C, z and y (2 for bf16/fp16); dt_bytes: element size of dt (default
    io_bytes); A and D are fp32; final states (b, h, p, n) fp32 when ``final_states``.
    """
    d = dims_of(dims)
    dt_bytes = io_bytes if dt_bytes is None else dt_bytes
    tokens = d.b * d.l
    by = {
        "x": tokens * d.h * d.p * io_bytes,
        "dt": tokens * d.h * dt_bytes,
        "A": d.h * 4,
        "B": tokens * d.g * d.n * io_bytes,
        "C": tokens * d.g * d.n * io_bytes,
        "y": tokens * d.h * d.p * io_bytes,
    }
    if has_D:
        by["D"] = d.h * 4
    if has_z:
        by["z"] = tokens * d.h * d.p * io_bytes
    if final_states:
        by["final states"] = d.b * d.h * d.p * d.n * 4
    return _cost(matmul_flops(d, causal=causal), {k: float(v) for k, v in by.items()})


def kernel_costs(
    dims,
    *,
    io_bytes: int = 2,
    dt_bytes: int | None = None,
    state_bytes: int = 4,
    init_state_bytes: int | None = None,
    causal: bool = True,
    fused: bool = False,
) -> dict[str, Cost]:
    """Per-kernel FLOPs and bytes of the three-kernel design: chunk_state, state_passing, chunk_scan.

    ``fused=True``: the two-kernel design ``ssd_forward`` runs when its config fuses the first two
    (``chunk_state_passing``, ``chunk_scan``): the chunk states never cross memory.

    chunk_state computes the in-chunk cumsum too (it writes dt_out and dA_cumsum, fp32, for the later
    kernels); chunk states are ``state_bytes`` per element (4: fp32); the states entering each chunk, written
    by state passing and read by chunk scan, ``init_state_bytes`` (default ``state_bytes``; mamba_ssm stores
    them in bf16: 2).
    """
    d = dims_of(dims)
    dt_bytes = io_bytes if dt_bytes is None else dt_bytes
    init_state_bytes = state_bytes if init_state_bytes is None else init_state_bytes
    tokens = d.b * d.l
    cq = d.b * d.h * d.nchunks * d.Q  # elements of dt_out / dA_cumsum (b, h, c, Q)
    states = d.b * d.nchunks * d.h * d.p * d.n
    fl = matmul_flops(d, causal=causal)
    chunk_state = _cost(
        {"chunk state (x ⊗ B)": fl["chunk state (x ⊗ B)"]},
        {
            "x": tokens * d.h * d.p * io_bytes,
            "B": tokens * d.g * d.n * io_bytes,
            "dt": tokens * d.h * dt_bytes,
            "A": d.h * 4,
            "dt_out, dA_cumsum (write)": 2 * cq * 4,
            "chunk states (write)": states * state_bytes,
        },
    )
    state_passing = _cost(
        {},
        {
            "chunk states (read)": states * state_bytes,
            "dA_cumsum at chunk ends": d.b * d.h * d.nchunks * 4,
            "states entering chunks (write)": states * init_state_bytes,
            "final states (write)": d.b * d.h * d.p * d.n * 4,
        },
        vector_flops=2.0 * states,
    )
    chunk_scan = _cost(
        {k: fl[k] for k in ("CBᵀ", "intra-chunk (scores @ x)", "inter-chunk (C @ state)")},
        {
            "x": tokens * d.h * d.p * io_bytes,
            "B": tokens * d.g * d.n * io_bytes,
            "C": tokens * d.g * d.n * io_bytes,
            "dt_out, dA_cumsum (read)": 2 * cq * 4,
            "states entering chunks (read)": states * init_state_bytes,
            "y (write)": tokens * d.h * d.p * io_bytes,
        },
    )
    if fused:
        both = chunk_state + state_passing
        terms = {k: v for k, v in both.byte_terms.items() if not k.startswith("chunk states")}
        first = _cost(both.flop_terms, terms, both.vector_flops)
        out = {"chunk_state_passing": first, "chunk_scan": chunk_scan}
        assert tuple(out) == FUSED_KERNELS
        return out
    out = {"chunk_state": chunk_state, "state_passing": state_passing, "chunk_scan": chunk_scan}
    assert tuple(out) == KERNELS
    return out


def design_floors_ms(dims, ceilings: Ceilings | None = None, **cost_kwargs) -> dict[str, float]:
    """Floors of a few kernel designs (ms), from the bytes each must move between kernels.

    * three kernels, fp32 states: chunk states written, read and re-written by state passing, read by chunk
      scan;
    * the same with the states entering each chunk stored in bf16 (mamba_ssm's choice);
    * state passing fused into chunk state (one kernel walks the chunks of a (batch, head, state tile) in
      order, carrying the state in registers, and writes only the entering states), fp32 or bf16 states;
    * one fused kernel: nothing but the inputs and the output cross memory (the floor of the whole forward).
    """
    d = dims_of(dims)
    kw = dict(cost_kwargs)
    three = kernel_costs(d, **kw)
    three_bf16 = kernel_costs(d, **(kw | {"init_state_bytes": 2}))

    def fused_two(init_bytes: int) -> float:
        # the chunk states never leave the fused kernel: no write, no read
        k = kernel_costs(d, **(kw | {"init_state_bytes": init_bytes, "fused": True}))
        return sum(c.floor_ms(ceilings) for c in k.values())

    return {
        "3 kernels, fp32 states": sum(c.floor_ms(ceilings) for c in three.values()),
        "3 kernels, bf16 entering states": sum(c.floor_ms(ceilings) for c in three_bf16.values()),
        "state passing fused into chunk state, fp32": fused_two(4),
        "state passing fused into chunk state, bf16": fused_two(2),
        "1 fused kernel": forward_cost(
            d, **{k: v for k, v in kw.items() if k in ("io_bytes", "dt_bytes", "causal")}
        ).floor_ms(ceilings),
    }


@dataclass(frozen=True)
class Ceilings:
    """The two rates a kernel cannot beat: dense bf16 tensor-core FLOP/s and device-memory bytes/s (read +
    write)."""

    mma_flops_per_s: float
    copy_bytes_per_s: float
    source: str = ""

    @property
    def ridge(self) -> float:
        """FLOP per byte above which a kernel is compute-bound."""
        return self.mma_flops_per_s / self.copy_bytes_per_s

    def as_dict(self) -> dict:
        return {
            "mma_tflops": self.mma_flops_per_s / 1e12,
            "copy_tbps": self.copy_bytes_per_s / 1e12,
            "source": self.source,
        }


# The ceilings a kernel can reach are measured, not read off a datasheet: the benchmark measures them at the
# start of every run (``measure_ceilings``) and records them with its results, which compute every floor with
# them. H200_CEILINGS is the fallback when a run does not measure (``bench --no-measure-ceilings``): an 8192³
# bf16 torch.matmul on random data ran at 769-798 TFLOP/s on an H200 (2026-10-28 and 2026-11-04), a
# device-to-device copy moved ~4.3 TB/s counting bytes read plus bytes written.
H200_CEILINGS = Ceilings(
    790e12, 4.3e12, "H200, measured: bf16 matmul 8192^3 ~790 TFLOP/s, d2d copy ~4.3 TB/s"
)
#: the H200 SXM datasheet's dense bf16 tensor-core rate and HBM3e bandwidth: peaks at the boost clock that no
#: real kernel sustains (the measured ceilings are what a kernel can reach)
H200_DATASHEET = Ceilings(989e12, 4.8e12, "NVIDIA H200 SXM datasheet: 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e")
#: the H100 SXM datasheet's: the same tensor cores, HBM3 at 3.35 TB/s
H100_DATASHEET = Ceilings(989e12, 3.35e12,
                          "NVIDIA H100 SXM datasheet: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3")


def datasheet_for(device: str) -> Ceilings | None:
    """The datasheet's peaks for a GPU named as ``torch.cuda.get_device_name`` names it (an H200, or an H100
    in its SXM form, "H100 80GB HBM3"); None for a GPU this module has no datasheet for."""
    if "H200" in device:
        return H200_DATASHEET
    if "H100" in device and "HBM3" in device:
        return H100_DATASHEET
    return None


def floor_ms(dims, ceilings: Ceilings | None = None, **cost_kwargs) -> float:
    """Roofline floor of the whole forward in ms: max(FLOPs / matrix rate, bytes / copy bandwidth)."""
    return forward_cost(dims, **cost_kwargs).floor_ms(ceilings)


def kernel_floors_ms(dims, ceilings: Ceilings | None = None, **cost_kwargs) -> dict[str, float]:
    """Roofline floor of each kernel in ms (their sum is the design's floor): the three kernels, or the two of
    the fused design with ``fused=True``."""
    return {k: c.floor_ms(ceilings) for k, c in kernel_costs(dims, **cost_kwargs).items()}


def measure_ceilings(
    *, copy_bytes: int = 2 << 30, matmul_n: int = 8192, warmup_ms: float = 50.0, rep_ms: float = 300.0
) -> Ceilings:
    """Measure the two ceilings on the current CUDA GPU (needs one; takes about a second).

    Copy: ``dst.copy_(src)`` of ``copy_bytes`` random bytes, counting bytes read plus bytes written.
    Matrix rate: a ``matmul_n``³ bf16 ``torch.matmul`` on random data (2·n³ FLOPs). Medians with CUDA events.
    """
    import torch

    from .timing import time_cuda

    if not torch.cuda.is_available():
        raise RuntimeError("measure_ceilings needs a CUDA GPU (torch.cuda.is_available() is False)")
    src = torch.randint(-128, 127, (copy_bytes,), dtype=torch.int8, device="cuda")
    dst = torch.empty_like(src)
    t_copy = time_cuda(lambda: dst.copy_(src), warmup_ms=warmup_ms, rep_ms=rep_ms, flush_l2=False).median_ms
    src = dst = None  # free the copy buffers before the matmul
    a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    bm = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    t_mm = time_cuda(lambda: a @ bm, warmup_ms=warmup_ms, rep_ms=rep_ms, flush_l2=False).median_ms
    name = torch.cuda.get_device_name()
    today = _dt.date.today().isoformat()
    return Ceilings(
        mma_flops_per_s=2.0 * matmul_n**3 / (t_mm * 1e-3),
        copy_bytes_per_s=2.0 * copy_bytes / (t_copy * 1e-3),
        source=f"{name}, measured {today}: bf16 matmul {matmul_n}^3, d2d copy {copy_bytes / 2**30:.0f} GiB",
    )
