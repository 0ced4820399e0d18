"""Named problem shapes and a seeded generator of realistic SSD inputs.

``SHAPES`` holds presets: tiny ones for CPU notebooks and tests (every dimension a different size, a sequence
length that is not a multiple of the chunk size), the dimensions of real Mamba-2 models, and the four
benchmark shapes. ``make_inputs(shape)`` returns a dict of keyword arguments for the SSD functions::

    inputs = make_inputs("tiny", seed=1)
    y = ssd_chunked(**inputs, chunk_size=SHAPES["tiny"].chunk_size)
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = ["BENCHMARK_SHAPES", "MODEL_SHAPES", "SSDShape", "SHAPES", "make_inputs", "get_shape"]


@dataclass(frozen=True)
class SSDShape:
    """The sizes of one SSD problem: b, l, h, p, g, n and the chunk size Q."""

    batch: int  # b
    seqlen: int  # l
    nheads: int  # h
    headdim: int  # p
    ngroups: int  # g (divides h)
    dstate: int  # n
    chunk_size: int  # Q
    name: str = ""

    def __post_init__(self):
        for field in ("batch", "seqlen", "nheads", "headdim", "ngroups", "dstate", "chunk_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SSDShape.{field} must be a positive int, got {value!r}")
        if self.nheads % self.ngroups:
            raise ValueError(
                f"SSDShape: nheads h = {self.nheads} must be divisible by ngroups g = {self.ngroups}"
            )

    @property
    def nchunks(self) -> int:
        """ceil(l / Q): the number of chunks, the last one possibly ragged."""
        return math.ceil(self.seqlen / self.chunk_size)

    @property
    def ragged(self) -> bool:
        """True when l is not a multiple of Q (the last chunk is partial)."""
        return self.seqlen % self.chunk_size != 0

    @property
    def heads_per_group(self) -> int:
        return self.nheads // self.ngroups

    @property
    def dims(self) -> dict[str, int]:
        """The sizes under their math names: ``{"b": batch, "l": seqlen, ..., "Q": chunk_size}``."""
        return {
            "b": self.batch, "l": self.seqlen, "h": self.nheads, "p": self.headdim,
            "g": self.ngroups, "n": self.dstate, "Q": self.chunk_size,
        }

    def replace(self, **changes) -> SSDShape:
        """A copy with some fields changed (``name`` gets a suffix unless given)."""
        if "name" not in changes and self.name:
            changes["name"] = self.name + "*"
        return dataclasses.replace(self, **changes)

    def scaled(self, *, seqlen: int | None = None, batch: int | None = None) -> SSDShape:
        """Same model dims with another sequence length and/or batch (e.g. a short run of a real shape)."""
        return self.replace(
            seqlen=self.seqlen if seqlen is None else seqlen, batch=self.batch if batch is None else batch
        )

    def __str__(self) -> str:
        d = self.dims
        core = " ".join(f"{k}{v}" for k, v in d.items())
        return f"{self.name} ({core})" if self.name else core


def _preset(name, b, l, h, p, g, n, Q) -> tuple[str, SSDShape]:
    return name, SSDShape(b, l, h, p, g, n, Q, name)


#: named presets; tiny ones have every dimension distinct and a ragged sequence
SHAPES: dict[str, SSDShape] = dict(
    [
        # CPU-sized: distinct sizes in every dim, l not a multiple of Q
        _preset("tiny", 2, 37, 6, 5, 2, 7, 16),
        _preset("tiny-g1", 3, 29, 4, 6, 1, 5, 8),
        _preset("tiny-g3", 2, 45, 6, 4, 3, 9, 16),
        _preset("small", 2, 200, 8, 16, 2, 24, 64),
        # dims of tile kernels on CPU: powers of two inside, still ragged and distinct
        _preset("small-pow2", 2, 100, 4, 16, 2, 32, 32),
        # the real models (Mamba2 module defaults: expand 2, headdim 64, d_state 128, ngroups 1, chunk 256)
        # mamba2-130m: d_model 768 → d_inner 1536 → 24 heads; 370m: 1024 → 2048 → 32; 1.3b: 2048 → 4096 → 64;
        # 2.7b: 2560 → 5120 → 80 (one sequence of 2048 tokens, the context they were trained at)
        _preset("mamba2-130m", 1, 2048, 24, 64, 1, 128, 256),
        _preset("mamba2-370m", 1, 2048, 32, 64, 1, 128, 256),
        _preset("mamba2-1.3b", 1, 2048, 64, 64, 1, 128, 256),
        _preset("mamba2-2.7b", 1, 2048, 80, 64, 1, 128, 256),
        # the four benchmark shapes (see docs: H200 baselines)
        _preset("b8-l4096-h80", 8, 4096, 80, 64, 1, 128, 256),
        _preset("b1-l32768-h80", 1, 32768, 80, 64, 1, 128, 256),
        _preset("b4-l2048-h24", 4, 2048, 24, 64, 1, 128, 256),
        _preset("b2-l8192-h128-g8", 2, 8192, 128, 64, 8, 128, 128),
    ]
)

#: the benchmark shapes, in order
BENCHMARK_SHAPES = ("b8-l4096-h80", "b1-l32768-h80", "b4-l2048-h24", "b2-l8192-h128-g8")
#: the released Mamba-2 models' SSD widths (``bench --shapes mamba2-370m mamba2-1.3b mamba2-2.7b``)
MODEL_SHAPES = ("mamba2-370m", "mamba2-1.3b", "mamba2-2.7b")


_STREAMS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")


def get_shape(shape: SSDShape | str) -> SSDShape:
    """An ``SSDShape`` from itself or a preset name (KeyError listing the presets otherwise)."""
    if isinstance(shape, SSDShape):
        return shape
    if isinstance(shape, str):
        try:
            return SHAPES[shape]
        except KeyError:
            raise KeyError(f"unknown shape preset {shape!r}; presets: {', '.join(SHAPES)}") from None
    raise TypeError(f"shape must be an SSDShape or a preset name, got {type(shape).__name__}")


def make_inputs(
    shape: SSDShape | str,
    *,
    seed: int = 0,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    D: bool = True,
    z: bool = False,
    dt_bias: bool = False,
    initial_states: bool = False,
) -> dict:
    """Seeded, realistic inputs for the SSD functions, as a dict of their keyword arguments.

    Keys: ``x`` (b, l, h, p), ``dt`` (b, l, h), ``A`` (h,), ``B``, ``C`` (b, l, g, n), and when asked
    ``D`` (h,), ``z`` (b, l, h, p), ``dt_bias`` (h,), ``initial_states`` (b, h, p, n). Not ``chunk_size``
    (take it from the shape). Values follow Mamba-2:

    * x, B, C, z: standard normal, in ``dtype``;
    * dt: without dt_bias, already positive: ``softplus(randn - 4)`` (≈ 0.02 typical) in ``dtype``; with
      dt_bias, the raw pre-softplus projection (≈ N(0, 0.5²)) plus ``dt_bias = softplus⁻¹(dt0)`` with dt0
      log-uniform in [1e-3, 0.1] (Mamba2's init) — and then the dict also holds ``dt_softplus=True``, so that
      ``f(**inputs)`` applies the softplus;
    * A = -exp(U(log 1, log 16)), i.e. in [-16, -1] (Mamba2's A_init_range); D ≈ 1 + 0.1·N(0, 1);
    * initial_states: N(0, 1).

    A, D, dt_bias and initial_states are float32 like mamba_ssm's parameters and states (float64 when
    ``dtype`` is float64, so float64 runs are exact ground truth). The values do not depend on ``dtype`` or
    ``device`` beyond rounding, nor on which optional tensors are asked for: each tensor is drawn in float64
    on the CPU from its own local ``torch.Generator`` seeded from ``seed``, never the global RNG.
    """
    s = get_shape(shape)
    b, l, h, p, g, n = s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate
    f64 = torch.float64

    def gen(key: str) -> torch.Generator:
        # one stream per tensor, so asking for z (say) does not change x
        return torch.Generator().manual_seed(seed * 7919 + _STREAMS.index(key))

    def normal(key, *size):
        return torch.randn(*size, generator=gen(key), dtype=f64)

    def uniform(key, lo, hi, *size):
        return lo + (hi - lo) * torch.rand(*size, generator=gen(key), dtype=f64)

    param_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    out: dict = {}
    out["x"] = normal("x", b, l, h, p).to(dtype)
    if dt_bias:
        dt0 = torch.exp(uniform("dt_bias", math.log(1e-3), math.log(0.1), h))  # the step size at init
        out["dt"] = (0.5 * normal("dt", b, l, h)).to(dtype)  # raw projection output, pre-softplus
        bias = dt0 + torch.log(-torch.expm1(-dt0))  # softplus⁻¹(dt0)
    else:
        out["dt"] = F.softplus(normal("dt", b, l, h) - 4.0).to(dtype)
    out["A"] = (-torch.exp(uniform("A", 0.0, math.log(16.0), h))).to(param_dtype)
    out["B"] = normal("B", b, l, g, n).to(dtype)
    out["C"] = normal("C", b, l, g, n).to(dtype)
    if D:
        out["D"] = (1.0 + 0.1 * normal("D", h)).to(param_dtype)
    if z:
        out["z"] = normal("z", b, l, h, p).to(dtype)
    if dt_bias:
        out["dt_bias"] = bias.to(param_dtype)
        out["dt_softplus"] = True
    if initial_states:
        out["initial_states"] = normal("initial_states", b, h, p, n).to(param_dtype)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in out.items()}
