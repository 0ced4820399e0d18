"""The Mamba-2 block: the layer that turns vectors into the SSD's inputs, runs the SSD, and maps back.

One block (mamba_ssm's ``Mamba2``, Hugging Face's ``Mamba2Mixer``) maps u (b, l, d_model) to the same shape::

    z, xBC, dt = in_proj(u)                       (b, l, d_inner), (b, l, d_inner + 2·g·n), (b, l, h)
    xBC        = silu(causal depthwise conv1d(xBC))       each channel sees its own last d_conv inputs
    x, B, C    = xBC                              x (b, l, h, p), B and C (b, l, g, n)
    y          = SSD(x, dt, A, B, C, D, dt_bias, softplus, dt_limit)                  (b, l, h, p)
    out        = out_proj(gated RMSNorm(y, z))    RMSNorm(y · silu(z)) per group of d_inner / g channels

with d_inner = expand·d_model = h·p, A = -exp(A_log) (h,) and ``in_proj`` laid out as mamba_ssm's
``[z | x | B | C | dt]``. Parameter names and shapes are mamba_ssm's, so a state dict of either library loads.

The SSD is any of this package's implementations, chosen by name (:data:`SSD_FORMS`): the reference ladder
(``"recurrent"``, ``"quadratic"``, ``"chunked"``) or the cuTile kernels (``"cutile"``:
:func:`mamba2_tutorial.ssd_forward` on the GPU or the CPU tile executor, with the cuTile backward kernels
under autograd). All of them are differentiable.

Packed rows (mamba_ssm's ``seq_idx`` (b, l) int32, non-decreasing: several sequences end to end in one
row): :meth:`Mamba2Block.forward(u, seq_idx=...) <Mamba2Block.forward>` resets both places a block remembers
the past at every change of ``seq_idx``: the causal conv reads no input of the previous sequence (its taps
reaching across the boundary read zeros, as the start of a sequence does) and the SSD's state starts again
from zero. A packed row's output is then each sequence's output when run alone.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..runtime.validation import validate_packing

__all__ = ["Mamba2Block", "GatedRMSNorm", "causal_conv1d", "SSD_FORMS", "ssd_function"]

#: the SSD implementations a block can run, by name
SSD_FORMS = ("chunked", "recurrent", "quadratic", "cutile")


def ssd_function(ssd: str | Callable, backend: str = "auto") -> Callable:
    """The SSD named ``ssd`` as a function with ``mamba_chunk_scan_combined``'s signature
    ``(x, dt, A, B, C, chunk_size, *, D, z, dt_bias, dt_softplus, dt_limit, return_final_states, seq_idx)``.

    ``ssd`` is one of :data:`SSD_FORMS` or such a function itself; ``backend`` ("auto", "cpu", "gpu") is where
    ``"cutile"`` runs its kernels. Every named form takes packed rows (``seq_idx``): ``"recurrent"`` and
    ``"quadratic"`` with their own resets, ``"cutile"`` through ``ssd_forward``'s, and ``"chunked"`` by
    running each sequence alone (:func:`~mamba2_tutorial.reference.packed.ssd_each_sequence`).
    """
    from ..reference import ssd_chunked, ssd_quadratic, ssd_recurrent
    from ..reference.packed import ssd_each_sequence

    if callable(ssd):
        return ssd
    if ssd == "chunked":
        def chunked(x, dt, A, B, C, chunk_size, *, seq_idx=None, **options):
            if seq_idx is None:
                return ssd_chunked(x, dt, A, B, C, chunk_size, **options)
            alone = functools.partial(ssd_chunked, chunk_size=chunk_size)  # one sequence at a time
            return ssd_each_sequence(alone, x, dt, A, B, C, seq_idx, **options)

        return chunked
    if ssd in ("recurrent", "quadratic"):
        form = ssd_recurrent if ssd == "recurrent" else ssd_quadratic

        def sequence_form(x, dt, A, B, C, chunk_size, **options):  # no chunks: chunk_size is not used
            return form(x, dt, A, B, C, **options)

        return sequence_form
    if ssd == "cutile":
        from ..runtime.platforms import require_cutile

        require_cutile()   # where cuTile does not import: CuTileUnavailable, saying how to continue
        from ..fast.forward import ssd_forward

        def cutile(x, dt, A, B, C, chunk_size, **options):
            return ssd_forward(x, dt, A, B, C, chunk_size, backend=backend, **options)

        return cutile
    raise ValueError(f"ssd must be one of {SSD_FORMS} or a function, got {ssd!r}")


def _takes_seq_idx(function: Callable) -> bool:
    """Whether ``function`` accepts a ``seq_idx`` keyword (by name or through ``**kwargs``)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): let the call decide
        return True
    return any(p.name == "seq_idx" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def causal_conv1d(xBC: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  seq_idx: torch.Tensor | None = None) -> torch.Tensor:
    """Depthwise causal convolution over the sequence: xBC (b, l, c), weight (c, 1, k) or (c, k), bias (c,).

    ``out[:, t, i] = bias[i] + Σ_j weight[i, j] · xBC[:, t - k + 1 + j, i]`` with zeros before the start: each
    channel mixes only its own last k inputs, and never a future one. Returns (b, l, c).

    Packed rows (``seq_idx`` (b, l) int32, non-decreasing, as mamba_ssm's ``causal_conv1d_fn``): tap j of
    output t reads input t - k + 1 + j only where that input belongs to t's sequence, and zero otherwise, so
    that every sequence starts as if it were alone (the zeros before the start).
    """
    if xBC.ndim != 3:
        raise ValueError(f"xBC must have shape (b, l, c) (3 dimensions), got {tuple(xBC.shape)}")
    b, l, c = xBC.shape
    weight = weight.reshape(weight.shape[0], -1)  # (c, k)
    if weight.shape[0] != c:
        raise ValueError(f"weight must have shape (c, 1, k) = ({c}, 1, k), got {tuple(weight.shape)}")
    k = weight.shape[1]
    packing = None if seq_idx is None else validate_packing(seq_idx, None, False, b, l, xBC.device)
    padded = F.pad(xBC, (0, 0, k - 1, 0))  # (b, k - 1 + l, c): zeros before the start
    if packing is None:
        out = sum(weight[:, j] * padded[:, j : j + l] for j in range(k))  # tap j reads input t - (k - 1) + j
    else:
        own = packing.seq_idx  # (b, l)
        source = F.pad(own, (k - 1, 0), value=-1)  # (b, k - 1 + l): the sequence of each input; -1 = padding
        out = sum(weight[:, j] * padded[:, j : j + l] * (source[:, j : j + l] == own)[..., None].to(xBC.dtype)
                  for j in range(k))  # a tap that reaches into another sequence reads zero
    return out if bias is None else out + bias


class GatedRMSNorm(nn.Module):
    """RMSNorm with a silu gate, per group of ``group_size`` channels (mamba_ssm's ``RMSNormGated``).

    ``norm_before_gate=False`` (Mamba-2's choice): ``RMSNorm(y · silu(z)) · weight``; ``True``:
    ``RMSNorm(y) · weight · silu(z)``. Each group of ``group_size`` consecutive channels gets its own root
    mean square, so that with g groups the norm never mixes the heads of two groups. Computed in float32
    (float64 for float64 inputs).
    """

    def __init__(self, hidden_size: int, *, group_size: int | None = None, eps: float = 1e-5,
                 norm_before_gate: bool = False, device=None, dtype=None):
        super().__init__()
        group_size = hidden_size if group_size is None else group_size
        if group_size <= 0 or hidden_size % group_size:
            raise ValueError(f"group_size {group_size} must divide hidden_size {hidden_size}")
        self.hidden_size, self.group_size, self.eps = hidden_size, group_size, eps
        self.norm_before_gate = norm_before_gate
        self.weight = nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))

    def forward(self, y: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        if y.shape[-1] != self.hidden_size:
            raise ValueError(f"y must end in {self.hidden_size} channels, got shape {tuple(y.shape)}")
        if z is not None and z.shape != y.shape:
            raise ValueError(f"z must have y's shape {tuple(y.shape)}, got {tuple(z.shape)}")
        dtype = y.dtype
        work = torch.float64 if dtype == torch.float64 else torch.float32  # float64 stays float64
        y = y.to(work)
        if z is not None and not self.norm_before_gate:
            y = y * F.silu(z.to(work))
        groups = y.reshape(*y.shape[:-1], -1, self.group_size)  # (..., groups, group_size)
        groups = groups * torch.rsqrt(groups.pow(2).mean(-1, keepdim=True) + self.eps)
        y = groups.reshape(y.shape) * self.weight.to(work)
        if z is not None and self.norm_before_gate:
            y = y * F.silu(z.to(work))
        return y.to(dtype)

    def extra_repr(self) -> str:
        return f"{self.hidden_size}, group_size={self.group_size}, eps={self.eps}"


def _dims(d_model, d_state, d_conv, expand, headdim, ngroups, chunk_size):
    """Check the hyperparameters; returns (d_inner, nheads). Errors name the argument."""
    for name, value in (("d_model", d_model), ("d_state", d_state), ("d_conv", d_conv), ("headdim", headdim),
                        ("ngroups", ngroups), ("chunk_size", chunk_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    d_inner = expand * d_model
    if d_inner != int(d_inner) or d_inner <= 0:
        raise ValueError(f"expand · d_model must be a positive integer, got {expand} · {d_model} = {d_inner}")
    d_inner = int(d_inner)
    if d_inner % headdim:
        raise ValueError(f"headdim {headdim} must divide d_inner = expand · d_model = {d_inner}")
    nheads = d_inner // headdim
    if nheads % ngroups:
        raise ValueError(f"ngroups {ngroups} must divide the number of heads h = d_inner / headdim "
                         f"= {nheads}")
    return d_inner, nheads


class Mamba2Block(nn.Module):
    """The Mamba-2 block of mamba_ssm's ``Mamba2``, in plain PyTorch around this package's SSD.

    Hyperparameters as ``mamba_ssm.modules.mamba2.Mamba2``: ``d_model``; ``d_state`` (n); ``d_conv`` (the conv
    width); ``expand`` (d_inner = expand · d_model); ``headdim`` (p; h = d_inner / p heads); ``ngroups`` (g);
    ``chunk_size`` (Q); ``A_init_range`` (A = -uniform(A_init_range)); ``D_has_hdim`` (D (h, p) instead of
    (h,)); ``rmsnorm`` (the gated RMSNorm; without it the gate silu(z) goes into the SSD) and
    ``norm_before_gate``; ``norm_eps``; ``dt_min``, ``dt_max``, ``dt_init_floor`` (dt_bias is initialised so
    that softplus(dt_bias) is log-uniform in [dt_min, dt_max], at least dt_init_floor); ``dt_limit`` (dt is
    clamped to it after the softplus); ``bias`` (of in_proj and out_proj), ``conv_bias``.

    ``ssd`` picks the SSD (:data:`SSD_FORMS` or a function; see :func:`ssd_function`), ``backend`` where
    ``"cutile"`` runs; both can be overridden per call of :meth:`forward`.

    Sequence parallel (one sequence split across processes):
    :func:`mamba2_tutorial.model.parallel.sequence_parallel_block` runs a block on a rank's slice. Not here:
    mamba_ssm's ``d_ssm`` (a gated MLP beside the SSM; here every channel goes through the SSD),
    ``conv_init``, and its tensor-parallel options.
    """

    def __init__(self, d_model: int, *, d_state: int = 128, d_conv: int = 4, expand: float = 2,
                 headdim: int = 64, ngroups: int = 1, chunk_size: int = 256,
                 A_init_range: tuple[float, float] = (1.0, 16.0), D_has_hdim: bool = False,
                 rmsnorm: bool = True, norm_before_gate: bool = False, norm_eps: float = 1e-5,
                 dt_min: float = 0.001, dt_max: float = 0.1, dt_init_floor: float = 1e-4,
                 dt_limit: tuple[float, float] = (0.0, float("inf")), bias: bool = False,
                 conv_bias: bool = True,
                 ssd: str | Callable = "chunked", backend: str = "auto", device=None, dtype=None):
        super().__init__()
        self.d_inner, self.nheads = _dims(d_model, d_state, d_conv, expand, headdim, ngroups, chunk_size)
        if not 0 < A_init_range[0] <= A_init_range[1]:
            raise ValueError(f"A_init_range must be (lo, hi) with 0 < lo <= hi, got {A_init_range}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"dt_min and dt_max must satisfy 0 < dt_min <= dt_max, got {dt_min}, {dt_max}")
        ssd_function(ssd, backend)  # reject an unknown name now, not at the first forward
        self.d_model, self.d_state, self.d_conv, self.expand = d_model, d_state, d_conv, expand
        self.headdim, self.ngroups, self.chunk_size = headdim, ngroups, chunk_size
        self.D_has_hdim, self.rmsnorm = D_has_hdim, rmsnorm
        self.dt_limit = (float(dt_limit[0]), float(dt_limit[1]))
        self.ssd, self.backend = ssd, backend
        kw = dict(device=device, dtype=dtype)

        self.conv_dim = self.d_inner + 2 * ngroups * d_state  # the channels of xBC: x, B and C
        d_in_proj = self.d_inner + self.conv_dim + self.nheads  # [z | x | B | C | dt]
        self.in_proj = nn.Linear(d_model, d_in_proj, bias=bias, **kw)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim,
                                padding=d_conv - 1, bias=conv_bias, **kw)

        # dt_bias: softplus(dt_bias) log-uniform in [dt_min, dt_max]; inverse softplus: dt + log(1 - exp(-dt))
        dt = torch.exp(torch.rand(self.nheads, device=device) * (math.log(dt_max) - math.log(dt_min))
                       + math.log(dt_min)).clamp(min=dt_init_floor)
        self.dt_bias = nn.Parameter((dt + torch.log(-torch.expm1(-dt))).to(dtype or torch.float32))
        A = torch.empty(self.nheads, device=device).uniform_(*A_init_range)
        self.A_log = nn.Parameter(torch.log(A).to(dtype or torch.float32))  # A = -exp(A_log) < 0
        self.D = nn.Parameter(torch.ones(self.d_inner if D_has_hdim else self.nheads, **kw))
        for p in (self.dt_bias, self.A_log, self.D):
            p._no_weight_decay = True  # as mamba_ssm: the optimizer leaves these out of weight decay
        self.norm = (GatedRMSNorm(self.d_inner, group_size=self.d_inner // ngroups, eps=norm_eps,
                                  norm_before_gate=norm_before_gate, **kw) if rmsnorm else None)
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **kw)

    # -- the pieces, in the order forward uses them -------------------------------------------------------
    @property
    def A(self) -> torch.Tensor:
        """The decay rates A = -exp(A_log) (h,), float32 (float64 in a float64 block): always negative."""
        work = torch.float64 if self.A_log.dtype == torch.float64 else torch.float32
        return -torch.exp(self.A_log.to(work))

    def D_heads(self) -> torch.Tensor:
        """D as the SSD takes it: (h,), or (h, p) with ``D_has_hdim``."""
        return self.D.reshape(self.nheads, self.headdim) if self.D_has_hdim else self.D

    def split_projection(self, zxbcdt: torch.Tensor):
        """in_proj's output (..., d_in_proj) → z (..., d_inner), xBC (..., conv_dim), dt (..., h)."""
        return torch.split(zxbcdt, [self.d_inner, self.conv_dim, self.nheads], dim=-1)

    def split_xBC(self, xBC: torch.Tensor):
        """The conv's output (..., conv_dim) → x (..., h, p), B (..., g, n), C (..., g, n)."""
        g, n = self.ngroups, self.d_state
        x, B, C = torch.split(xBC, [self.d_inner, g * n, g * n], dim=-1)
        lead = xBC.shape[:-1]
        return x.reshape(*lead, self.nheads, self.headdim), B.reshape(*lead, g, n), C.reshape(*lead, g, n)

    def _check_input(self, u: torch.Tensor, name: str, ndim: int) -> None:
        if not isinstance(u, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(u).__name__}")
        dims = "(b, l, d_model)" if ndim == 3 else "(b, d_model)"
        if u.ndim != ndim or u.shape[-1] != self.d_model:
            raise ValueError(f"{name} must have shape {dims} with d_model = {self.d_model}, "
                             f"got {tuple(u.shape)}")
        if not u.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got {u.dtype}")

    def ssd_inputs(self, u: torch.Tensor, *, seq_idx: torch.Tensor | None = None) -> dict:
        """Everything the SSD receives for u (b, l, d_model), as keyword arguments of ``ssd_chunked``: x
        (b, l, h, p), dt (b, l, h) (raw: before dt_bias, softplus and clamp), A (h,), B and C (b, l, g, n),
        D, z (b, l, h, p) (only without ``rmsnorm``), dt_bias (h,), dt_softplus, dt_limit; plus ``gate``
        (b, l, d_inner), the z that the gated RMSNorm takes, and ``xBC`` (b, l, conv_dim), the conv's
        input. A packed row (``seq_idx`` (b, l) int32) resets the conv at every boundary, and ``seq_idx`` is
        then one of the SSD's arguments too (only then: ``ssd_chunked`` itself does not take it)."""
        self._check_input(u, "u", 3)
        z, xBC, dt = self.split_projection(self.in_proj(u))  # (b, l, d_inner), (b, l, conv_dim), (b, l, h)
        conv = causal_conv1d(xBC, self.conv1d.weight, self.conv1d.bias, seq_idx=seq_idx)
        x, B, C = self.split_xBC(F.silu(conv))
        z_ssd = None if self.rmsnorm else z.reshape(x.shape)
        packed = {} if seq_idx is None else dict(seq_idx=seq_idx)
        return dict(x=x, dt=dt, A=self.A, B=B, C=C, D=self.D_heads(), z=z_ssd, dt_bias=self.dt_bias,
                    dt_softplus=True, dt_limit=self.dt_limit, **packed, gate=z, xBC=xBC)

    def output(self, y: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        """The SSD's output y (..., h, p) → out (..., d_model): gated RMSNorm (when on), then out_proj."""
        y = y.reshape(*y.shape[:-2], self.d_inner)
        if self.norm is not None:
            y = self.norm(y, gate)
        return self.out_proj(y)

    def forward(self, u: torch.Tensor, *, seq_idx: torch.Tensor | None = None,
                ssd: str | Callable | None = None, backend: str | None = None, return_state: bool = False):
        """u (b, l, d_model) → out (b, l, d_model); with ``return_state`` also the
        :class:`~mamba2_tutorial.model.decode.Mamba2State` after the last token, from which
        :func:`~mamba2_tutorial.model.decode.decode_step` continues.

        ``seq_idx`` (b, l) int32, non-decreasing, packs several sequences into a row: the conv and the SSD
        both start again where it changes, so each sequence's output is the one it has alone. The state after
        a packed row is its last sequence's (the conv window holds only that sequence's inputs)."""
        ssd = self.ssd if ssd is None else ssd
        if seq_idx is not None and callable(ssd) and not _takes_seq_idx(ssd):
            name = getattr(ssd, "__name__", ssd)
            raise TypeError(f"ssd {name!r} takes no seq_idx, so it cannot run a packed row: pass a function "
                            f"with mamba_ssm's seq_idx argument, or one of {SSD_FORMS}")
        inputs = self.ssd_inputs(u, seq_idx=seq_idx)
        gate, xBC = inputs.pop("gate"), inputs.pop("xBC")
        run = ssd_function(ssd, self.backend if backend is None else backend)
        y, final_states = run(**inputs, chunk_size=self.chunk_size, return_final_states=True)
        out = self.output(y, gate)
        if not return_state:
            return out
        from .decode import Mamba2State, conv_window

        return out, Mamba2State(conv=conv_window(xBC, self.d_conv, seq_idx=seq_idx), ssm=final_states)

    def step(self, u_t: torch.Tensor, state):
        """One token of decoding: u_t (b, d_model), state → ``(out_t (b, d_model), new_state)``
        (:func:`~mamba2_tutorial.model.decode.decode_step`)."""
        from .decode import decode_step

        return decode_step(self, u_t, state)

    def allocate_state(self, batch: int):
        """The zero state before a first token (:func:`~mamba2_tutorial.model.decode.allocate_state`)."""
        from .decode import allocate_state

        return allocate_state(self, batch)

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, d_state={self.d_state}, d_conv={self.d_conv}, "
                f"expand={self.expand}, headdim={self.headdim}, ngroups={self.ngroups}, "
                f"nheads={self.nheads}, "
                f"chunk_size={self.chunk_size}, dt_limit={self.dt_limit}, ssd={self.ssd!r}")
